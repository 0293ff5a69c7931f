"""A pending second RayCluster (issue 51): `llmctl status` names the active and pending clusters, says
an upgrade is in progress, lists the pending cluster's pods and nodes and what both clusters cost per
hour meanwhile; `llmctl down` counts the pending cluster's nodes and its final check names them.

The stand-in kubectl replays data/kuberay/rayservice_upgrade.json, a zero-downtime upgrade of the
llama2-inf2 RayService composed from KubeRay v1.7.0's source (the file names each piece's source;
tests/conformance/test_recorded_shapes.py holds its objects to the RayService CRD and Kubernetes'
schemas)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from standin_support import StandinEngine, replay_kubectl

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
    return replay_kubectl(tmp_path, state, monkeypatch, DATA)


def _steps() -> list[list[dict[str, Any]]]:
    return list(json.loads(DATA.read_text())["steps"])


def _deletable(step: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The step for a `down` through the stand-in: it has no KubeRay, which clears the RayService's
    finalizer once it has deleted both clusters (rayservice_controller.go 131-141); kept, the stand-in
    would hold the RayService as a stuck one (standin_engine/kube_faults.py)."""
    out = json.loads(json.dumps(step))
    for obj in out:
        if obj["kind"] == "RayService":
            obj["metadata"].pop("finalizers")
    return list(out)


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
    engine.kube(*_deletable(built))
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


# ---- `llmctl up` waits until KubeRay switched --------------------------------------------------------
def _raycluster(name: str) -> dict[str, Any]:
    """A RayCluster of the RayService, labelled as KubeRay v1.7.0 labels it
    (rayservice_controller.go constructRayClusterForRayService 1506-1509, utils/util.go 53)."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"ray.io/originated-from-cr-name": NS, "ray.io/originated-from-crd": "RayService"},
        },
    }


def test_up_waits_until_kuberay_switched_and_the_old_cluster_went(monkeypatch: pytest.MonkeyPatch) -> None:
    import copy

    from llmctl.infra.lifecycle import ray_upgrade

    [before, building, _, after] = [next(o for o in step if o["kind"] == "RayService") for step in _steps()]
    unread = copy.deepcopy(before)
    unread["metadata"]["generation"] = 2  # `up` changed the spec; KubeRay has not reconciled it yet
    answers = [
        (unread, [OLD]),
        (building, [OLD, NEW]),
        (after, [OLD, NEW]),  # switched; the old cluster waits out rayClusterDeletionDelaySeconds
        (after, [NEW]),
    ]
    calls: list[tuple[str, ...]] = []

    def kubectl_json(kubeconfig: Any, *args: str, **_: Any) -> dict[str, Any]:
        calls.append(args)
        service, clusters = answers[min((len(calls) - 1) // 2, len(answers) - 1)]
        return {"items": [service] if args[1] == "rayservices" else [_raycluster(n) for n in clusters]}

    monkeypatch.setattr(ray_upgrade, "kubectl_json", kubectl_json)
    said: list[str] = []
    slept: list[float] = []
    ray_upgrade.wait_switched(
        None, NS, timeout_s=3600, on_wait=said.append, sleep=slept.append, clock=lambda: 0.0
    )
    assert said == [
        f"RayService {NS}: KubeRay has not read its new spec yet",
        f"RayService {NS}: KubeRay builds RayCluster {NEW} beside {OLD} (both run until the new one serves; "
        "`llmctl status` shows their nodes and cost)",
        f"RayService {NS}: traffic is on {NEW}; the old RayCluster {OLD} is deleted after rayClusterDeletionDelaySeconds",
    ]
    assert slept == [10, 10, 10] and len(calls) == 8


def test_the_upgrade_wait_stops_at_its_timeout_with_what_it_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llmctl.errors import ServingError
    from llmctl.infra.lifecycle import ray_upgrade

    building = next(o for o in _steps()[1] if o["kind"] == "RayService")

    def kubectl_json(kubeconfig: Any, *args: str, **_: Any) -> dict[str, Any]:
        return {"items": [building] if args[1] == "rayservices" else [_raycluster(OLD), _raycluster(NEW)]}

    monkeypatch.setattr(ray_upgrade, "kubectl_json", kubectl_json)
    ticks = iter(range(0, 10_000, 600))
    with pytest.raises(ServingError) as info:
        ray_upgrade.wait_switched(
            None,
            NS,
            timeout_s=1800,
            on_wait=lambda text: None,
            sleep=lambda s: None,
            clock=lambda: next(ticks),
        )
    assert info.value.message.startswith(f"the upgrade in namespace {NS} has not finished after 1800 s: ")
    assert f"KubeRay builds RayCluster {NEW} beside {OLD}" in info.value.message
    assert "`llmctl status` shows the active and pending clusters" in (info.value.hint or "")


def test_a_surge_up_returns_once_kuberay_switched_and_the_old_cluster_went(
    engine: StandinEngine,
    aws: str,
    ec2_quotas: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the stand-in: llama2-inf2 deployed, the code changes, the quota holds a second
    inf2.48xlarge; `up` updates the stack, then waits while the RayService (as the stand-in kubectl
    replays it) builds the pending cluster, switches, and keeps the old one for its deletion delay,
    and returns only when one RayCluster is left."""
    from lifecycle_support import lifecycle, ready_pod
    from test_day_two import INF_QUOTA, change_the_code

    from llmctl.infra.lifecycle import orchestrate

    lifecycle().up(NS, region=aws, wait=False)
    ec2_quotas({INF_QUOTA: 384})  # room for the second inf2.48xlarge
    change_the_code(tmp_path, monkeypatch)
    monkeypatch.setattr(orchestrate, "SWITCH_POLL_S", 0.0)
    engine.kube(ready_pod(NS, f"{NEW}-inf2-worker-h7p2c"))
    [_, building, _, after] = [next(o for o in step if o["kind"] == "RayService") for step in _steps()]
    steps = [
        [building, _raycluster(OLD), _raycluster(NEW)],
        [after, _raycluster(OLD), _raycluster(NEW)],
        [after, _raycluster(NEW)],
    ]
    (engine.root / "kube-sequence.json").write_text(json.dumps({"advance_on": "RayService", "steps": steps}))
    waits: list[str] = []
    runner = lifecycle()
    monkeypatch.setattr(runner.progress, "wait", waits.append)
    result = runner.up(NS, region=aws, confirm=lambda plan: True, wait_timeout_s=600)
    phases = [name for name, _ in result.timeline.phases]
    assert phases.index(f"workload {NS}") < phases.index("upgrade") < phases.index("readiness")
    assert (
        f"RayService {NS}: KubeRay builds RayCluster {NEW} beside {OLD} (both run until the new one serves; "
        in (" ".join(waits))
    )
    assert any(f"the old RayCluster {OLD} is deleted after" in text for text in waits)
    reads = [c for c in engine.kubectl_calls() if c[2:4] == ["get", "rayservices"]]
    assert len(reads) >= 3  # it read until the third state, the settled one


