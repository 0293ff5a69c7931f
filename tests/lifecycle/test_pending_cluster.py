"""A pending second RayCluster (issue 51): `llmctl status` names the active and pending clusters, says
an upgrade is in progress, lists the pending cluster's pods and nodes and what both clusters cost per
hour meanwhile; `llmctl down` counts the pending cluster's nodes and its final check names them.

The stand-in kubectl replays data/kuberay/rayservice_upgrade.json, a zero-downtime upgrade of the
llama2-inf2 RayService composed from KubeRay v1.7.0's source (the file names each piece's source;
tests/conformance/test_recorded_shapes.py holds its objects to the RayService CRD and Kubernetes'
schemas)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from standin_support import install

from llmctl.infra.lifecycle.ray_upgrade import read_rayservice, read_upgrades, upgrade_lines
from llmctl.infra.lifecycle.status import rayservice_status

DATA = Path(__file__).parent / "data" / "kuberay" / "rayservice_upgrade.json"
NS = "llama2-inf2"
OLD, NEW = "llama2-inf2-x7n2k", "llama2-inf2-b4q9z"
M5, INF2 = 0.192, 12.981  # the hardware catalog's on-demand prices (blueprints/data)


@pytest.fixture
def kubectl(tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in kubectl first on PATH, replaying the recorded upgrade; returns the kubeconfig
    `up` saves for stack dev."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, "kubectl", "kubectl")
    data = tmp_path / "standin"
    data.mkdir()
    shutil.copy(DATA, data / "kube-sequence.json")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_PULUMI_DIR", str(data))
    monkeypatch.setenv("STANDIN_BACKEND", str(tmp_path / "no-backend"))
    kube = state / "kube" / "dev.yaml"
    kube.parent.mkdir(parents=True, exist_ok=True)
    kube.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    return kube


def _steps() -> list[list[dict[str, Any]]]:
    return list(json.loads(DATA.read_text())["steps"])


def test_the_recorded_statuses_read_as_kuberay_sets_them() -> None:
    [before, building, built, after] = [
        read_rayservice(next(o for o in step if o["kind"] == "RayService")) for step in _steps()
    ]
    assert (before.active, before.pending, before.upgrade_in_progress) == (OLD, None, False)
    assert (building.active, building.pending, building.upgrade_in_progress) == (OLD, NEW, True)
    assert building.upgrade_reason == "BothActivePendingClustersExist" and building.ready
    assert built == building
    assert (after.active, after.pending, after.upgrade_in_progress) == (NEW, None, False)
    assert after.upgrade_reason == "NoPendingCluster" and not after.rollback


def test_status_follows_a_zero_downtime_upgrade(kubectl: Path) -> None:
    seen = [rayservice_status("dev", NS) for _ in _steps()]
    assert all(isinstance(rows, list) and len(rows) == 1 for rows in seen)
    [[before], [building], [built], [after]] = seen  # type: ignore[misc]
    assert upgrade_lines(before) == [f"RayService {NS}: active cluster {OLD}"]
    assert before["active_cluster"]["usd_per_hour"] == round(M5 + INF2, 4)
    assert before["pending_cluster"] is None
    # the pending cluster is being built: its head on the shared ray-head node, its worker unscheduled
    assert (building["active"], building["pending"], building["upgrade_in_progress"]) == (OLD, NEW, True)
    pending = building["pending_cluster"]
    assert (pending["pods"], pending["unscheduled_pods"]) == (2, 1)
    assert [n["instance_type"] for n in pending["nodes"]] == ["m5.xlarge"]
    assert building["both_usd_per_hour"] == round(M5 + INF2, 4)  # the shared head node counted once
    assert upgrade_lines(building)[:3] == [
        f"RayService {NS}: active cluster {OLD}, pending cluster {NEW} (upgrade in progress)",
        f"  active {OLD}: 2 pods on 1 x inf2.48xlarge, 1 x m5.xlarge, about ${M5 + INF2:.2f}/h",
        f"  pending {NEW}: 2 pods on 1 x m5.xlarge, 1 waiting for a node, about ${M5:.2f}/h",
    ]
    # its inf2.48xlarge came: both clusters now cost two accelerator nodes and the head node
    assert built["both_usd_per_hour"] == round(M5 + 2 * INF2, 4)
    [new_node] = [n for n in built["pending_cluster"]["nodes"] if n["instance_type"] == "inf2.48xlarge"]
    assert new_node["instance_id"] == "i-07e9d2c4a6b8f1035"
    assert (
        f"  both clusters meanwhile: about ${M5 + 2 * INF2:.2f}/h (${M5 + INF2:.2f}/h of it the active one)"
        in (upgrade_lines(built))
    )
    # switched: the former pending cluster is the active one, alone
    assert upgrade_lines(after) == [f"RayService {NS}: active cluster {NEW}"]
    assert after["active_cluster"]["usd_per_hour"] == round(M5 + INF2, 4)


def test_a_namespace_without_a_rayservice_asks_nothing_more(kubectl: Path) -> None:
    assert read_upgrades(kubectl, "other") == []


def test_status_says_why_when_kubernetes_does_not_answer(kubectl: Path, state: Path) -> None:
    (state / "kube" / "dev.yaml").write_text("clusters: []\n")
    found = rayservice_status("dev", NS)
    assert isinstance(found, dict) and "no configuration has been provided" in found["error"]
