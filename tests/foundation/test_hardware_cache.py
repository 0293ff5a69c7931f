"""The shipped catalogs are parsed once per process (libyaml when PyYAML has it); a refresh overlay
in the state dir still applies."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmctl.blueprints._data import _LOADER, data_file
from llmctl.blueprints.hardware import hardware, overlay_path


def test_every_shipped_yaml_file_parses_the_same_with_libyaml() -> None:
    # the loader the product uses: libyaml's where PyYAML has it, else the same pure-Python one
    root = Path(str(data_file()))
    files = sorted(root.rglob("*.yaml"))
    assert len(files) >= 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert yaml.load(text, Loader=_LOADER) == yaml.safe_load(text), path


def test_state_dirs_without_an_overlay_share_one_catalog_and_an_overlay_applies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "one"))
    first = hardware()
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "two"))
    assert hardware() is first
    overlay = overlay_path()
    overlay.parent.mkdir(parents=True)
    overlay.write_text(yaml.safe_dump({"instances": [{"name": "inf2.xlarge", "on_demand_usd": 9.5}]}))
    refreshed = hardware()
    assert refreshed is not first and refreshed.instances["inf2.xlarge"].on_demand_usd == 9.5
    assert first.instances["inf2.xlarge"].on_demand_usd != 9.5
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "one"))
    assert hardware() is first
