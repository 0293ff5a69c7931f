"""Graceful stop of serving pods: `preStop` hooks and `terminationGracePeriodSeconds`.

Every serving pod gets a grace period sized to one generation (`serving_limits.termination_grace_s`:
preStop delay + `max_new_tokens` at the runtime's slowest token rate + margin). What the preStop
hook does depends on what the runtime can do:

- Ray pods running the shared app (registry `drains`): `python -m llmctl.serving.drain` creates
  the drain marker the replicas watch (`LLMCTL_DRAIN_FILE`) and waits until they report idle.
- The Ray head (proxy only) and Ray Serve LLM workers: a short sleep, so the endpoints
  controller and the load balancer stop sending before SIGTERM; Ray Serve's own
  `graceful_shutdown_timeout_s` then covers a replica's in-flight requests.
- Triton: a short sleep; Triton itself stops accepting on SIGTERM and waits for in-flight requests
  up to `--exit-timeout-secs` (set to the drain grace by the builder).
- TorchServe: no drain on SIGTERM, so the hook sleeps for the whole drain grace while in-flight
  requests finish (the pod already left the Service's endpoints).
"""

from __future__ import annotations

from llmctl.blueprints import serving_limits as sl
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.config import WorkloadConfig

DRAIN_FILE = "/tmp/llmctl-drain"


def termination_grace(config: WorkloadConfig) -> Obj:
    """The pod spec field, sized to one generation."""
    return {"terminationGracePeriodSeconds": sl.termination_grace_s(config.blueprint)}


def _hook(command: list[str]) -> Obj:
    return {"lifecycle": {"preStop": {"exec": {"command": command}}}}


def sleep_hook(seconds: int = sl.PRESTOP_DELAY_S) -> Obj:
    """preStop: keep serving while the pod leaves the endpoints and load balancers."""
    return _hook(["sleep", str(seconds)])


def drain_hook(config: WorkloadConfig, python: str = "python") -> Obj:
    """preStop: drain the shared app's replicas in the pod (waits for them, at most the grace)."""
    grace = sl.drain_grace_s(config.blueprint)
    command = [python, "-m", "llmctl.serving.drain", f"--grace={grace}", f"--min-wait={sl.PRESTOP_DELAY_S}"]
    return _hook(command)


def drain_env() -> Obj:
    """Where the replicas look for the drain marker."""
    return {"name": "LLMCTL_DRAIN_FILE", "value": DRAIN_FILE}


def wait_hook(config: WorkloadConfig) -> Obj:
    """preStop for a runtime that cannot drain itself: wait the whole drain grace."""
    return sleep_hook(sl.PRESTOP_DELAY_S + sl.drain_grace_s(config.blueprint))
