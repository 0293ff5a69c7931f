"""Replica counts sampled while load runs: `llmctl bench` records them beside throughput and TTFT,
and the autoscaling benchmark and test wait on them.

A *source* is a function returning the serving app's current replicas as
``{"running": int, "desired": int, ...}``, or None when it cannot say. The local target's source
reads what its runner writes every half second (`serving/local.py` :func:`local_replicas`). A
blueprint on a cluster is sampled through kubectl, as `llmctl status` reads it
(`infra/lifecycle/replicas.py` :func:`bench_source`, which `llmctl bench` passes in); a plain
`--endpoint` has no source, so `bench` records no samples there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

ReplicaSource = Callable[[], dict[str, Any] | None]
SAMPLE_S = 0.5


def local_source(stack: str, blueprint: str) -> ReplicaSource:
    """The replica source of a blueprint running on the local target."""
    from llmctl.serving.client.local import local_replicas

    return lambda: local_replicas(stack, blueprint)


def endpoint_source(stack: str, blueprint: str | None, workload: str | None) -> ReplicaSource | None:
    """The replica source of a deployed blueprint, when its target has one (local only, for now)."""
    if not blueprint:
        return None
    from llmctl.serving.client.deployed import find_endpoint  # a misspelled name says so

    return (
        local_source(stack, blueprint)
        if find_endpoint(stack, blueprint, workload).target == "local"
        else None
    )


def sample(source: ReplicaSource, t0: float) -> dict[str, Any] | None:
    """One sample: seconds since `t0` and the running and desired replicas (None: no reading)."""
    try:
        read = source()
    except Exception:  # a sampler never fails the run it watches
        return None
    if not read:
        return None
    return {
        "t_s": round(time.monotonic() - t0, 3),
        "running": int(read["running"]),
        "desired": int(read["desired"]),
    }


async def sample_until(
    source: ReplicaSource, done: asyncio.Event, t0: float, interval_s: float = SAMPLE_S
) -> list[dict[str, Any]]:
    """Samples every `interval_s` until `done` is set (one more at the end)."""
    samples: list[dict[str, Any]] = []
    while True:
        found = await asyncio.to_thread(sample, source, t0)
        if found:
            samples.append(found)
        if done.is_set():
            return samples
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=interval_s)


class ReplicaWatch:
    """Samples a source in a thread from `start()` on; `wait_for` blocks until a condition holds."""

    def __init__(self, source: ReplicaSource, interval_s: float = SAMPLE_S / 2) -> None:
        self.source = source
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReplicaWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            found = sample(self.source, self.t0)
            if found:
                self.samples.append(found)
            self._stop.wait(self.interval_s)

    def now(self) -> float:
        """Seconds since the watch started (the samples' clock)."""
        return time.monotonic() - self.t0

    def wait_for(self, condition: Callable[[dict[str, Any]], bool], timeout_s: float) -> float | None:
        """The watch time of the first sample from now on that meets `condition`; None on timeout."""
        since = self.now()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for found in list(self.samples):
                if found["t_s"] >= since and condition(found):
                    return float(found["t_s"])
            time.sleep(self.interval_s)
        return None
