"""Time to build, render and schedulability-check every catalog blueprint's workload, in-process.

Writes benchmarks/results/workload.json and prints a one-line summary.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

RUNS = 5


def main() -> None:
    from llmctl.blueprints.catalog import catalog_names, load_blueprint
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
    from llmctl.infra.workload.manifests import build_manifests
    from llmctl.infra.workload.render import render_yaml
    from llmctl.infra.workload.schedulability import validate_workload

    blueprints = [load_blueprint(name) for name in catalog_names()]
    build_render, validate = [], []
    for _ in range(RUNS):
        started = time.perf_counter()
        for bp in blueprints:
            render_yaml(
                build_manifests(
                    WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=None
                )
            )
        build_render.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        for bp in blueprints:
            assert validate_workload(bp) == []
        validate.append((time.perf_counter() - started) * 1000)
    result = {
        "blueprints": len(blueprints),
        "runs": RUNS,
        "build_render_all_median_ms": round(statistics.median(build_render), 1),
        "validate_all_median_ms": round(statistics.median(validate), 1),
    }
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "workload.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"workload: build+render {result['build_render_all_median_ms']} ms, validate "
        f"{result['validate_all_median_ms']} ms for {len(blueprints)} catalog blueprints (median of {RUNS})"
    )


if __name__ == "__main__":
    main()