def test_llmctl_status_prints_and_reports_the_pending_cluster(engine: StandinEngine, aws: str) -> None:
    """`llmctl status` and `status --json` on a deployed llama2-inf2 whose RayService is mid-upgrade
    (the stand-in kubectl serves the recorded step with both clusters on their nodes)."""
    from lifecycle_support import lifecycle
    from typer.testing import CliRunner

    from llmctl.cli.app import app

    lifecycle().up(NS, region=aws, wait=False)
    engine.kube(*_steps()[2])
    text = CliRunner().invoke(app, ["status"])
    assert text.exit_code == 0, text.output
    assert (
        f"  RayService {NS}: active cluster {OLD}, pending cluster {NEW} (upgrade in progress)\n"
        f"    active {OLD}: 2 pods on 1 x inf2.48xlarge, 1 x m5.xlarge, about ${M5 + INF2:.2f}/h\n"
        f"    pending {NEW}: 2 pods on 1 x m5.xlarge, 1 x inf2.48xlarge, about ${M5 + INF2:.2f}/h\n"
        f"    both clusters meanwhile: about ${M5 + 2 * INF2:.2f}/h (${M5 + INF2:.2f}/h of it the active one)\n"
    ) in text.stdout
    data = CliRunner().invoke(app, ["status", "--json"])
    assert data.exit_code == 0, data.output
    [row] = json.loads(data.stdout)["workloads"]
    [service] = row["rayservices"]
    assert (service["active"], service["pending"], service["upgrade_in_progress"]) == (OLD, NEW, True)
    assert service["upgrade_reason"] == "BothActivePendingClustersExist"
    assert service["both_usd_per_hour"] == round(M5 + 2 * INF2, 4)
    assert [n["instance_id"] for n in service["pending_cluster"]["nodes"]] == [
        "i-0a1b2c3d4e5f60718",
        "i-07e9d2c4a6b8f1035",
    ]


def test_down_force_does_not_ask_a_cluster_it_may_not_reach(engine: StandinEngine, aws: str) -> None:
    """`down --force` is for a cluster whose API may not answer: no RayService is read (a kubectl that
    hangs would delay it by its timeout per namespace)."""
    from lifecycle_support import lifecycle

    lifecycle().up(NS, region=aws, wait=False)
    engine.kube(*_deletable(_steps()[2]))
    result = lifecycle().down(region=aws, force=True, confirm=lambda lines: True, sweep_timeout_s=30)
    assert result.pending_clusters == []
    assert not [c for c in engine.kubectl_calls() if c[2:4] == ["get", "rayservices"]]


