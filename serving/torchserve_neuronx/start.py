"""Container entry point: ``python -m llmctl.serving.torchserve_neuronx.start``.

Reads the blueprint from ``LLMCTL_BLUEPRINT``, writes ``model-config.yaml`` and
``config.properties`` (:mod:`.config`) to ``$LLMCTL_TS_WORKDIR``, archives the llmctl handler
(no-archive format) into ``$LLMCTL_TS_MODEL_STORE``, starts the gateway on the serving port
(:mod:`.gateway`: llmctl's API key, TorchServe's own inference key) and execs TorchServe in the
foreground, in the work directory (where TorchServe writes ``key_file.json``). The handler loads the
weights from the S3 mirror when ``LLMCTL_MODEL_URI`` is set.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.serving_limits import request_bytes
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
    A ``LLMCTL_TS_LISTEN_PORT`` in the environment wins over the serving port (tests use 0)."""
    env = {**os.environ, **gateway_env(blueprint, work)}
    env[gateway.LISTEN_PORT_ENV] = os.environ.get(gateway.LISTEN_PORT_ENV) or env[gateway.LISTEN_PORT_ENV]
    return subprocess.Popen([sys.executable, "-m", gateway.__name__], env=env)


if __name__ == "__main__":
    main()
