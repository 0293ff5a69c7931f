"""Fixtures for the foundation tests: a scratch state dir and a blueprint writer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmctl.blueprints._data import data_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(path))
    from llmctl.blueprints.hardware import load_hardware

    load_hardware.cache_clear()
    yield path
    load_hardware.cache_clear()


def catalog_data(name: str) -> dict[str, Any]:
    """A catalog blueprint as a mutable dict."""
    return dict(yaml.safe_load(data_file("catalog", f"{name}.yaml").read_text()))


@pytest.fixture
def write_blueprint(tmp_path: Path) -> Callable[..., Path]:
    """Write a catalog blueprint with changes applied (dotted paths) to a temp file."""

    def write(base: str, changes: dict[str, Any] | None = None, *, raw: str | None = None) -> Path:
        path = tmp_path / f"{base}-edited.yaml"
        if raw is not None:
            path.write_text(raw)
            return path
        data = catalog_data(base)
        for dotted, value in (changes or {}).items():
            node = data
            *parents, leaf = dotted.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            if value is _DELETE:
                node.pop(leaf, None)
            else:
                node[leaf] = value
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


_DELETE = object()


@pytest.fixture
def delete() -> object:
    """Sentinel: remove a key in write_blueprint changes."""
    return _DELETE


@pytest.fixture(scope="session")
def built_packages() -> set[str]:
    """The packages setup.py hands setuptools (what a wheel of this checkout contains)."""
    import importlib.util

    import tomllib

    spec = importlib.util.spec_from_file_location("llmctl_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # not __main__: defines packages() without calling setup()
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    # setuptools finds packages relative to the working directory, the checkout's root in a build
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        return set(setup.packages(package_dir))
