"""The wheel built from a source checkout is kept by a fingerprint of its sources: unchanged sources
reuse it (no build), any change to a packaged file or the build configuration builds again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from llmctl.infra.workload.delivery.wheel_cache import (
    CACHE_ENV,
    KEEP,
    cache_root,
    cached_build,
    source_fingerprint,
)
from llmctl.infra.workload.prepare import delivery as deploy_delivery

PYPROJECT = '[tool.setuptools]\npackage-dir = { "demo" = "pkg", "demo.cli" = "cli" }\n'


def _project(root: Path) -> Path:
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "cli").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "README.md").write_text("demo\n")
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "pkg" / "data.yaml").write_text("a: 1\n")
    (root / "cli" / "__init__.py").write_text("")
    (root / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0")
    (root / "notes.txt").write_text("not packaged\n")
    return root


def test_the_fingerprint_follows_packaged_files_and_build_inputs(tmp_path: Path) -> None:
    root = _project(tmp_path)
    first = source_fingerprint(root, "1")
    assert first is not None and len(first) == 64
    (root / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\1")  # byte code
    (root / "notes.txt").write_text("edited\n")  # outside the package folders
    assert source_fingerprint(root, "1") == first
    assert source_fingerprint(root, "2") != first  # another reproducible timestamp
    for edit in (
        root / "pkg" / "data.yaml",
        root / "cli" / "__init__.py",
        root / "README.md",
        root / "pyproject.toml",
    ):
        before = edit.read_bytes()
        edit.write_bytes(before + b"\n# changed\n")
        assert source_fingerprint(root, "1") != first, edit.name
        edit.write_bytes(before)
    (root / "pkg" / "new.py").write_text("")
    assert source_fingerprint(root, "1") != first


def test_no_fingerprint_without_a_package_mapping(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert source_fingerprint(tmp_path, "1") is None
    (tmp_path / "pyproject.toml").write_text("not toml [")
    assert source_fingerprint(tmp_path, "1") is None
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackage-dir = { "x" = "missing" }\n')
    assert source_fingerprint(tmp_path, "1") is None


def _builder(built: list[Path], *, private_copy: bool = True):  # type: ignore[no-untyped-def]
    def build(source: Path, into: Path) -> None:
        # a cached build runs on a copy of the fingerprinted files only, not on the checkout
        assert (source / "pyproject.toml").is_file() and (source / "notes.txt").exists() is not private_copy
        built.append(into)
        (into / f"demo-{len(built)}-py3-none-any.whl").write_bytes(b"wheel %d" % len(built))

    return build


def test_unchanged_sources_reuse_the_kept_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    root = _project(tmp_path / "src")
    built: list[Path] = []
    outs = [tmp_path / f"out{i}" for i in range(3)]
    for out in outs:
        out.mkdir()
    assert cached_build(root, outs[0], "demo-*.whl", _builder(built), "1") is False
    assert cached_build(root, outs[1], "demo-*.whl", _builder(built), "1") is True
    assert len(built) == 1
    assert (outs[1] / "demo-1-py3-none-any.whl").read_bytes() == b"wheel 1"
    (root / "pkg" / "__init__.py").write_text("x = 2\n")
    assert cached_build(root, outs[2], "demo-*.whl", _builder(built), "1") is False
    assert len(built) == 2 and [p.name for p in outs[2].iterdir()] == ["demo-2-py3-none-any.whl"]


def test_the_cache_is_pruned_to_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    root = _project(tmp_path / "src")
    for i in range(KEEP + 3):
        (root / "pkg" / "__init__.py").write_text(f"x = {i}\n")
        out = tmp_path / f"out{i}"
        out.mkdir()
        cached_build(root, out, "demo-*.whl", _builder([]), "1")
    assert len([p for p in (tmp_path / "cache").iterdir() if p.is_dir()]) == KEEP


def test_the_cache_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_root() is None
    root = _project(tmp_path / "src")
    built: list[Path] = []
    for _ in range(2):
        assert cached_build(root, tmp_path, "demo-*.whl", _builder(built, private_copy=False), "1") is False
    assert len(built) == 2
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "llmctl" / "wheels"


def test_build_wheel_from_this_checkout_builds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real build (pip wheel of this checkout), then the kept wheel: no second pip run, the same
    content digest (the image tag and S3 key do not change because the wheel was cached)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    runs: list[list[str]] = []
    real_run = deploy_delivery._run

    def counted(cmd: list[str], **env: str) -> None:
        runs.append(cmd)
        real_run(cmd, **env)

    monkeypatch.setattr(deploy_delivery, "_run", counted)
    first = deploy_delivery.build_wheel(tmp_path / "a")
    second = deploy_delivery.build_wheel(tmp_path / "b")
    assert len(runs) == 1 and runs[0][1:4] == ["-m", "pip", "wheel"]
    assert first.name == second.name and first.parent != second.parent
    assert deploy_delivery.content_digest(first) == deploy_delivery.content_digest(second)
    assert first.read_bytes() == second.read_bytes()


def test_two_builds_at_once_of_this_checkout_both_succeed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `up`s (or two test workers) building at the same time: each builds on its own copy, so
    setuptools' build/ folder is not shared (in place, one of them failed with 'File exists')."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    built: dict[int, Path] = {}
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            built[i] = deploy_delivery.build_wheel(tmp_path / f"out{i}")
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert errors == [] and sorted(built) == [0, 1]
    assert deploy_delivery.content_digest(built[0]) == deploy_delivery.content_digest(built[1])
    assert len([p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]) == 1
