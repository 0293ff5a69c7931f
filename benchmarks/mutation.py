"""`make mutation`: cosmic-ray on the decision modules of benchmarks/mutation_modules.toml.

Each module runs in its own copy of the tree (build/mutation/trees/<module>/, made afresh from the
checkout): cosmic-ray mutates files in place, so two modules must never share a file, and the
checkout itself is never mutated (edit it while a run goes on; Ctrl-C leaves no mutant in it).
`--jobs N` modules run side by side (default: the number of cores), each in a worker process. A
worker first times its tests on the clean copy (start-up and collection alone, then the whole
run: a run that fails there is an error, never a module of killed mutants), takes the per-mutant
timeout from that run, then runs every mutant against the module's test files
(benchmarks/mutation_test.py: `pytest -x -n 0`, bytecode cached except the mutated files).

The per-module counts, score, survivors, wall and CPU seconds (the whole process tree), and the
whole run's wall time, CPU and load average go to benchmarks/results/mutation.json (modules not run
this time keep their last entry, or are listed as not run). Not part of `make test`:

    make mutation                                   # every module, one per core
    make mutation MODULES="overload-admission capacity" JOBS=1
    .venv/bin/python benchmarks/mutation.py --list
    .venv/bin/python benchmarks/mutation.py --survivors overload-admission

`--survivors` runs again only the mutants that survived the module's last run (its session in
build/mutation/), against the tests as they are now: new tests can kill a survivor but cannot
revive a killed mutant, since tests are only ever added.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
MODULES_FILE = ROOT / "benchmarks" / "mutation_modules.toml"
RESULT = ROOT / "benchmarks" / "results" / "mutation.json"
WORK = ROOT / "build" / "mutation"
TREES = WORK / "trees"
BIN = Path(sys.executable).parent
# What a copy of the tree leaves out: the environment, caches and build output (never read by tests).
NOT_COPIED = (".git", ".venv", "build", "dist", "*.egg-info", ".*_cache", "bench-results", "tiny-model")
# A mutant whose tests run this many times longer than the clean run is stopped and counted as
# caught (it hangs instead of passing); never less than TIMEOUT_FLOOR seconds, for a busy machine.
TIMEOUT_FACTOR = 4
TIMEOUT_FLOOR = 60.0
PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-n", "0"]

# Single realistic bugs only: a boundary moved or a comparison negated, a condition flipped or
# dropped, a constant changed, a loop skipped, arithmetic turned around. Cosmic-ray's other
# operators (every binary operator into every other, decorators removed, variables swapped) are
# skipped: mostly nonsense code that any test kills, or that cannot happen by mistake.
EXCLUDED_OPERATORS = [
    r"core/ReplaceBinaryOperator_(?!(Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Div)$)",
    r"core/ReplaceComparisonOperator_(?!(Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Lt_GtE|GtE_Lt|Gt_LtE|LtE_Gt|Is_IsNot|IsNot_Is)$)",
    r"core/ReplaceUnaryOperator_(?!(Delete_Not|USub_UAdd)$)",
    r"core/RemoveDecorator",
    r"core/VariableInserter",
    r"core/VariableReplacer",
]


@dataclass(frozen=True)
class Module:
    """One decision module: the files mutated and the tests that must notice."""

    name: str
    paths: list[str]
    tests: list[str]


def modules() -> dict[str, Module]:
    table = tomllib.loads(MODULES_FILE.read_text())["modules"]
    return {name: Module(name, list(entry["paths"]), list(entry["tests"])) for name, entry in table.items()}


def cpu_of_children() -> float:
    """CPU seconds (user + system) of every finished child process and its own children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path) -> dict[str, Any]:
    """Wall and CPU seconds of one command (run to completion; its exit status)."""
    cpu, started = cpu_of_children(), time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    return {
        "wall": round(time.monotonic() - started, 2),
        "cpu": round(cpu_of_children() - cpu, 2),
        "exit": done.returncode,
        "tail": done.stdout.strip().splitlines()[-1:],
    }


def copy_tree(module: Module) -> Path:
    """A fresh copy of the checkout for this module's mutants."""
    tree = TREES / module.name
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    return tree


def test_command(module: Module, tree: Path, *extra: str) -> list[str]:
    runner = tree / "benchmarks" / "mutation_test.py"
    return [str(BIN / "python"), str(runner), *module.paths, "--", *PYTEST, *extra, *module.tests]


def cosmic_ray_config(module: Module, tree: Path, path: str, timeout: float) -> str:
    test = " ".join(test_command(module, tree))
    excluded = ", ".join(json.dumps(e) for e in EXCLUDED_OPERATORS)
    return (
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(path)}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(test)}\n\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n\n'
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = [{excluded}]\n"
    )


def forget_survivors(session: Path) -> None:
    """Mark the session's surviving mutants pending again, so `cosmic-ray exec` runs only them."""
    with sqlite3.connect(session) as db:
        db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")


