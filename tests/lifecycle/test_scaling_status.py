"""`llmctl status` replicas on a cluster (issue 28): the stand-in kubectl replays a KEDA scale-up of
the Triton workload step by step (tests/lifecycle/data/scaling/triton_scale_up.json: composed, as no
live one was recorded; its fields and values follow the sources it names, checked by
tests/conformance/test_recorded_shapes.py), and each status read shows that step's running and
desired pods and the queue signal KEDA's HPA reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from standin_support import replay_kubectl

from llmctl.infra.lifecycle.replicas import workload_replicas
from llmctl.infra.lifecycle.status import replica_status

DATA = Path(__file__).parent / "data" / "scaling" / "triton_scale_up.json"
NAMESPACE = "llama2-triton-vllm-gpu"


@pytest.fixture
def kubectl(tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in kubectl first on PATH, replaying the recorded sequence; returns a kubeconfig."""
    return replay_kubectl(tmp_path, state, monkeypatch, DATA)


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
