"""One mutant's test run: the test command benchmarks/mutation.py gives cosmic-ray.

    python <tree>/benchmarks/mutation_test.py <mutated file>... -- <pytest arguments>

It runs in a copy of the tree (build/mutation/trees/<module>/). cosmic-ray starts every test command
with PYTHONDONTWRITEBYTECODE=1, so that a stale .pyc can never stand in for a mutant; then every run
compiles every module it imports, and pytest rewrites every test file again. This removes the
cached bytecode of the mutated files only and lets Python cache the rest. It puts
benchmarks/mutation_site/ first on PYTHONPATH (`llmctl` is imported from this copy, in this process
and in every Python process the tests start), then becomes pytest.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TREE = Path(__file__).resolve().parent.parent
SITE = TREE / "benchmarks" / "mutation_site"


def forget_bytecode(paths: list[str]) -> None:
    """The mutated files are compiled afresh: a .pyc of another mutant of the same size, written in
    the same second, would otherwise pass Python's mtime-and-size check."""
    for name in paths:
        source = TREE / name
        for cached in (source.parent / "__pycache__").glob(f"{source.stem}.*.pyc"):
            cached.unlink(missing_ok=True)


def main(argv: list[str]) -> None:
    split = argv.index("--")
    forget_bytecode(argv[:split])
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # the property tests search longer than in `make test` (tests/conftest.py, HYPOTHESIS_PROFILE_ENV)
    env.setdefault("LLMCTL_HYPOTHESIS_PROFILE", "mutation")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")]))
    os.chdir(TREE)
    os.execve(sys.executable, [sys.executable, "-m", "pytest", *argv[split + 1 :]], env)


if __name__ == "__main__":
    main(sys.argv[1:])
