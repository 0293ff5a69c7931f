"""`llmctl status` replicas on a cluster (issue 28): the stand-in kubectl replays a KEDA scale-up of
the Triton workload step by step (tests/lifecycle/data/scaling/triton_scale_up.json: composed, as no
live one was recorded; its fields and values follow the sources it names, checked by
tests/conformance/test_recorded_shapes.py), and each status read shows that step's running and
desired pods and the queue signal KEDA's HPA reports."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from standin_support import install

from llmctl.infra.lifecycle.replicas import workload_replicas
from llmctl.infra.lifecycle.status import replica_status

DATA = Path(__file__).parent / "data" / "scaling" / "triton_scale_up.json"
NAMESPACE = "llama2-triton-vllm-gpu"


@pytest.fixture
def kubectl(tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in kubectl first on PATH, replaying the recorded sequence; returns a kubeconfig."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, "kubectl", "kubectl")
    data = tmp_path / "standin"
    data.mkdir()
    shutil.copy(DATA, data / "kube-sequence.json")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_PULUMI_DIR", str(data))
    monkeypatch.setenv("STANDIN_BACKEND", str(tmp_path / "no-backend"))
    kube = state / "kube" / "dev.yaml"  # where `up` saves the stack's kubeconfig
    kube.parent.mkdir(parents=True, exist_ok=True)
    kube.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    return kube


def test_status_follows_a_recorded_keda_scale_up(kubectl: Path) -> None:
    steps = json.loads(DATA.read_text())["steps"]
    seen = [workload_replicas(kubectl, NAMESPACE) for _ in steps]
    assert [(row["current"], row["desired"], row["signal"]) for [row] in seen] == [
        (1, 1, "0 per pod"),
        (1, 4, "8 per pod"),
        (1, 4, "2 per pod"),
        (2, 4, "2 per pod"),
        (4, 4, "2 per pod"),
    ]
    assert {(row["kind"], row["name"]) for [row] in seen} == {("Deployment", f"{NAMESPACE}-triton")}
    # the replay stays on its last step, and another namespace has nothing scaled
    assert workload_replicas(kubectl, NAMESPACE)[0]["current"] == 4
    assert workload_replicas(kubectl, "other") == []


def test_status_says_why_when_kubernetes_does_not_answer(kubectl: Path, state: Path) -> None:
    (state / "kube" / "dev.yaml").write_text("clusters: []\n")  # kubectl refuses an empty config
    found = replica_status("dev", NAMESPACE)
    assert isinstance(found, dict) and "no configuration has been provided" in found["error"]
