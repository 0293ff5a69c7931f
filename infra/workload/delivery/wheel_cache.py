"""Wheels built from a source checkout, kept by a fingerprint of what goes into them.

Building the llmctl wheel (`pip wheel --no-deps --no-build-isolation`) takes seconds of CPU, and
every `up` needs it (its content digest names the image tag, the S3 key and the ConfigMap). The
build is reproducible (`SOURCE_DATE_EPOCH`), so sources that did not change give the same wheel: it
is kept under `$LLMCTL_WHEEL_CACHE` (default `~/.cache/llmctl/wheels`) by a fingerprint of

- every file under the package folders that `pyproject.toml` maps into `llmctl` (byte code aside),
- the project files the build reads (`pyproject.toml`, `setup.cfg`, `setup.py`, `MANIFEST.in`, the
  README, the licence),
- the Python, setuptools and wheel versions and the reproducible timestamp.

A checkout whose package folders cannot be read from `pyproject.toml` (or a Python without
`tomllib`) is built every time. `LLMCTL_WHEEL_CACHE=off` turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

CACHE_ENV = "LLMCTL_WHEEL_CACHE"
#: how many fingerprints are kept (the newest by use)
KEEP = 8
_PROJECT_FILES = (
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
    "LICENSE.txt",
)
_SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


def cache_root() -> Path | None:
    """Where wheels are kept, or None when the cache is off."""
    setting = os.environ.get(CACHE_ENV, "")
    if setting.lower() in ("off", "0", "false", "no"):
        return None
    if setting:
        return Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmctl" / "wheels"


def _package_dirs(root: Path) -> list[Path] | None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: no reader for pyproject.toml in the standard library
        return None
    try:
        project: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    mapping = project.get("tool", {}).get("setuptools", {}).get("package-dir")
    if not isinstance(mapping, dict) or not mapping:
        return None
    folders = sorted({(root / str(folder)).resolve() for folder in mapping.values()})
    return folders if all(folder.is_dir() for folder in folders) else None


def _tool_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def build_inputs(root: Path) -> list[Path] | None:
    """Every file the wheel is built from (sorted), or None when that cannot be told."""
    folders = _package_dirs(root)
    if folders is None:
        return None
    files = {root / name for name in _PROJECT_FILES if (root / name).is_file()}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            files.update(Path(dirpath) / name for name in filenames if not name.endswith((".pyc", ".pyo")))
    return sorted(files)


def source_fingerprint(root: Path, source_date_epoch: str, inputs: list[Path] | None = None) -> str | None:
    """sha256 over everything the wheel is built from, or None when that cannot be told."""
    inputs = inputs if inputs is not None else build_inputs(root)
    if inputs is None:
        return None
    digest = hashlib.sha256()
    tools = (sys.version_info[:2], _tool_version("setuptools"), _tool_version("wheel"), source_date_epoch)
    digest.update(repr(tools).encode())
    for path in inputs:
        name = os.path.relpath(path, root)
        digest.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _copy_inputs(root: Path, inputs: list[Path], into: Path) -> None:
    for path in inputs:
        target = into / os.path.relpath(path, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _prune(cache: Path) -> None:
    entries = sorted(
        (p for p in cache.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for stale in entries[KEEP:]:
        shutil.rmtree(stale, ignore_errors=True)


def cached_build(
    root: Path, out_dir: Path, pattern: str, build: Callable[[Path, Path], None], source_date_epoch: str
) -> bool:
    """Put the wheel of `root` in `out_dir`: the kept one when the sources are unchanged (True), else
    build it (False) with `build(source, out_dir)` and keep it.

    The build runs on a private copy of exactly the fingerprinted files, so what is kept is what the
    fingerprint names, and two builds at once (two `up`s, parallel tests) do not share setuptools'
    `build/` folder in the checkout. Without a fingerprint the checkout itself is built.
    """
    cache = cache_root()
    inputs = build_inputs(root)
    fingerprint = source_fingerprint(root, source_date_epoch, inputs) if cache is not None else None
    if cache is None or inputs is None or fingerprint is None:
        build(root, out_dir)
        return False
    kept = cache / fingerprint
    wheels = sorted(kept.glob(pattern)) if kept.is_dir() else []
    if wheels:
        os.utime(kept)  # most recently used: pruned last
        for wheel in wheels:
            shutil.copyfile(wheel, out_dir / wheel.name)
        return True
    with tempfile.TemporaryDirectory(prefix="llmctl-build-") as tmp:
        source = Path(tmp) / "src"
        _copy_inputs(root, inputs, source)
        build(source, out_dir)
    made = sorted(out_dir.glob(pattern))
    if made:
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cache, prefix=".new-"))
        for wheel in made:
            shutil.copyfile(wheel, staging / wheel.name)
        try:
            os.replace(staging, kept)  # atomic: a concurrent build of the same sources keeps one copy
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
        _prune(cache)
    return False
