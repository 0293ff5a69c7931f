"""What the GPU harness's tests share: a fresh copy of a harness file, loaded from its path as the
device runs it (benchmarks/gpu is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> ModuleType:
    """A fresh copy of a harness file, as the device runs it. device.py's step modules (device_*.py,
    imported from its folder) and collect.py's (collect_*.py) are dropped first, so each load reads
    GPU_ROOT and GPU_CARRY again."""
    for cached in [m for m in sys.modules if m.startswith(("device_", "collect_"))]:
        del sys.modules[cached]
    spec = importlib.util.spec_from_file_location(f"gpu_{name}", ROOT / "benchmarks" / "gpu" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_calls(heading: str) -> dict[str, list[str]]:
    """The call table of docs/gpu-runs.md's section that starts with ``heading``: each call's
    device.py arguments, as written (the coordinator runs them literally)."""
    page = (ROOT / "docs" / "gpu-runs.md").read_text()
    section = page.split(heading, 1)[1].split("\n### ", 1)[0]
    calls = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`") and cells[0] != "call":
            calls[cells[0]] = cells[1].strip("`").split()
    return calls
