"""Container entry point: ``python -m llmctl.serving.torchserve_neuronx.start``.

Reads the blueprint from ``LLMCTL_BLUEPRINT``, writes ``model-config.yaml`` and
``config.properties`` (:mod:`.config`) to ``$LLMCTL_TS_WORKDIR``, archives the llmctl handler
(no-archive format) into ``$LLMCTL_TS_MODEL_STORE``, starts the gateway on the serving port
(:mod:`.gateway`: llmctl's API key, TorchServe's own inference key), waits until it listens, and execs
TorchServe in the foreground, in the work directory (where TorchServe writes ``key_file.json``). The
handler loads the weights from the S3 mirror when ``LLMCTL_MODEL_URI`` is set.

A gateway that cannot listen (the serving port taken by another process in the pod) stops the
container with one ``error:`` line naming the port, before TorchServe starts: otherwise TorchServe
would run behind a port that is not the gateway's, and whatever holds it would answer the probes.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.serving_limits import request_bytes
from llmctl.errors import LlmctlError, ServingError
from llmctl.serving.blueprint_env import blueprint_from_env
from llmctl.serving.common.auth import resolve_api_key
from llmctl.serving.torchserve_neuronx import gateway
from llmctl.serving.torchserve_neuronx.config import (
    MODEL_STORE,
    archive_name,
    backend_port,
    render_model_config,
)

WORKDIR_ENV = "LLMCTL_TS_WORKDIR"
MODEL_STORE_ENV = "LLMCTL_TS_MODEL_STORE"
DEFAULT_WORKDIR = "/home/model-server/llmctl"
#: how long the gateway may take to start (Python and aiohttp imported on a busy node) and listen
GATEWAY_START_S = 120.0


def main() -> None:
    """Write the config, run torch-model-archiver, start TorchServe in the foreground."""
    blueprint = blueprint_from_env()
    # the gateway's key, checked here first: a gateway refusing it in its own process would leave
    # TorchServe running behind a port nobody listens on, and the pod unready with no reason shown
    resolve_api_key()
    work = Path(os.environ.get(WORKDIR_ENV, DEFAULT_WORKDIR))
    store = Path(os.environ.get(MODEL_STORE_ENV, MODEL_STORE))
    work.mkdir(parents=True, exist_ok=True)
    for name, content in render_model_config(blueprint).items():
        (work / name).write_text(content)
    store.mkdir(parents=True, exist_ok=True)
    archive = archive_name(blueprint)
    subprocess.run(
        [
            "torch-model-archiver",
            "--model-name",
            archive,
            "--version",
            "1.0",
            "--handler",
            str(Path(__file__).with_name("handler.py")),
            "--config-file",
            str(work / "model-config.yaml"),
            "--archive-format",
            "no-archive",
            "--export-path",
            str(store),
            "--force",
        ],
        check=True,
    )
    start_gateway(blueprint, work)
    os.chdir(work)  # TorchServe writes key_file.json into its working directory
    os.execvp(
        "torchserve",
        [
            "torchserve",
            "--start",
            "--foreground",
            "--ncs",
            "--ts-config",
            str(work / "config.properties"),
            "--model-store",
            str(store),
            "--models",
            archive,
        ],
    )


def gateway_env(blueprint: Blueprint, work: Path) -> dict[str, str]:
    """The gateway's variables (on top of the container's, which carry ``LLMCTL_API_KEY``)."""
    port = blueprint.serving.port
    return {
        gateway.LISTEN_PORT_ENV: str(port),
        gateway.BACKEND_PORT_ENV: str(backend_port(blueprint)),
        gateway.MANAGEMENT_PORT_ENV: str(port + 1),
        gateway.KEY_FILE_ENV: str(work / gateway.KEY_FILE),
        gateway.MAX_BODY_ENV: str(request_bytes(blueprint)),
        gateway.PARENT_ENV: str(os.getpid()),  # this process execs into TorchServe
    }


def start_gateway(blueprint: Blueprint, work: Path) -> subprocess.Popen[bytes]:
    """The gateway in its own process: it outlives this one's exec into TorchServe and ends with it.
    Returns once it listens; a gateway that cannot is a ``ServingError`` naming the port.
    A ``LLMCTL_TS_LISTEN_PORT`` in the environment wins over the serving port (tests use 0)."""
    env = {**os.environ, **gateway_env(blueprint, work)}
    port = os.environ.get(gateway.LISTEN_PORT_ENV) or env[gateway.LISTEN_PORT_ENV]
    env[gateway.LISTEN_PORT_ENV] = port
    read, write = os.pipe()
    env[gateway.READY_FD_ENV] = str(write)
    try:
        process = subprocess.Popen([sys.executable, "-m", gateway.__name__], env=env, pass_fds=(write,))
    finally:
        os.close(write)
    try:
        said = _first_line(read, GATEWAY_START_S)
    finally:
        os.close(read)
    if said == gateway.LISTENING:
        return process
    if said is None and process.poll() is None:
        process.kill()
        said = f"it did not listen within {GATEWAY_START_S:.0f} s"
    code = process.wait()
    raise ServingError(
        f"llmctl's gateway could not listen on port {port}: {said or f'it exited with code {code}'}",
        f"port {port} is the blueprint's serving.port and the gateway's alone; if another process in "
        "the pod (a sidecar, another container) listens on it, stop that one or give the blueprint "
        "another serving.port",
    )


def _first_line(fd: int, timeout_s: float) -> str | None:
    """The first line written to ``fd``; None at its end, or when ``timeout_s`` ran out, without one."""
    deadline, data = time.monotonic() + timeout_s, b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace")


def run() -> None:
    """:func:`main`, with an llmctl error as one ``error:`` line in the pod's log and its exit code."""
    try:
        main()
    except LlmctlError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)


if __name__ == "__main__":
    run()
