"""Wall time of `llmctl --help` (target: under 250 ms) and of `llmctl blueprints validate`.

Whole-process timings over several runs after a warm-up; the median is the figure to quote.
Writes benchmarks/results/cli.json.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 15
TARGET_HELP_MS = 250.0


def time_command(args: list[str], runs: int = RUNS) -> dict[str, float]:
    subprocess.run(args, capture_output=True, check=True)  # warm-up (bytecode, page cache)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(args, capture_output=True, check=True)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {
        "min_ms": round(samples[0], 1),
        "median_ms": round(statistics.median(samples), 1),
        "max_ms": round(samples[-1], 1),
        "runs": runs,
    }


def main() -> None:
    exe = shutil.which("llmctl") or str(Path(sys.executable).parent / "llmctl")
    help_ms = time_command([exe, "--help"])
    validate_ms = time_command([exe, "blueprints", "validate"], runs=5)
    result = {
        "llmctl_help": {**help_ms, "target_ms": TARGET_HELP_MS, "met": help_ms["median_ms"] < TARGET_HELP_MS},
        "blueprints_validate": validate_ms,
    }
    out = Path(__file__).resolve().parent / "results" / "cli.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(
        f"llmctl --help median {help_ms['median_ms']} ms (target < {TARGET_HELP_MS:.0f} ms, "
        f"{'met' if result['llmctl_help']['met'] else 'NOT met'}); blueprints validate median {validate_ms['median_ms']} ms"
    )


if __name__ == "__main__":
    main()
