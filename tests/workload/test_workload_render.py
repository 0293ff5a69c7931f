"""`render_yaml`: secrets redacted, otherwise identical to the objects the stack applies."""

from __future__ import annotations

from pathlib import Path

import yaml
from workload_helpers import TOKEN, manifests_for

from llmctl.infra.workload.render import redact, render_yaml

# The blueprints that render the Hugging Face token Secret, written out here: the test must see a
# Secret wherever one is expected, and none elsewhere.
HF_TOKEN_SECRET_BLUEPRINTS = {
    "llama2-70b-vllm-gpu",
    "llama2-7b-cpu",
    "llama2-torchserve-inf2",
    "llama2-triton-vllm-gpu",
    "llama31-405b-vllm-gpu",  # gated, like Llama 2 (the model catalog)
}


def test_render_redacts_secrets_and_keeps_everything_else(catalog_name: str, tmp_path: Path) -> None:
    manifests = manifests_for(catalog_name)
    rendered = render_yaml(manifests, tmp_path)
    assert TOKEN not in rendered.text
    documents = [doc for doc in yaml.safe_load_all(rendered.text) if doc]
    secrets = 0
    for original, document in zip(manifests, documents, strict=True):
        if original["kind"] != "Secret":
            assert document == original
            continue
        if original["metadata"]["name"] == "open-webui-secret":  # Open WebUI's key (empty: no value given)
            assert document == {**original, "stringData": {"WEBUI_SECRET_KEY": "<redacted>"}}
            continue
        # what the cluster gets, with only the value hidden (written out, not computed by redact())
        secrets += 1
        assert original["stringData"] == {"HF_TOKEN": TOKEN}
        assert document == {**original, "stringData": {"HF_TOKEN": "<redacted>"}}
    assert secrets == (catalog_name in HF_TOKEN_SECRET_BLUEPRINTS)
    assert [yaml.safe_load(p.read_text()) for p in rendered.files] == documents
    assert all(TOKEN not in p.read_text() for p in rendered.files)


def test_redact_hides_data_and_string_data_and_leaves_the_input_alone() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "n"},
        "type": "Opaque",
        "data": {"a": "c2VjcmV0"},
        "stringData": {"b": "secret"},
    }
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "kept"}}
    assert redact([secret, config]) == [
        {**secret, "data": {"a": "<redacted>"}, "stringData": {"b": "<redacted>"}},
        config,
    ]
    assert secret["data"] == {"a": "c2VjcmV0"} and secret["stringData"] == {"b": "secret"}


def test_render_file_names_and_literal_blocks(tmp_path: Path) -> None:
    rendered = render_yaml(manifests_for("llama2-7b-cpu"), tmp_path / "out")
    assert [p.name for p in rendered.files] == [
        "01-namespace-llama2-7b-cpu.yaml",
        "02-serviceaccount-llmctl-serving.yaml",
        "03-serviceaccount-llmctl-ray-head.yaml",
        # what the Ray head's token may change (issue 53, finding 2), before any pod
        "04-validatingadmissionpolicy-llmctl-llama2-7b-cpu-guard.yaml",
        "05-validatingadmissionpolicybinding-llmctl-llama2-7b-cpu-guard.yaml",
        "06-networkpolicy-default-deny.yaml",
        "07-networkpolicy-allow-egress.yaml",
        "08-networkpolicy-allow-ray.yaml",
        "09-networkpolicy-allow-kuberay.yaml",
        "10-networkpolicy-allow-metrics.yaml",
        "11-secret-hf-token.yaml",
        "12-rayservice-llama2-7b-cpu.yaml",
    ]
    assert "serveConfigV2: |" in rendered.files[-1].read_text()
    assert "&id" not in rendered.text and "*id" not in rendered.text


def test_render_to_unwritable_folder_is_a_clean_error(tmp_path: Path) -> None:
    import pytest

    from llmctl.errors import LlmctlError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LlmctlError, match="cannot write manifests"):
        render_yaml(manifests_for("tiny-cpu"), blocker / "sub")
