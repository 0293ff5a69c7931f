"""The local target: run a CPU blueprint's serving path on this machine with Ray Serve.

:func:`start_local` resolves the model (a local directory, or a hub id downloaded once), spawns
:mod:`.local_runner` as a detached process (its own session, private Ray temp dir, Serve bound to
127.0.0.1), waits until ``/v1/models`` answers and records the endpoint. :func:`stop_local`
terminates the runner and anything left of its Ray instance; :func:`local_status` reports health.
Records live in ``<state_dir>/local/<stack>/<blueprint>.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from llmctl import interrupts
from llmctl.blueprints.runtimes import runtimes_with
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.serving_limits import drain_grace_s, termination_grace_s
from llmctl.errors import BadInput, ServingError, UserAbort
from llmctl.serving.client.local_procs import alive, kill_tree
from llmctl.serving.common.auth import API_KEY_ENV, resolve_api_key
from llmctl.serving.model_source import resolve_model
from llmctl.state import Endpoint, check_name, remove_endpoint, save_endpoint, state_dir

Progress = Callable[[str], None]


def cpu_blueprints() -> list[str]:
    """Catalog blueprints the local target can run."""
    from llmctl.blueprints.catalog import catalog_names, load_blueprint

    return [name for name in catalog_names() if load_blueprint(name).runs_locally]


def _check_local(blueprint: Blueprint) -> None:
    if blueprint.runs_locally:
        return
    raise ServingError(
        f"blueprint {blueprint.name!r} cannot run locally: it needs {blueprint.compute.accelerator} "
        f"({blueprint.compute.instance_type}) with runtime {blueprint.runtime}, and the local target "
        f"runs only CPU blueprints with runtime {' or '.join(runtimes_with(local=True))}",
        f"CPU blueprints: {', '.join(cpu_blueprints()) or 'none'}; deploy this one to a cluster instead",
    )


def _records(stack: str) -> Path:
    return state_dir() / "local" / check_name("stack", stack)


def local_blueprints() -> set[str]:
    """The blueprints with a local server record, in any stack (running or not)."""
    root = state_dir() / "local"
    return {p.name.removesuffix(".json") for p in root.glob("*/*.json") if not p.name.endswith(".spec.json")}


def _record_path(stack: str, blueprint: str) -> Path:
    return _records(stack) / f"{check_name('blueprint', blueprint)}.json"


def _free_port(preferred: int | None = None) -> int:
    for candidate in ([preferred] if preferred else []) + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise ServingError("no free TCP port on 127.0.0.1")


def _healthy(url: str, api_key: str | None = None) -> bool:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        return httpx.get(url, headers=headers, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


RANDOM_NOTE = "the model is llmctl's tiny one with random weights: its answers are random words"


def _endpoint(stack: str, blueprint: Blueprint, record: dict[str, Any]) -> Endpoint:
    from llmctl.serving.client.tiny import MARKER

    tiny = bool(record.get("model_path")) and (Path(record["model_path"]) / MARKER).is_file()
    # what a user should know of this server: the port it moved to, the tiny model's random answers
    note = "; ".join(text for text in (record.get("port_note"), RANDOM_NOTE if tiny else None) if text)
    return Endpoint(
        stack=stack,
        blueprint=blueprint.name,
        target="local",
        base_url=record["base_url"],
        model=record["model"],
        extra={
            "pid": str(record["pid"]),
            "log": record["log"],
            "max_new_tokens": str(blueprint.serving.max_new_tokens),
            **({"note": note} if note else {}),
        },
    )


def _changed_flags(existing: dict[str, Any], *, model: str | None, port: int | None) -> list[str]:
    """What a second `up` asks for that the running server does not have (only the flags given)."""
    changed = []
    if port is not None and int(existing.get("port", 0)) != port:
        changed.append(f"it listens on port {existing.get('port')}, --port asks for {port}")
    if model is not None and model not in (existing.get("requested_model"), existing.get("model_path")):
        running = existing.get("requested_model") or existing.get("model_path") or existing.get("model")
        changed.append(f"it serves {running}, --model asks for {model}")
    return changed


def start_local(
    blueprint: Blueprint,
    *,
    stack: str = "dev",
    model: str | None = None,
    port: int | None = None,
    api_key: str | None = None,
    on_progress: Progress | None = None,
    timeout_s: float = 600,
) -> Endpoint:
    """Start (or find running) the blueprint's CPU app locally and return its endpoint.

    ``api_key`` (default: ``$LLMCTL_API_KEY``) makes the app require ``Authorization: Bearer``;
    it reaches the runner through its environment, never a file.
    """
    say = on_progress or (lambda _: None)
    _check_local(blueprint)
    key = resolve_api_key(api_key)
    record_path = _record_path(stack, blueprint.name)
    existing = _read(record_path)
    if existing and alive(int(existing.get("pid", 0))):
        if _healthy(existing["base_url"].rsplit("/v1", 1)[0] + "/healthz"):
            changed = _changed_flags(existing, model=model, port=port)
            if changed:  # never answer "already running" for a server other than the one asked for
                raise BadInput(
                    f"{blueprint.name} already runs locally in stack {stack} at {existing['base_url']} with "
                    f"other settings: {'; '.join(changed)}",
                    f"to apply them, stop it first: `llmctl down --target local --blueprint {blueprint.name} "
                    f"--stack {stack}`, then run this `llmctl up` again (or leave the flags out to use the "
                    "running one)",
                )
            say(f"already running at {existing['base_url']}")
            return _endpoint(stack, blueprint, existing)
        stop_local(stack, blueprint.name)
    model_path, served = resolve_model(blueprint, model, on_progress=say)
    port_given, wanted = port is not None, port or blueprint.serving.port
    port = _free_port(wanted)
    if port != wanted:
        if port_given:
            raise BadInput(f"port {wanted} is in use on 127.0.0.1", "pass another --port, or leave it out")
        say(f"port {wanted} is in use: serving on {port}")
    record_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    ray_dir = tempfile.mkdtemp(prefix="llmctl-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
    prefix = blueprint.serving.route_prefix.rstrip("/")
    root = f"http://127.0.0.1:{port}{prefix}"
    cpus = max(1, min(int(blueprint.compute.cpus_per_replica or 1), os.cpu_count() or 1))
    grace = drain_grace_s(blueprint)
    spec: dict[str, Any] = {
        "grace_s": grace,
        "blueprint": blueprint.name,
        "port": port,
        "route_prefix": blueprint.serving.route_prefix,
        # Ray's logical CPUs: room for max_replicas replicas of `cpus` each, so Serve autoscales
        # within the blueprint's bounds here as on a cluster (the replicas share this machine's cores)
        "num_cpus": cpus * blueprint.scaling.max_replicas,
        "ray_dir": ray_dir,
        "status_file": str(record_path.with_suffix(".status")),
        "app_args": {
            "blueprint": blueprint.model_dump(mode="json"),
            "model_path": model_path,
            "served_model_name": served,
            "num_cpus": cpus,
            "threads": cpus,
        },
    }
    spec_path = record_path.with_suffix(".spec.json")
    spec_path.write_text(json.dumps(spec, indent=2))
    Path(spec["status_file"]).unlink(missing_ok=True)
    log = record_path.with_suffix(".log")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's proxy binds with SO_REUSEPORT by default, so a second local server started on the same
    # port at the same moment would share it and get half of the other's requests; without it, the
    # second bind fails
    env["SERVE_SOCKET_REUSE_PORT_ENABLED"] = "0"
    if key:
        env[API_KEY_ENV] = key
    with _stopped_if_interrupted(stack, blueprint.name, say):
        # the runner and its record together: a Ctrl-C in between would leave a runner no record names
        with interrupts.deferred():
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "llmctl.serving.client.local_runner", str(spec_path)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=env,
                    close_fds=True,
                )
            record = {
                "blueprint": blueprint.name,
                "stack": stack,
                "pid": proc.pid,
                "port": port,
                "port_note": f"port {wanted} was in use: serving on {port}" if port != wanted else None,
                "base_url": f"{root}/v1",
                "health_url": f"{root}/healthz",
                "model": served,
                "model_path": model_path,
                "requested_model": model,  # --model as given (a second up compares it)
                "ray_dir": ray_dir,
                "log": str(log),
                "started": time.time(),
                "stop_grace_s": termination_grace_s(blueprint),
            }
            record_path.write_text(json.dumps(record, indent=2))
        say(f"starting Ray Serve on 127.0.0.1:{port} (log: {log})")
        _wait_ready(proc, record, Path(spec["status_file"]), log, timeout_s, say, stack, key)
    endpoint = _endpoint(stack, blueprint, record)
    save_endpoint(endpoint)
    say(f"ready: {endpoint.base_url} (model {served})")
    return endpoint


@contextlib.contextmanager
def _stopped_if_interrupted(stack: str, blueprint: str, say: Progress) -> Iterator[None]:
    """Ctrl-C while the server starts: stop what was started, so nothing is left starting."""
    try:
        yield
    except KeyboardInterrupt:
        say("interrupted: stopping the local server that was starting")
        stop_local(stack, blueprint)
        raise UserAbort(
            f"interrupted: the local server of {blueprint!r} was still starting and is stopped; "
            "nothing is left running",
            "run the same `llmctl up` again to start it from the beginning",
        ) from None


def _wait_ready(
    proc: subprocess.Popen[bytes],
    record: dict[str, Any],
    status_file: Path,
    log: Path,
    timeout_s: float,
    say: Progress,
    stack: str,
    api_key: str | None,
) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        status = _read(status_file)
        if status.get("state") and status["state"] != last:
            last = status["state"]
            say(status.get("message") or last)
        if proc.poll() is not None or status.get("state") == "failed":
            stop_local(stack, record["blueprint"])
            raise ServingError(
                f"the local server for {record['blueprint']!r} failed to start: "
                f"{status.get('message') or f'exit code {proc.returncode}'}",
                f"see the log {log}; last lines:\n{_log_tail(log)}",
            )
        if last == "running" and _healthy(record["base_url"] + "/models", api_key):
            return
        time.sleep(0.5)
    stop_local(stack, record["blueprint"])
    raise ServingError(
        f"the local server for {record['blueprint']!r} did not answer within {timeout_s:.0f}s",
        f"see the log {log}, or raise the timeout",
    )


#: seconds a runner that is still starting gets to end its start before it is killed: it has no
#: request to drain, and drops the start at once (local_runner.py); the wait only covers Ray's
#: shutdown, and a stop signal that Ray's own handler swallowed during `ray.init`
STARTING_GRACE_S = 15.0


def stop_grace_s(record: dict[str, Any], state: str | None) -> float:
    """How long `stop_local` waits for the runner: the drain's grace once it has served, else
    :data:`STARTING_GRACE_S`."""
    grace = float(record.get("stop_grace_s", 30))
    return grace if state in ("running", "stopping") else min(grace, STARTING_GRACE_S)


def stop_local(stack: str = "dev", blueprint: str | None = None) -> list[str]:
    """Stop the local server(s) of a stack; returns the blueprints stopped. Safe to run twice. The
    servers are stopped side by side (each drains for up to its own grace), not one after another."""
    from concurrent.futures import ThreadPoolExecutor

    folder = _records(stack)
    paths = (
        [_record_path(stack, blueprint)]
        if blueprint
        else sorted(folder.glob("*.json"))
        if folder.exists()
        else []
    )
    paths = [path for path in paths if not path.name.endswith(".spec.json") and path.exists()]
    with ThreadPoolExecutor(max_workers=max(1, len(paths))) as pool:
        outcomes = list(pool.map(lambda path: _stop_one(stack, path), paths))
    failed = [outcome for outcome in outcomes if isinstance(outcome, ServingError)]
    if failed:
        raise failed[0]
    return [outcome for outcome in outcomes if isinstance(outcome, str)]


def _stop_one(stack: str, path: Path) -> str | ServingError:
    """Stop one local server and forget it; its blueprint, or the error when processes survive."""
    record = _read(path)
    name = str(record.get("blueprint", path.stem))
    grace = stop_grace_s(record, _read(path.with_suffix(".status")).get("state"))
    survivors = kill_tree(
        int(record.get("pid", 0)), marker=record.get("ray_dir"), sig=signal.SIGTERM, grace_s=grace
    )
    if survivors:
        return ServingError(
            f"the local server of {name!r} left processes running after {grace:.0f} s: "
            + ", ".join(str(p) for p in survivors),
            f"stop them (`kill -9 {' '.join(str(p) for p in survivors)}`), then run `llmctl down` again",
        )
    if record.get("ray_dir"):
        shutil.rmtree(record["ray_dir"], ignore_errors=True)
    for suffix in (".spec.json", ".status"):
        path.with_suffix(suffix).unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    remove_endpoint(stack, name)
    return name


def local_replicas(stack: str, blueprint: str) -> dict[str, Any] | None:
    """Serve's current and desired replicas of a running local server, as its runner last wrote
    them (`running`, `desired`, `states`, `at`); None when it is not running or has not said."""
    replicas = _read(_record_path(stack, blueprint).with_suffix(".status")).get("replicas")
    return replicas if isinstance(replicas, dict) else None


def local_status(stack: str = "dev") -> list[dict[str, Any]]:
    """One row per local server of the stack: blueprint, url, model, pid, port, healthy, replicas
    (current and desired, see :func:`local_replicas`), log."""
    folder = _records(stack)
    rows = []
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        if path.name.endswith(".spec.json"):
            continue
        record = _read(path)
        pid = int(record.get("pid", 0))
        running = alive(pid)
        rows.append(
            {
                "blueprint": record.get("blueprint", path.stem),
                "url": record.get("base_url"),
                "model": record.get("model"),
                "pid": pid,
                "port": record.get("port"),
                "running": running,
                "healthy": running and _healthy(record.get("health_url", "")),
                "replicas": local_replicas(stack, record.get("blueprint", path.stem)) if running else None,
                "log": record.get("log"),
                "started": record.get("started"),
            }
        )
    return rows
