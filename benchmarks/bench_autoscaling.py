"""Autoscaling on the local target, measured: tiny-cpu's Serve app under `llmctl bench` load.

Two runs of the tiny-cpu blueprint on a generated tiny model (no download), each with short delays
set through its `scaling` section (upscale 1 s, downscale 5 s, to zero 15 s, Serve's metrics window
12 s instead of its 30 s) and `target_ongoing_requests: 1`, loaded by `llmctl bench`'s runner at
concurrency 4 until the second replica runs (at least 10 s, at most 120 s) while the runner's
replica counts are sampled every 0.25 s (serving/client/bench/scaling_run.py):
- min_replicas 1, max_replicas 2: seconds from the start of the load to a second running replica,
  and from the end of the load until Serve wants one again;
- min_replicas 0, max_replicas 2: the same, then seconds until no replica runs, and how long the
  first request after that takes (it waits for a replica: the local cold start).
Writes benchmarks/results/autoscaling.json (with every sample) and prints one summary line.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint, ScalingSpec
from llmctl.serving.client.bench.scaling_run import measure_scaling
from llmctl.serving.client.tiny import write_tiny_model

DELAYS = {
    "upscale_delay_s": 1.0,
    "downscale_delay_s": 5.0,
    "downscale_to_zero_delay_s": 15.0,
    "look_back_period_s": 12.0,
    "target_ongoing_requests": 1.0,
}


def tiny_cpu(min_replicas: int, max_replicas: int) -> Blueprint:
    """tiny-cpu with the scaling section of this benchmark."""
    base = load_blueprint("tiny-cpu")
    scaling = {**base.scaling.model_dump(), **DELAYS, "replicas": 1, "min_replicas": min_replicas}
    return base.model_copy(
        update={"scaling": ScalingSpec.model_validate({**scaling, "max_replicas": max_replicas})}
    )


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="llmctl-autoscale-") as tmp:
        os.environ.setdefault("LLMCTL_STATE_DIR", str(Path(tmp) / "state"))
        model = Path(tmp) / "tiny"
        write_tiny_model(model)
        runs = {
            f"min{low}_max2": measure_scaling(
                tiny_cpu(low, 2),
                model=str(model),
                stack="autoscale-bench",
                out=Path(tmp) / f"bench-{low}",
                load_s=120,
            )
            for low in (1, 0)
        }
    out = {
        "benchmark": "autoscaling-local",
        "blueprint": "tiny-cpu (generated tiny model), scaling: " + json.dumps(DELAYS),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
    }
    path = Path(__file__).parent / "results" / "autoscaling.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    one, zero = runs["min1_max2"], runs["min0_max2"]
    print(
        f"local autoscaling: 1->2 replicas after {one['scale_up_s']} s of load, back below 2 "
        f"{one['scale_down_s']} s after it; min 0: to zero {zero.get('to_zero_s')} s after the load, "
        f"first request at zero {zero.get('wake_s')} s -> {path}"
    )
    return out


if __name__ == "__main__":
    main()
