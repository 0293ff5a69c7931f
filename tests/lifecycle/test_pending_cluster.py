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
from standin_support import StandinEngine, install

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


# ---- `llmctl down` ---------------------------------------------------------------------------------
def _karpenter_instance(ec2: Any, image: str, instance_type: str, pool: str, claim: str) -> str:
    """An instance tagged as Karpenter v1.14.1 tags its nodes (aws/karpenter-provider-aws v1.14.1,
    bde00654: pkg/utils/utils.go GetTags 116-121, pkg/controllers/nodeclaim/tagging/controller.go 106-110)."""
    tags = {
        "kubernetes.io/cluster/llmctl-dev": "owned",
        "karpenter.sh/nodepool": pool,
        "eks:eks-cluster-name": "llmctl-dev",
        "karpenter.k8s.aws/ec2nodeclass": pool,
        "karpenter.sh/nodeclaim": claim,
        "Name": f"ip-{claim}.us-west-2.compute.internal",
    }
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    [found] = ec2.run_instances(
        ImageId=image, InstanceType=instance_type, MinCount=1, MaxCount=1, TagSpecifications=spec
    )["Instances"]
    return str(found["InstanceId"])


def _with_instances(step: list[dict[str, Any]], ids: dict[str, str]) -> list[dict[str, Any]]:
    """The recorded step with its nodes' recorded instance ids replaced by moto's."""
    text = json.dumps(step)
    for recorded, real in ids.items():
        text = text.replace(recorded, real)
    return list(json.loads(text))


def test_down_says_a_pending_cluster_counts_its_nodes_and_the_sweep_takes_them(
    engine: StandinEngine, aws: str
) -> None:
    import boto3
    from lifecycle_scenario import an_image
    from lifecycle_support import eks_cluster, lifecycle

    eks_cluster(aws)
    lifecycle().up(NS, region=aws, wait=False)
    ec2 = boto3.client("ec2", region_name=aws)
    image = an_image(ec2)
    ids = {
        "i-0a1b2c3d4e5f60718": _karpenter_instance(ec2, image, "m5.xlarge", "ray-head", "ray-head-a1"),
        "i-0c4f7a9e2b3d51826": _karpenter_instance(ec2, image, "inf2.48xlarge", "inferentia-inf2", "inf2-b2"),
        "i-07e9d2c4a6b8f1035": _karpenter_instance(ec2, image, "inf2.48xlarge", "inferentia-inf2", "inf2-c3"),
    }
    built = _with_instances(_steps()[2], ids)  # both clusters, the pending one on a node of its own
    for obj in built:  # the stand-in has no KubeRay, which clears its finalizer once it has deleted both
        if obj["kind"] == "RayService":  # clusters (rayservice_controller.go 131-141); kept, the stand-in
            obj["metadata"].pop("finalizers")  # would hold it as a stuck one (standin_engine/kube_faults.py)
    engine.kube(*built)
    asked: list[list[str]] = []
    result = lifecycle().down(
        region=aws, confirm=lambda lines: asked.append(lines) or True, sweep_timeout_s=30
    )
    said = (
        f"RayService {NS}/{NS} has a pending second RayCluster {NEW} beside {OLD} (1 node(s) of its own "
        f"(inf2.48xlarge), both about ${M5 + 2 * INF2:.2f}/h): deleting the RayService deletes both clusters "
        "(KubeRay's finalizer) and their pods; their nodes go with Karpenter or the sweep"
    )
    assert said in asked[0] and said in result.notes  # before anything was deleted, and in the result
    [pending] = result.pending_clusters
    assert (pending["active"], pending["pending"]) == (OLD, NEW)
    assert result.to_dict()["pending_clusters"] == result.pending_clusters
    # the sweep terminated every node of both clusters and waited for them; nothing is left
    assert result.sweep is not None
    swept = {item.id for item in result.sweep.deleted if item.kind == "instance"}
    assert swept == set(ids.values())
    assert result.leftovers == [] and result.verdict() is None


def test_the_final_check_names_a_pending_clusters_node() -> None:
    from llmctl.errors import CloudError
    from llmctl.infra.aws.sweep import Leftover
    from llmctl.infra.lifecycle.ray_upgrade import upgrades
    from llmctl.infra.lifecycle.reports import DownResult

    built = _steps()[2]
    [found] = upgrades(
        [o for o in built if o["kind"] == "RayService"],
        [o for o in built if o["kind"] == "Pod"],
        [o for o in built if o["kind"] == "Node"],
    )
    result = DownResult(stack="dev", pending_clusters=[found.to_dict()])
    left = [
        Leftover(
            "instance", "i-07e9d2c4a6b8f1035", "ip-10-1-1-45", "us-west-2", "eks:eks-cluster-name=llmctl-dev"
        ),
        Leftover(
            "instance", "i-0c4f7a9e2b3d51826", "ip-10-1-0-112", "us-west-2", "eks:eks-cluster-name=llmctl-dev"
        ),
        Leftover(
            "instance", "i-0a1b2c3d4e5f60718", "ip-10-1-0-37", "us-west-2", "eks:eks-cluster-name=llmctl-dev"
        ),
    ]
    result.leftovers = left
    error = result.verdict()
    assert isinstance(error, CloudError)
    assert (
        f"instance i-07e9d2c4a6b8f1035 (ip-10-1-1-45) (node of the pending RayCluster {NEW} of RayService "
        f"{NS}/{NS})" in error.message
    )
    # the active cluster's nodes and the node both share are not the pending cluster's
    assert "instance i-0c4f7a9e2b3d51826 (ip-10-1-0-112)," in error.message
    assert error.message.endswith("; 1 of the instances were a pending second RayCluster's nodes")
