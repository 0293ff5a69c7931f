"""The tables and trees a user reads, at 80 columns (COLUMNS=80, the width a piped command and
these tests use; a terminal of 80 columns gets the same): nothing cut inside a value, nothing wider
than the screen unless it is one reference that cannot be broken.

The catalog tables are snapshots (`snapshots/*.txt`; LLMCTL_UPDATE_SNAPSHOTS=1 writes them anew:
read the diff before committing). What other work changes often (image references, the plan's
resources) is held to the rules instead of a snapshot.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app

SNAPSHOTS = Path(__file__).parent / "snapshots"


def at_80(monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["catalog", "instances"], "catalog-instances.txt"),
        (["catalog", "models"], "catalog-models.txt"),
    ],
)
def test_catalog_tables_at_80_columns(monkeypatch: pytest.MonkeyPatch, args: list[str], name: str) -> None:
    shown = "\n".join(line.rstrip() for line in at_80(monkeypatch, *args).splitlines()) + "\n"
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "…" not in shown  # no value cut to fit (was `0.7…` for a price)
    path = SNAPSHOTS / name
    if os.environ.get("LLMCTL_UPDATE_SNAPSHOTS") == "1":
        path.write_text(shown, encoding="utf-8")
    assert shown == path.read_text(encoding="utf-8")


def test_catalog_models_never_splits_an_id(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.blueprints.models import catalog_models

    words = set(at_80(monkeypatch, "catalog", "models").replace(",", " ").split())
    for model in catalog_models().values():
        assert set(model.aliases) <= words, model.key


def test_images_list_keeps_each_reference_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.infra.aws.images import list_images

    lines = at_80(monkeypatch, "images", "list").splitlines()
    for row in list_images():
        assert f"  base {row['base']}" in lines, row["base"]  # one line, never broken mid-word
        assert any(line.startswith(row["runtime"]) and row["dockerfile"] in line for line in lines)
    assert all(len(line) <= 80 for line in lines if not line.startswith("  base "))


def test_plan_tree_shows_whole_inputs_once_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = at_80(monkeypatch, "plan", "-b", "tiny-cpu")
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert '\\"' not in shown  # defaultTags was JSON inside a JSON string: escaped twice
    assert "..." not in shown  # inputs were cut mid-JSON
    provider = next(line for line in shown.splitlines() if "pulumi:providers:aws" in line)
    assert re.search(r"defaultTags=\{.*\}", provider) and "region=us-west-2" in provider
