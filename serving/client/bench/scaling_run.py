"""Autoscaling measured on the local target: a blueprint's Serve app under `llmctl bench` load gains
replicas, loses them after the downscale delay, and (with `min_replicas: 0`) wakes from zero on the
first request. `benchmarks/bench_autoscaling.py` writes the timings to
`benchmarks/results/autoscaling.json`; `tests/serving/test_local_autoscaling.py` holds them to
bounds. Times are seconds on the replica watch's clock (`replicas.ReplicaWatch`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from llmctl.blueprints.schema import Blueprint
from llmctl.serving.client.bench.replicas import ReplicaWatch, local_source
from llmctl.serving.client.bench.runner import BenchConfig, run_bench
from llmctl.serving.client.local import start_local, stop_local


def first_at(
    samples: list[dict[str, Any]], since: float, until: float, key: str, at_least: int
) -> float | None:
    """The time of the first sample in [since, until] whose `key` is at least `at_least`."""
    return next((s["t_s"] for s in samples if since <= s["t_s"] <= until and s[key] >= at_least), None)


def _load(
    url: str,
    model: str,
    out: Path,
    concurrency: int,
    load_s: float,
    watch: ReplicaWatch,
    enough: Callable[[], bool],
) -> dict[str, Any]:
    """`llmctl bench`'s runner at `concurrency` until `enough()` (checked at the watch's interval)
    or for `load_s`, whichever comes first; its summary."""
    config = BenchConfig(
        endpoints=[url],
        out_dir=out,
        model=model,
        concurrency=[concurrency],
        duration=load_s,
        timeout=120.0,
        mean_input_tokens=32,
        stddev_input_tokens=0,
        mean_output_tokens=48,
        stddev_output_tokens=0,
        plots=False,
        replicas=watch.source,
    )

    async def until_enough(stop: asyncio.Event) -> None:
        while not stop.is_set() and not enough():
            await asyncio.sleep(watch.interval_s)
        stop.set()

    async def main() -> dict[str, Any]:
        stop = asyncio.Event()
        stopper = asyncio.create_task(until_enough(stop))
        try:
            outcome = await run_bench(config, stop=stop)
        finally:
            stopper.cancel()
        summary: dict[str, Any] = outcome.levels[0].summary
        return summary

    return asyncio.run(main())


def _first_request_s(url: str, model: str) -> float:
    """Seconds until one chat completion returns (it waits for a replica when there is none)."""
    started = time.monotonic()
    response = httpx.post(
        f"{url}/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4},
        timeout=300,
    )
    response.raise_for_status()
    return time.monotonic() - started


def measure_scaling(
    blueprint: Blueprint,
    *,
    model: str,
    stack: str,
    out: Path,
    concurrency: int = 4,
    load_s: float = 30.0,
    settle_s: float = 180.0,
    min_load_s: float = 10.0,
) -> dict[str, Any]:
    """Start the blueprint locally, load it, watch its replicas, stop it; the timings and samples.

    `wants_more_s`: from the start of the load until Serve wants `max_replicas` (its decision, from
    metrics of the load that may reach it after the load ended). `scale_up_s`: from the start of
    the load until that many run (the decision plus a replica's start; it may come after the load
    ended, before the scale-down).
    `scale_down_s`: from the end of the load until Serve wants fewer replicas than `max_replicas`.
    `to_zero_s` and `wake_s` (only with `min_replicas: 0`): from the end of the load until no replica
    runs, and how long the first request then takes (its cold start). A None means it did not happen
    within the load or `settle_s`.

    The load ends as soon as `max_replicas` run (and it has lasted `min_load_s`, so `llmctl bench`
    has sampled the replicas beside its requests a few times), else after `load_s`: the timings
    after the load do not wait for the rest of a fixed load.
    """
    scaling = blueprint.scaling
    started = time.monotonic()
    endpoint = start_local(blueprint, stack=stack, model=model, timeout_s=600)
    result: dict[str, Any] = {"start_s": round(time.monotonic() - started, 1)}
    try:
        with ReplicaWatch(local_source(stack, blueprint.name)) as watch:
            load_from = watch.now()

            def scaled_up() -> bool:
                return watch.now() - load_from >= min_load_s and any(
                    s["t_s"] >= load_from and s["running"] >= scaling.max_replicas
                    for s in list(watch.samples)
                )

            summary = _load(endpoint.base_url, endpoint.model, out, concurrency, load_s, watch, scaled_up)
            load_to = watch.now()
            wants = first_at(watch.samples, load_from, load_to, "desired", scaling.max_replicas)
            if wants is None:  # a decision on metrics that arrive late (a busy machine) still counts
                wants = watch.wait_for(lambda s: s["desired"] >= scaling.max_replicas, settle_s)
            down = watch.wait_for(lambda s: s["desired"] < scaling.max_replicas, settle_s)
            end = down if down is not None else watch.now()
            up = first_at(watch.samples, load_from, end, "running", scaling.max_replicas)
            result.update(
                load={"concurrency": concurrency, "seconds": round(load_to - load_from, 1)},
                wants_more_s=None if wants is None else round(wants - load_from, 1),
                completed=summary["counts"]["completed"],
                # what `llmctl bench` itself sampled beside its requests (summary.json `replicas`)
                bench_samples=len(summary.get("replicas", [])),
                bench_max_desired=max((p["desired"] for p in summary.get("replicas", [])), default=None),
                scale_up_s=None if up is None else round(up - load_from, 1),
                scale_down_s=None if down is None else round(down - load_to, 1),
            )
            if scaling.min_replicas == 0:
                zero = watch.wait_for(lambda s: s["running"] == 0 and s["desired"] == 0, settle_s)
                result["to_zero_s"] = None if zero is None else round(zero - load_to, 1)
                if zero is not None:
                    result["wake_s"] = round(_first_request_s(endpoint.base_url, endpoint.model), 1)
                    woke = watch.wait_for(lambda s: s["running"] >= 1, 30)
                    result["running_after_wake"] = woke is not None
            result["samples"] = watch.samples
    finally:
        stop_local(stack, blueprint.name)
    return result
