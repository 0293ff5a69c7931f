"""Import `llmctl` from the copy of the tree this file is in (benchmarks/mutation.py).

`make mutation` runs each module's mutants in its own copy of the tree under build/mutation/trees/,
so that modules can run side by side without one module's mutant reaching another module's tests.
The editable install maps `llmctl` to the checkout it was installed from; this finder, put first on
`sys.meta_path`, maps the folders of pyproject.toml's `[tool.setuptools] package-dir` in this copy
instead. benchmarks/mutation_test.py puts this folder first on PYTHONPATH, so the test run and every
Python process its tests start (the stand-in engine, CLI subprocesses) import the copy.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import tomllib

TREE = Path(__file__).resolve().parents[2]


class TreeFinder(importlib.abc.MetaPathFinder):
    """The packages of pyproject.toml's package-dir, found in this tree."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def install() -> None:
    if any(isinstance(finder, TreeFinder) for finder in sys.meta_path):
        return
    package_dir = tomllib.loads((TREE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    sys.meta_path.insert(0, TreeFinder({name: TREE / folder for name, folder in package_dir.items()}))


install()
