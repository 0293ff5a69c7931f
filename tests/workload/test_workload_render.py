"""`render_yaml`: secrets redacted, otherwise identical to the objects the stack applies."""

from __future__ import annotations

from pathlib import Path

import yaml
from workload_helpers import TOKEN, manifests_for

from llmctl.infra.workload.render import REDACTED, redact, render_yaml


def test_render_redacts_secrets_and_keeps_everything_else(catalog_name: str, tmp_path: Path) -> None:
    manifests = manifests_for(catalog_name)
    rendered = render_yaml(manifests, tmp_path)
    assert TOKEN not in rendered.text
    documents = [doc for doc in yaml.safe_load_all(rendered.text) if doc]
    assert documents == redact(manifests)
    for original, document in zip(manifests, documents, strict=True):
        if original["kind"] != "Secret":
            assert document == original
        else:
            assert set(document["stringData"].values()) == {REDACTED}
    assert [yaml.safe_load(p.read_text()) for p in rendered.files] == documents
    assert all(TOKEN not in p.read_text() for p in rendered.files)


def test_render_file_names_and_literal_blocks(tmp_path: Path) -> None:
    rendered = render_yaml(manifests_for("llama2-7b-cpu"), tmp_path / "out")
    assert [p.name for p in rendered.files] == [
        "01-namespace-llama2-7b-cpu.yaml",
        "02-serviceaccount-llmctl-serving.yaml",
        "03-secret-hf-token.yaml",
        "04-rayservice-llama2-7b-cpu.yaml",
    ]
    assert "serveConfigV2: |" in rendered.files[3].read_text()
    assert "&id" not in rendered.text and "*id" not in rendered.text


def test_render_to_unwritable_folder_is_a_clean_error(tmp_path: Path) -> None:
    import pytest

    from llmctl.errors import LlmctlError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LlmctlError, match="cannot write manifests"):
        render_yaml(manifests_for("tiny-cpu"), blocker / "sub")
