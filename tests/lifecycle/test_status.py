"""`llmctl status` data and `llmctl connect`'s forwards, below the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmctl.infra.lifecycle.status import collect_status, kube_status, port_forwards
from llmctl.state import Endpoint, save_endpoint


def test_port_forwards_follow_what_the_endpoint_recorded() -> None:
    found = Endpoint(
        "dev",
        "llama2-inf2",
        "eks",
        "http://localhost:8000/v1",
        "m",
        extra={"service": "serve-svc", "port": "8000", "dashboard_service": "head-svc", "ui_service": "ui"},
    )
    assert port_forwards(found, 9000) == [
        ("endpoint", "serve-svc", 9000, 8000, "http://localhost:9000/v1"),
        ("dashboard", "head-svc", 8265, 8265, "http://localhost:8265"),
        ("UI", "ui", 7860, 80, "http://localhost:7860"),
    ]
    bare = Endpoint("dev", "tiny-cpu", "eks", "http://localhost:8000/v1", "m", extra={"service": "s"})
    assert [f[0] for f in port_forwards(bare, 8000)] == ["endpoint"]
    assert port_forwards(Endpoint("dev", "x", "eks", "http://h/v1", "m"), 8000) == []


def test_local_status_lists_the_recorded_endpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path))
    save_endpoint(Endpoint("dev", "tiny-cpu", "local", "http://127.0.0.1:9/v1", "m"))
    data = collect_status("dev", "local")
    assert data["stack"] == "dev" and data["target"] == "local" and data["local"] == []
    assert [e["blueprint"] for e in data["endpoints"]] == ["tiny-cpu"]
    assert "stacks" not in data and collect_status("other", "local")["endpoints"] == []


def test_kube_status_without_a_saved_kubeconfig_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path))
    assert "run `llmctl up` first" in kube_status("dev")["error"]
