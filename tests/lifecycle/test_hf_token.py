"""The Hugging Face token: `--hf-token-file`, then HF_TOKEN; a gated model without one is refused
before any stack changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from standin_support import StandinEngine

from llmctl.blueprints.hf_token import hf_token
from llmctl.errors import PrerequisiteError
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress


@pytest.fixture(autouse=True)
def _no_token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)


def test_token_file_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "token"
    file.write_text("hf_from_file\n")
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert hf_token(file) == "hf_from_file"
    assert hf_token() == "hf_from_env"
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_old_name")
    assert hf_token() == "hf_old_name"


def test_missing_or_empty_token_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PrerequisiteError, match="cannot read the Hugging Face token file"):
        hf_token(tmp_path / "missing")
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(PrerequisiteError, match="is empty"):
        hf_token(tmp_path / "empty")


def test_gated_blueprint_without_token_changes_no_stack(engine: StandinEngine) -> None:
    lifecycle = Lifecycle(Engine(resolve_backend()), Progress("quiet"), stack="dev")
    with pytest.raises(PrerequisiteError, match="gated") as info:
        lifecycle.up("llama2-7b-cpu", region="us-west-2", confirm=lambda plan: True)
    assert info.value.hint is not None and "--hf-token-file" in info.value.hint
    assert engine.calls() == []  # refused before the preview, the platform and the workload