def run_path(
    module: Module, tree: Path, path: str, timeout: float, *, survivors_only: bool = False
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every mutant of one file of the module's copy, with its result (cosmic-ray's session dump)."""
    stem = f"{module.name}-{Path(path).stem}"
    config, session = WORK / f"{stem}.toml", WORK / f"{stem}.sqlite"
    config.write_text(cosmic_ray_config(module, tree, path, timeout))
    original = (tree / path).read_bytes()
    try:
        if survivors_only:
            forget_survivors(session)
        else:
            session.unlink(missing_ok=True)
            subprocess.run([str(BIN / "cosmic-ray"), "init", str(config), str(session)], cwd=tree, check=True)
            subprocess.run(
                [str(BIN / "cr-filter-operators"), str(session), str(config)], cwd=tree, check=True
            )
        subprocess.run([str(BIN / "cosmic-ray"), "exec", str(config), str(session)], cwd=tree, check=True)
    finally:  # an interrupted run must not leave a mutant behind, even in the copy
        if (tree / path).read_bytes() != original:
            (tree / path).write_bytes(original)
    dump = subprocess.run(
        [str(BIN / "cosmic-ray"), "dump", str(session)], cwd=tree, check=True, capture_output=True, text=True
    ).stdout
    return [tuple(json.loads(line)) for line in dump.splitlines() if line.strip()]  # type: ignore[misc]


def summarise(module: Module, items: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> dict[str, Any]:
    """Counts, score and survivors of one module's mutants."""
    killed = survived = timeout = incompetent = 0
    survivors: list[dict[str, Any]] = []
    for item, result in items:
        if result is None or result["worker_outcome"] == "skipped":
            continue
        outcome = result["test_outcome"]
        if outcome == "killed" and result.get("output") == "timeout":
            timeout += 1
        elif outcome == "killed":
            killed += 1
        elif outcome == "incompetent":
            incompetent += 1
        else:
            survived += 1
            [mutation] = item["mutations"]
            survivors.append(
                {
                    "path": str(Path(mutation["module_path"])),
                    "line": mutation["start_pos"][0],
                    "operator": mutation["operator_name"],
                    "occurrence": mutation["occurrence"],
                    "diff": [
                        line
                        for line in (result.get("diff") or "").splitlines()
                        if line[:1] in "+-" and not line.startswith(("+++", "---"))
                    ],
                }
            )
    tried = killed + survived + timeout
    return {
        "status": "run",
        "run_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "paths": module.paths,
        "tests": module.tests,
        "mutants": tried,
        "killed": killed,
        "survived": survived,
        "timeout": timeout,
        "incompetent": incompetent,
        # a mutant whose tests ran past the timeout is caught too (it hangs instead of passing)
        "score": round((killed + timeout) / tried, 3) if tried else None,
        "survivors": sorted(survivors, key=lambda s: (s["path"], s["line"], s["operator"])),
    }


def run_module(module: Module, *, survivors_only: bool) -> dict[str, Any]:
    """One module in its own copy: the clean baseline, then its mutants (a worker's whole job)."""
    started = time.monotonic()
    tree = TREES / module.name
    # where a mutant's time goes: pytest start-up, imports and collection, then the tests themselves
    collect = timed(test_command(module, tree, "--collect-only"), tree)
    clean = timed(test_command(module, tree), tree)
    baseline = {"collect": collect, "clean_run": clean}
    if clean["exit"] != 0:
        error = "the tests fail on the clean copy (see the baseline's tail)"
        return {
            "status": "error",
            "error": error,
            "paths": module.paths,
            "tests": module.tests,
            "baseline": baseline,
        }
    timeout = round(max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * clean["wall"]))
    cpu = cpu_of_children()
    items = [
        pair
        for path in module.paths
        for pair in run_path(module, tree, path, timeout, survivors_only=survivors_only)
    ]
    entry = summarise(module, items)
    mutants_cpu = cpu_of_children() - cpu
    self_usage = resource.getrusage(resource.RUSAGE_SELF)
    entry |= {
        "seconds": round(time.monotonic() - started),
        "cpu_seconds": round(cpu_of_children() + self_usage.ru_utime + self_usage.ru_stime),
        "timeout_seconds": timeout,
        "baseline": baseline,
    }
    if not survivors_only and entry["mutants"]:
        entry["cpu_seconds_per_mutant"] = round(mutants_cpu / entry["mutants"], 2)
    return entry


