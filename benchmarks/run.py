"""Run every benchmarks/bench_*.py in turn and collect their results.

Each script writes benchmarks/results/<name>.json and prints one summary line; this runner
writes benchmarks/results/summary.json with every result and whether its target was met.
``benchmarks/run.py platform cli`` re-runs those alone and keeps the other entries of summary.json
(each entry says when it ran).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    scripts = sorted(HERE.glob("bench_*.py"))
    only = set(sys.argv[1:])
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    summary: dict[str, object] = {"generated_at": now, "benchmarks": {}}
    previous = RESULTS / "summary.json"
    if only and previous.exists():  # a few benchmarks re-run: the others' entries stay as they were
        summary["benchmarks"] = json.loads(previous.read_text()).get("benchmarks", {})
    failed = []
    for script in scripts:
        name = script.stem.removeprefix("bench_")
        if only and name not in only:
            continue
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, str(script)], cwd=HERE.parent)
        elapsed = time.perf_counter() - started
        result_file = RESULTS / f"{name}.json"
        entry: dict[str, object] = {"exit_code": proc.returncode, "seconds": round(elapsed, 1), "run_at": now}
        if result_file.exists():
            entry["result"] = json.loads(result_file.read_text())
        if proc.returncode != 0:
            failed.append(name)
        summary["benchmarks"][name] = entry  # type: ignore[index]
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"results in {RESULTS}/summary.json" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