def test_status_of_a_cluster_without_kuberay_shows_no_rayservice(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.errors import ServingError
    from llmctl.infra.lifecycle import status

    def no_crd(kubeconfig: Any, namespace: str) -> list[Any]:
        raise ServingError(
            "`kubectl get rayservices -n ns -o json` failed: error: the server doesn't have a resource type "
            '"rayservices"',
            "check the cluster with `llmctl status`",
        )

    monkeypatch.setattr(status, "read_upgrades", no_crd)
    assert status.rayservice_status("dev", "ns") == []


def test_the_upgrade_wait_stops_when_karpenter_cannot_launch_the_second_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The quota check could not see it (another team's instances started since): EC2 refuses the
    pending cluster's inf2.48xlarge with VcpuLimitExceeded, which Karpenter reports on the NodeClaim
    (karpenter_shapes: recorded from Karpenter's source); the wait stops at that final finding."""
    from karpenter_shapes import capacity_event, fleet_error

    from llmctl.errors import LlmctlError
    from llmctl.infra.lifecycle import ray_upgrade
    from llmctl.infra.lifecycle.launches import LaunchWatch, findings

    building = next(o for o in _steps()[1] if o["kind"] == "RayService")
    waiting = next(o for o in _steps()[1] if o["kind"] == "Pod" and not o["spec"].get("nodeName"))
    waiting = {
        **waiting,
        "spec": {**waiting["spec"], "nodeSelector": {"karpenter.sh/nodepool": "inferentia-inf2"}},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}],
        },
    }

    def kubectl_json(kubeconfig: Any, *args: str, **_: Any) -> dict[str, Any]:
        return {"items": [building] if args[1] == "rayservices" else [_raycluster(OLD), _raycluster(NEW)]}

    monkeypatch.setattr(ray_upgrade, "kubectl_json", kubectl_json)
    refusal = capacity_event("inferentia-inf2-x7k2p", fleet_error("vcpu_quota", limit="192"))
    polls: list[int] = []

    def poll() -> list[Any]:
        polls.append(1)
        events = [refusal] if len(polls) > 1 else []  # the refusal comes with the second look
        return findings(
            [], events, [waiting], region="us-west-2", instance_type="inf2.48xlarge", blueprint=NS
        )

    said: list[str] = []
    watch = LaunchWatch(poll, NS, said.append, "the nodes bill meanwhile; `llmctl down --stack dev --yes`")
    ticks = iter(range(0, 100_000, 600))
    with pytest.raises(LlmctlError) as info:
        ray_upgrade.wait_switched(
            None,
            NS,
            timeout_s=3600,
            on_wait=said.append,
            watch=watch,
            sleep=lambda s: None,
            clock=lambda: next(ticks),  # 10 min a look: without the watch, the timeout ends it
        )
    assert "the EC2 vCPU quota refuses inf2.48xlarge (limit 192 vCPUs)" in info.value.message
    assert len(polls) == 2 and any(text.startswith("Karpenter: ") for text in said)


def test_down_on_an_existing_cluster_says_its_pending_cluster(engine: StandinEngine, tmp_path: Path) -> None:
    """`--target kubeconfig`: no platform stack; `down` asks the cluster through the kubeconfig `up`
    recorded with the endpoint."""
    import yaml
    from test_existing_cluster import POOLS, complete_cluster

    from llmctl.infra.lifecycle.backend import resolve_backend
    from llmctl.infra.lifecycle.engine import Engine
    from llmctl.infra.lifecycle.orchestrate import Lifecycle
    from llmctl.infra.lifecycle.progress import Progress

    kubeconfig, pools = tmp_path / "k3s.yaml", tmp_path / "pools.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster: {server: 'https://127.0.0.1:6443'}\n"
    )
    pools.write_text(yaml.safe_dump(POOLS))
    complete_cluster(engine)

    def run() -> Lifecycle:
        return Lifecycle(Engine(resolve_backend()), Progress("quiet"), stack="dev")

    run().up(NS, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    engine.kube(*_deletable(_steps()[2]))
    asked: list[list[str]] = []
    result = run().down(region="us-west-2", confirm=lambda lines: asked.append(lines) or True)
    [line] = [
        text for text in asked[0] if text.startswith(f"RayService {NS}/{NS} has a pending second RayCluster")
    ]
    assert f"{NEW} beside {OLD}" in line and line in result.notes
    reads = [c for c in engine.kubectl_calls() if c[2:4] == ["get", "rayservices"]]
    assert reads and all(c[:2] == ["--kubeconfig", str(kubeconfig)] for c in reads)