def write(results: dict[str, Any], known: dict[str, Module], run: dict[str, Any]) -> None:
    """The result file: every module's entry, this run, and the last run of every module at once."""
    last_full = json.loads(RESULT.read_text()).get("full_run") if RESULT.exists() else None
    everything = not run["survivors_only"] and set(run["modules"]) == set(known)
    for name, module in known.items():
        results.setdefault(name, {"status": "not run", "paths": module.paths, "tests": module.tests})
    document = {
        "tool": "cosmic-ray",
        "score": "(killed + timeout) / mutants; skipped operators are not counted (benchmarks/mutation.py)",
        "excluded_operators": EXCLUDED_OPERATORS,
        "run": run,
        "full_run": run if everything else last_full,
        "modules": {name: results[name] for name in known},
    }
    RESULT.write_text(json.dumps(document, indent=2) + "\n")


def worker(name: str, survivors_only: bool) -> Path:
    """Run one module in a worker process (its output in build/mutation/<module>.log); its entry."""
    entry = WORK / f"{name}.entry.json"
    entry.unlink(missing_ok=True)
    command = [str(BIN / "python"), str(Path(__file__).resolve()), "--worker", name]
    with (WORK / f"{name}.log").open("w") as log:
        subprocess.run(
            [*command, *(["--survivors"] if survivors_only else [])], stdout=log, stderr=subprocess.STDOUT
        )
    return entry


def load_average() -> list[float]:
    return [round(load, 2) for load in os.getloadavg()]


def run_all(names: list[str], known: dict[str, Module], jobs: int, survivors_only: bool) -> int:
    """The named modules, `jobs` at a time (the slowest last run first), then the result file."""
    previous = json.loads(RESULT.read_text())["modules"] if RESULT.exists() else {}
    results = {name: entry for name, entry in previous.items() if name in known}
    WORK.mkdir(parents=True, exist_ok=True)
    last = {name: previous.get(name, {}) for name in names}
    order = sorted(
        names, key=lambda name: -float(last[name].get("cpu_seconds", last[name].get("seconds", 0)))
    )
    run = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "modules": order,
        "jobs": jobs,
        "cores": os.cpu_count(),
        "survivors_only": survivors_only,
        "load_average_start": load_average(),
    }
    started, cpu = time.monotonic(), cpu_of_children()
    for name in order:  # every copy before any mutant: the checkout may change while they run
        copy_tree(known[name])

    def one(name: str) -> bool:
        print(f"== {name} (log: {(WORK / f'{name}.log').relative_to(ROOT)})", flush=True)
        path = worker(name, survivors_only)
        if not path.exists():
            print(f"{name}: the worker stopped without a result; see its log", flush=True)
            return False
        entry = json.loads(path.read_text())
        if survivors_only and entry["status"] == "run":
            last = results.get(name, {})
            entry |= {
                "run_at": last.get("run_at", entry["run_at"]),
                "survivors_rerun_at": entry["run_at"],
                "survivors_rerun_seconds": entry["seconds"],
                "seconds": last.get("seconds", entry["seconds"]),
                "cpu_seconds": last.get("cpu_seconds", entry["cpu_seconds"]),
            }
        results[name] = entry
        if entry["status"] != "run":
            print(f"{name}: {entry['status']}: {entry.get('error')}", flush=True)
            return False
        print(
            f"{name}: {entry['killed']} killed, {entry['timeout']} timeout, {entry['survived']} survived, "
            f"score {entry['score']} ({entry['seconds']} s, {entry['cpu_seconds']} CPU s)",
            flush=True,
        )
        return True

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = list(pool.map(one, order))
    own = resource.getrusage(resource.RUSAGE_SELF)
    cpu_seconds = cpu_of_children() - cpu + own.ru_utime + own.ru_stime
    run |= {
        "wall_seconds": round(time.monotonic() - started),
        "cpu_seconds": round(cpu_seconds),
        # what the run would take on an otherwise quiet machine, every core busy with it
        "quiet_estimate_seconds": round(cpu_seconds / (os.cpu_count() or 1)),
        "load_average_end": load_average(),
    }
    write(results, known, run)
    print(f"all: {run['wall_seconds']} s wall, {run['cpu_seconds']} CPU s, jobs {jobs}", flush=True)
    return 0 if all(done) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help="module names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--survivors", action="store_true", help="re-run only the last run's survivors")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="modules run at a time (default: the cores)"
    )
    parser.add_argument("--worker", metavar="MODULE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = modules()
    if args.list:
        for module in known.values():
            print(f"{module.name}: {' '.join(module.paths)} <- {' '.join(module.tests)}")
        return 0
    unknown = sorted(set(args.modules) - set(known) | ({args.worker} - set(known) if args.worker else set()))
    if unknown:
        print(f"unknown module(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"--jobs {args.jobs}: give at least 1 (modules run at a time)", file=sys.stderr)
        return 2
    if args.worker:
        entry = run_module(known[args.worker], survivors_only=args.survivors)
        (WORK / f"{args.worker}.entry.json").write_text(json.dumps(entry, indent=2) + "\n")
        return 0
    return run_all(args.modules or list(known), known, args.jobs, args.survivors)


if __name__ == "__main__":
    sys.exit(main())
