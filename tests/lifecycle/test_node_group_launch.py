"""A replica over two nodes whose nodes come one at a time (Karpenter launches a node per pending pod,
never the group at once): `up`'s launch watch says which stage pods still wait and what the nodes that
came cost meanwhile. The pods are the worker pods of the rendered 405B RayService, as KubeRay makes
them (the group's template, a name, a nodeName once bound)."""

from __future__ import annotations

import copy
from typing import Any

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.lifecycle.launches import findings
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests

BIG = "llama31-405b-vllm-gpu"


def _worker_pods(bound: list[bool]) -> list[dict[str, Any]]:
    bp = load_blueprint(BIG)
    manifests = build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=None
    )
    rayservice = next(m for m in manifests if m["kind"] == "RayService")
    template = rayservice["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]
    pods = []
    for index, on_node in enumerate(bound):
        pod = {"metadata": copy.deepcopy(template["metadata"]), "spec": copy.deepcopy(template["spec"])}
        pod["metadata"]["name"] = f"{BIG}-raycluster-x-p5-worker-{index}"
        pod["status"] = {"phase": "Running" if on_node else "Pending"}
        if on_node:
            pod["spec"]["nodeName"] = f"ip-10-0-0-{index}.ec2.internal"
        pods.append(pod)
    return pods


def _found(pods: list[dict[str, Any]], nodes_per_replica: int) -> list[Any]:
    return findings(
        [],
        [],
        pods,
        region="us-east-1",
        instance_type="p5.48xlarge",
        blueprint=BIG,
        nodes_per_replica=nodes_per_replica,
    )


def test_one_stage_running_and_one_waiting_is_said_with_its_cost() -> None:
    found = [f for f in _found(_worker_pods([True, False]), 2) if f.kind == "group"]
    assert len(found) == 1 and not found[0].final
    assert "1 of the 2 p5.48xlarge nodes of 1 replica(s) of 2 nodes run" in found[0].text
    assert "$55.04/h" in found[0].text
    assert f"{BIG}-raycluster-x-p5-worker-1 wait(s) for a node" in found[0].text
    assert "capacity.reservations" in found[0].hint


def test_nothing_is_said_when_the_group_is_whole_or_not_started_or_single_node() -> None:
    assert not [f for f in _found(_worker_pods([True, True]), 2) if f.kind == "group"]
    assert not [f for f in _found(_worker_pods([False, False]), 2) if f.kind == "group"]
    assert not [f for f in _found(_worker_pods([True, False]), 1) if f.kind == "group"]


def test_status_counts_a_replica_once_all_its_worker_pods_are_there(monkeypatch: Any) -> None:
    """The RayCluster KubeRay makes from the rendered RayService (its annotations copied: ray-project/kuberay
    v1.7.0 rayservice_controller.go 1511-1512), with the recorded KubeRay status
    (tests/lifecycle/data/recorded/raycluster_status.json) at the worker counts of a two-node replica."""
    import json
    from pathlib import Path

    from llmctl.infra.lifecycle import replicas

    bp = load_blueprint(BIG)
    manifests = build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=None
    )
    rayservice = next(m for m in manifests if m["kind"] == "RayService")
    recorded = json.loads(
        (Path(__file__).parent / "data" / "recorded" / "raycluster_status.json").read_text()
    )
    group = rayservice["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    status = {**recorded["status"], "desiredWorkerReplicas": group["replicas"]}
    annotations = dict(rayservice["metadata"]["annotations"])
    assert annotations["llmctl.dev/nodes-per-replica"] == "2"
    for available, serving in ((1, 0), (2, 1)):
        cluster = {
            "kind": "RayCluster",
            "metadata": {"name": "rc", "annotations": annotations},
            "status": {**status, "availableWorkerReplicas": available, "readyWorkerReplicas": available},
        }

        def kubectl_json(
            kubeconfig: Any, *args: str, cluster: dict[str, Any] = cluster, **_: Any
        ) -> dict[str, Any]:
            return {"items": [cluster] if args[1] == "rayclusters" else []}

        monkeypatch.setattr(replicas, "kubectl_json", kubectl_json)
        [row] = replicas.workload_replicas(None, BIG)
        assert (row["current"], row["desired"]) == (serving, 1)
