"""`make mutation`: cosmic-ray on the decision modules of benchmarks/mutation_modules.toml.

Each module's files are mutated in place, one mutant at a time, and its test files run against
each mutant (`pytest -x -n 0`); the per-module counts, score and survivors go to
benchmarks/results/mutation.json (modules not run this time keep their last entry, or are listed
as not run). Not part of `make test`: run it under `nice`, one module at a time if need be:

    make mutation MODULES="overload-admission capacity"
    .venv/bin/python benchmarks/mutation.py --list
    .venv/bin/python benchmarks/mutation.py --survivors overload-admission

`--survivors` runs again only the mutants that survived the module's last run (its session in
build/mutation/), against the tests as they are now: new tests can kill a survivor but cannot
revive a killed mutant, since tests are only ever added.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
MODULES_FILE = ROOT / "benchmarks" / "mutation_modules.toml"
RESULT = ROOT / "benchmarks" / "results" / "mutation.json"
WORK = ROOT / "build" / "mutation"
BIN = Path(sys.executable).parent

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
    timeout: float


def modules() -> dict[str, Module]:
    table = tomllib.loads(MODULES_FILE.read_text())["modules"]
    return {
        name: Module(name, list(entry["paths"]), list(entry["tests"]), float(entry["timeout"]))
        for name, entry in table.items()
    }


def cosmic_ray_config(module: Module, path: str) -> str:
    test = " ".join(
        [str(BIN / "python"), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0", *module.tests]
    )
    excluded = ", ".join(json.dumps(e) for e in EXCLUDED_OPERATORS)
    return (
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(path)}\n"
        f"timeout = {module.timeout}\n"
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
    module: Module, path: str, *, survivors_only: bool = False
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every mutant of one file with its result (cosmic-ray's session dump)."""
    stem = f"{module.name}-{Path(path).stem}"
    config, session = WORK / f"{stem}.toml", WORK / f"{stem}.sqlite"
    config.write_text(cosmic_ray_config(module, path))
    original = (ROOT / path).read_bytes()
    try:
        if survivors_only:
            forget_survivors(session)
        else:
            session.unlink(missing_ok=True)
            subprocess.run([str(BIN / "cosmic-ray"), "init", str(config), str(session)], cwd=ROOT, check=True)
            subprocess.run(
                [str(BIN / "cr-filter-operators"), str(session), str(config)], cwd=ROOT, check=True
            )
        subprocess.run([str(BIN / "cosmic-ray"), "exec", str(config), str(session)], cwd=ROOT, check=True)
    finally:  # an interrupted run must not leave a mutant behind
        if (ROOT / path).read_bytes() != original:
            (ROOT / path).write_bytes(original)
    dump = subprocess.run(
        [str(BIN / "cosmic-ray"), "dump", str(session)], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return [tuple(json.loads(line)) for line in dump.splitlines() if line.strip()]  # type: ignore[misc]


def summarise(
    module: Module, items: list[tuple[dict[str, Any], dict[str, Any] | None]], seconds: float
) -> dict[str, Any]:
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
                    "path": str(Path(mutation["module_path"]).resolve().relative_to(ROOT)),
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
        "seconds": round(seconds),
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


def write(results: dict[str, Any], known: dict[str, Module]) -> None:
    for name, module in known.items():
        results.setdefault(name, {"status": "not run", "paths": module.paths, "tests": module.tests})
    document = {
        "tool": "cosmic-ray",
        "score": "(killed + timeout) / mutants; skipped operators are not counted (benchmarks/mutation.py)",
        "excluded_operators": EXCLUDED_OPERATORS,
        "modules": {name: results[name] for name in known},
    }
    RESULT.write_text(json.dumps(document, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help="module names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--survivors", action="store_true", help="re-run only the last run's survivors")
    args = parser.parse_args(argv)
    known = modules()
    if args.list:
        for module in known.values():
            print(f"{module.name}: {' '.join(module.paths)} <- {' '.join(module.tests)}")
        return 0
    unknown = sorted(set(args.modules) - set(known))
    if unknown:
        print(f"unknown module(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    previous = json.loads(RESULT.read_text())["modules"] if RESULT.exists() else {}
    results = {name: entry for name, entry in previous.items() if name in known}
    WORK.mkdir(parents=True, exist_ok=True)
    for name in args.modules or list(known):
        module = known[name]
        print(f"== {name}", flush=True)
        started = time.monotonic()
        items = [
            pair for path in module.paths for pair in run_path(module, path, survivors_only=args.survivors)
        ]
        previous_seconds = float(results.get(name, {}).get("seconds", 0)) if args.survivors else 0.0
        results[name] = summarise(module, items, time.monotonic() - started + previous_seconds)
        if args.survivors:
            results[name]["survivors_rerun_at"] = results[name]["run_at"]
            results[name]["run_at"] = previous.get(name, {}).get("run_at", results[name]["run_at"])
        entry = results[name]
        print(
            f"{name}: {entry['killed']} killed, {entry['timeout']} timeout, {entry['survived']} survived, score {entry['score']}"
        )
        write(results, known)
    write(results, known)
    return 0


if __name__ == "__main__":
    sys.exit(main())
