"""The detached process behind the local target: ``python -m llmctl.serving.client.local_runner SPEC``.

It starts a private Ray instance (``address="local"``, its own temp dir, no dashboard, a small
object store, Ray's token auth with a token made for this run: Ray's GCS and raylets listen on every
interface whatever the node address, so a process without the token, on this machine or another,
cannot join it or submit work), runs the CPU app with Serve on 127.0.0.1, writes its state (and, while running,
Serve's current and desired replicas every half second) to the spec's status file, and blocks
until SIGTERM/SIGINT. Then it drains the app first (``/healthz`` turns 503, new
requests get 503 with ``Retry-After``, in-flight streams get the spec's ``grace_s`` to finish and
end with an error event after it) and only then shuts Serve and Ray down. :mod:`.local` spawns,
watches and stops it.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

OBJECT_STORE_BYTES = 100 * 1024**2


REPORT_S = 0.5  # how often the running server writes its replica counts into the status file
# Serve replica states that count towards the replicas Serve wants (all but STOPPING)
DESIRED_STATES = ("STARTING", "UPDATING", "RECOVERING", "RUNNING")


def ray_auth_env() -> dict[str, str]:
    """Ray's token auth (Ray >= 2.52; the serving extra's floor is 2.59) with a fresh random token:
    set in this process before Ray starts, so only Ray's own processes (its children) hold it."""
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _write_status(path: Path, state: str, message: str = "", **extra: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"state": state, "message": message, "pid": os.getpid(), **extra}))
    tmp.replace(path)


def replica_counts(replica_states: dict[str, int]) -> dict[str, Any]:
    """Current and desired replicas from Serve's per-state counts: RUNNING replicas serve now; the
    desired count is every replica Serve keeps or is bringing up (all states but STOPPING)."""
    return {
        "running": int(replica_states.get("RUNNING", 0)),
        "desired": sum(int(replica_states.get(state, 0)) for state in DESIRED_STATES),
        "states": dict(replica_states),
        "at": time.time(),
    }


def _replicas(serve: Any, app: str) -> dict[str, Any] | None:
    """The app's replica counts from `serve.status()`; None when Serve cannot say (yet)."""
    try:
        deployments = serve.status().applications[app].deployments
        states: dict[str, int] = {}
        for deployment in deployments.values():
            for state, count in deployment.replica_states.items():
                states[str(state)] = states.get(str(state), 0) + int(count)
        return replica_counts(states)
    except Exception:  # a status read racing a redeploy: skip this sample
        return None


class StartAborted(BaseException):
    """SIGTERM or SIGINT while Ray or the app was still starting (not an error: the start is dropped)."""


def stop_handler(stop: threading.Event, starting: threading.Event) -> Callable[..., None]:
    """The runner's SIGTERM/SIGINT handler: once running, it asks the main loop to drain and stop;
    while still starting there is nothing to drain, so it raises :class:`StartAborted` in the main
    thread and the start ends at once (a Ctrl-C during `up` then returns in seconds, not after the
    whole start)."""

    def handle(*_: object) -> None:
        stop.set()
        if starting.is_set():
            raise StartAborted

    return handle


def _abort_if(stop: threading.Event) -> None:
    """Between the start's steps: a stop whose StartAborted was lost (Python drops an exception
    raised in a finaliser or a fork hook, which is where a signal can land) still ends the start."""
    if stop.is_set():
        raise StartAborted


def run(spec: dict[str, Any]) -> int:
    """Start Ray and Serve, deploy, then block until told to stop."""
    status = Path(spec["status_file"])
    stop, starting = threading.Event(), threading.Event()
    starting.set()
    handler = stop_handler(stop, starting)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
    try:
        _write_status(status, "starting", "starting Ray")
        os.environ.update(ray_auth_env())
        import ray
        from ray import serve

        from llmctl.serving.ray_cpu.app import app_builder

        ray.init(
            address="local",
            num_cpus=spec["num_cpus"],
            include_dashboard=False,
            object_store_memory=OBJECT_STORE_BYTES,
            log_to_driver=True,
            _temp_dir=spec["ray_dir"],
        )
        for sig in (signal.SIGTERM, signal.SIGINT):  # again: ray.init replaces the driver's SIGTERM handler
            signal.signal(sig, handler)
        _abort_if(stop)
        _write_status(status, "deploying", "loading the model")
        serve.start(http_options={"host": "127.0.0.1", "port": spec["port"]})
        _abort_if(stop)
        app = app_builder(spec["app_args"])
        serve.run(app, name=spec["blueprint"], route_prefix=spec["route_prefix"])
        _abort_if(stop)
        starting.clear()  # from here on a signal drains the running app
        _write_status(status, "running", replicas=_replicas(serve, spec["blueprint"]))
        while not stop.wait(REPORT_S):
            _write_status(status, "running", replicas=_replicas(serve, spec["blueprint"]))
        _write_status(status, "stopping", "draining in-flight requests")
        _drain(serve, spec)
        serve_shutdown: Any = serve.shutdown  # untyped in Ray
        serve_shutdown()
        return 0
    except BaseException as error:  # report any failure to the waiting CLI, then clean up
        # A stop while starting: StartAborted, or what it became where it landed (a C call wraps it
        # in a SystemError), or the SystemExit of Ray's own SIGTERM handler during ray.init
        if starting.is_set() and (stop.is_set() or isinstance(error, SystemExit)):
            starting.clear()  # a second signal during the shutdown below only sets `stop`
            _write_status(status, "stopped", "stopped while starting")
            return 0
        _write_status(status, "failed", f"{type(error).__name__}: {error}")
        traceback.print_exc()
        return 1
    finally:
        started_ray: Any = sys.modules.get("ray")  # None when the stop came before Ray was imported
        if started_ray is not None:
            started_ray.shutdown()


def _drain(serve: Any, spec: dict[str, Any]) -> None:
    """Drain the app's replica(s) through a handle; a failure is logged and shutdown goes on."""
    grace = float(spec.get("grace_s", 30))
    try:
        handle = serve.get_app_handle(spec["blueprint"])
        summary = handle.drain.remote(grace).result(timeout_s=grace + 15)
        print(f"llmctl: drained: {summary}", flush=True)
        time.sleep(0.5)  # let the proxy flush the last events before it stops
    except Exception as error:  # the process is stopping either way
        print(f"llmctl: drain failed: {type(error).__name__}: {error}", flush=True)


def main(argv: list[str]) -> int:
    """Entry point: one argument, the JSON spec written by :func:`llmctl.serving.client.local.start_local`."""
    if len(argv) != 2:
        print("usage: python -m llmctl.serving.client.local_runner SPEC.json", file=sys.stderr)
        return 2
    return run(json.loads(Path(argv[1]).read_text()))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
