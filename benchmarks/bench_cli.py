"""Wall time of `llmctl --help` (target: under 250 ms) and of `llmctl blueprints validate`.

Whole-process timings over several runs after a warm-up; the median is the figure to quote.
Writes benchmarks/results/cli.json.

On a busy machine the absolute figures say little; `--baseline EXE` (another checkout's `llmctl`,
e.g. main's) times `EXE --help` and this one's in turn, A B A B ..., and records the median of the
pair-by-pair ratios of wall and CPU time, which the machine's load moves far less than either figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 15
TARGET_HELP_MS = 250.0
# What a user's start-up costs: an installed package has its bytecode cached (pip compiles it; an
# editable install writes it on the first run). A shell with PYTHONDONTWRITEBYTECODE=1 would make
# every run compile every llmctl module again (about 2x), so the runs go without it.
_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def _run(args: list[str]) -> tuple[float, float]:
    """One run's wall and CPU (user + system of the child) milliseconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(args, capture_output=True, check=True, env=_ENV)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _spread(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "min_ms": round(ordered[0], 1),
        "median_ms": round(statistics.median(ordered), 1),
        "max_ms": round(ordered[-1], 1),
    }


def time_command(args: list[str], runs: int = RUNS) -> dict[str, float]:
    _run(args)  # warm-up (bytecode, page cache)
    samples = [_run(args) for _ in range(runs)]
    cpu = _spread([sample[1] for sample in samples])
    return {**_spread([sample[0] for sample in samples]), "cpu_median_ms": cpu["median_ms"], "runs": runs}


def paired(this: list[str], baseline: list[str], runs: int = RUNS) -> dict[str, object]:
    """This command against a baseline, run in turn; the ratios are this / baseline, pair by pair."""
    _run(this), _run(baseline)  # warm-up of both
    pairs = []
    for index in range(runs):
        # alternate which goes first, so neither always runs on the warmer cache
        first, second = (this, baseline) if index % 2 == 0 else (baseline, this)
        a, b = _run(first), _run(second)
        pairs.append((a, b) if first is this else (b, a))
    return {
        "this_wall": _spread([a[0] for a, _ in pairs]),
        "baseline_wall": _spread([b[0] for _, b in pairs]),
        "this_cpu": _spread([a[1] for a, _ in pairs]),
        "baseline_cpu": _spread([b[1] for _, b in pairs]),
        "wall_ratio_median": round(statistics.median(a[0] / b[0] for a, b in pairs), 3),
        "cpu_ratio_median": round(statistics.median(a[1] / b[1] for a, b in pairs), 3),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another llmctl executable to compare `--help` against, in pairs")
    options = parser.parse_args()
    beside = Path(sys.executable).parent / "llmctl"  # this environment's llmctl before any on PATH (a shim)
    exe = str(beside) if beside.exists() else (shutil.which("llmctl") or str(beside))
    help_ms = time_command([exe, "--help"])
    validate_ms = time_command([exe, "blueprints", "validate"], runs=5)
    result: dict[str, object] = {
        "llmctl_help": {**help_ms, "target_ms": TARGET_HELP_MS, "met": help_ms["median_ms"] < TARGET_HELP_MS},
        "blueprints_validate": validate_ms,
        # 1-minute load average per core when the runs started: above ~1 the absolute figures are inflated
        "load_per_core": round(os.getloadavg()[0] / (os.cpu_count() or 1), 2),
    }
    line = ""
    if options.baseline:
        compared = paired([exe, "--help"], [options.baseline, "--help"])
        result["llmctl_help_vs_baseline"] = {"baseline": options.baseline, **compared}
        line = f"; vs baseline: wall x{compared['wall_ratio_median']}, cpu x{compared['cpu_ratio_median']}"
    out = Path(__file__).resolve().parent / "results" / "cli.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"llmctl --help median {help_ms['median_ms']} ms (target < {TARGET_HELP_MS:.0f} ms, "
        f"{'met' if result['llmctl_help']['met'] else 'NOT met'}); blueprints validate median "
        f"{validate_ms['median_ms']} ms{line}"
    )


if __name__ == "__main__":
    main()
