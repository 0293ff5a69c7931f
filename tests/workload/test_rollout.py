"""The day-two rules (llmctl.infra.workload.scheduling.rollout) held to the controllers' source, as recorded in
data/rollout_sources.yaml (KubeRay v1.7.0's hash and upgrade decision, Kubernetes' Deployment
fenceposts and defaults, pulumi-kubernetes' Job replacement), then applied to the catalog's objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from workload_helpers import find, rendered

from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.scheduling import rollout
from llmctl.infra.workload.scheduling.rollout import cluster_hash, predict, resolve_fenceposts

SOURCES = yaml.safe_load((Path(__file__).parent / "data" / "rollout_sources.yaml").read_text())
Obj = dict[str, Any]


def at(obj: Obj, path: str) -> tuple[Any, str]:
    """(parent, key) of a dotted path (`*` is the first list item)."""
    parts = path.split(".")
    node = obj
    for part in parts[:-1]:
        node = node[0] if part == "*" else node.setdefault(part, {})
    return node, parts[-1]


# ---- the rules against the recorded source ---------------------------------------------------------
def test_the_muted_fields_are_kuberays() -> None:
    recorded = SOURCES["kuberay_hash"]["muted"] + SOURCES["kuberay_hash_input"]["muted"]
    assert sorted(rollout.HASH_MUTED) == sorted(recorded)


@pytest.mark.parametrize("path", rollout.HASH_MUTED)
def test_a_muted_field_leaves_the_hash_and_a_pod_field_moves_it(path: str) -> None:
    rayservice = find(rendered("llama2-inf2"), "RayService")
    changed = copy.deepcopy(rayservice)
    parent, key = at(changed["spec"]["rayClusterConfig"], path)
    parent[key] = [{"key": "k", "operator": "Exists"}] if key.endswith(("tolerations", "Gates")) else 7
    if key == "upgradeStrategy":
        parent[key] = {"type": "Recreate"}
    assert changed != rayservice and cluster_hash(changed) == cluster_hash(rayservice)
    # the field beside it that KubeRay does hash: a worker's node selector
    moved = copy.deepcopy(rayservice)
    worker = moved["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["nodeSelector"]["extra"] = "1"
    assert cluster_hash(moved) != cluster_hash(rayservice)


def test_zero_downtime_follows_the_upgrade_type_as_kuberay_reads_it() -> None:
    table = SOURCES["kuberay_decision"]["zero_downtime"]
    for recorded, enabled in table.items():
        spec: Obj = {} if recorded == "unset" else {"upgradeStrategy": {"type": recorded}}
        assert rollout.zero_downtime({"spec": spec}) is enabled, recorded


@pytest.mark.parametrize("case", SOURCES["kubernetes_rolling"]["cases"])
def test_fenceposts_resolve_as_the_deployment_controller_does(case: dict[str, Any]) -> None:
    assert resolve_fenceposts(case["max_surge"], case["max_unavailable"], case["desired"]) == (
        case["surge"],
        case["unavailable"],
    )


def test_deployment_defaults_and_job_fields_are_the_recorded_ones() -> None:
    defaults = SOURCES["kubernetes_deployment_defaults"]
    assert (
        defaults["max_surge"],
        defaults["max_unavailable"],
    ) == (rollout.DEFAULT_MAX_SURGE, rollout.DEFAULT_MAX_UNAVAILABLE)
    assert [f"spec.{f}" for f in rollout.JOB_FORCE_NEW] == SOURCES["pulumi_kubernetes_force_new"]["job"]
    # the default on 1-3 replicas: one pod more, none fewer
    assert [resolve_fenceposts("25%", "25%", n) for n in (1, 2, 3, 4)] == [(1, 0), (1, 0), (1, 0), (1, 1)]


# ---- the rules on the catalog's objects ------------------------------------------------------------
def kinds(found: list[rollout.Rollout]) -> list[tuple[str, str]]:
    return [(r.kind, r.object) for r in found]


def test_a_code_change_builds_a_second_inf2_cluster_and_says_what_it_costs() -> None:
    old, new = rendered("llama2-inf2"), rendered("llama2-inf2", digest="c" * 64)
    found = predict(old, new, strategy="surge")
    [cluster] = [r for r in found if r.object == "RayService/llama2-inf2"]
    price = hardware().instance("inf2.48xlarge").on_demand_usd
    assert (cluster.kind, cluster.extra_nodes, cluster.instance_type) == ("new-cluster", 1, "inf2.48xlarge")
    assert cluster.extra_usd_per_hour == pytest.approx(price) and not cluster.downtime
    assert "shouldPrepareNewCluster" in cluster.source
    assert rollout.extra_nodes(found) == {"inf2.48xlarge": 1}
    # the wheel is in the Ray pods only: the mirror Job and the Gradio UI do not roll
    assert kinds(found) == [("new-cluster", "RayService/llama2-inf2")]


def test_the_70b_blueprint_would_need_two_more_p4de_and_replaces_instead() -> None:
    old = rendered("llama2-70b-vllm-gpu", upgrade="surge")
    moved = rendered("llama2-70b-vllm-gpu", upgrade="surge", digest="c" * 64)
    [surge] = [r for r in predict(old, moved, strategy="surge") if r.object.startswith("RayService/")]
    assert (surge.kind, surge.extra_nodes, surge.instance_type) == ("new-cluster", 2, "p4de.24xlarge")
    old, new = rendered("llama2-70b-vllm-gpu"), rendered("llama2-70b-vllm-gpu", digest="c" * 64)
    assert find(new, "RayService")["spec"]["upgradeStrategy"] == {"type": "None"}  # the blueprint's replace
    [replace] = [r for r in predict(old, new, strategy="replace") if r.object.startswith("RayService/")]
    assert (replace.kind, replace.extra_nodes, replace.downtime) == ("replace-cluster", 0, True)


def test_replicas_alone_never_reach_the_running_cluster() -> None:
    old = rendered("tiny-cpu")
    new = copy.deepcopy(old)
    group = find(new, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    group["replicas"], group["maxReplicas"] = 2, 5
    [only] = predict(old, new, strategy="surge")
    assert (only.kind, only.extra_nodes) == ("unchanged", 0)
    assert (
        "keeps its old values" in only.text and "GenerateHashWithoutReplicasAndWorkersToDelete" in only.source
    )


def test_an_appended_worker_group_updates_the_cluster_in_place() -> None:
    old = rendered("llama2-inf2")
    new = copy.deepcopy(old)
    groups = find(new, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    groups.append({**copy.deepcopy(groups[0]), "groupName": "inf2-b"})
    [only] = [r for r in predict(old, new, strategy="surge") if r.object == "RayService/llama2-inf2"]
    assert (only.kind, only.extra_nodes, only.instance_type) == ("cluster-in-place", 1, "inf2.48xlarge")
    # a group inserted in front is not an append: a second cluster
    inserted = copy.deepcopy(old)
    groups = find(inserted, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    groups.insert(0, {**copy.deepcopy(groups[0]), "groupName": "inf2-a"})
    [second] = [r for r in predict(old, inserted, strategy="surge") if r.object == "RayService/llama2-inf2"]
    assert (second.kind, second.extra_nodes) == ("new-cluster", 2)


def test_an_engine_argument_travels_in_the_serve_config_without_new_pods() -> None:
    old = rendered("llama2-inf2")
    new = copy.deepcopy(old)
    spec = find(new, "RayService")["spec"]
    spec["serveConfigV2"] = spec["serveConfigV2"].replace("max_new_tokens: 256", "max_new_tokens: 512")
    assert spec["serveConfigV2"] != find(old, "RayService")["spec"]["serveConfigV2"]
    assert kinds(predict(old, new, strategy="surge")) == [("serve-config", "RayService/llama2-inf2")]


def test_the_upgrade_strategy_switch_rolls_nothing() -> None:
    old = rendered("llama2-inf2")
    new = rendered("llama2-inf2", upgrade="replace")
    found = predict(old, new, strategy="replace")
    assert [(r.kind, r.object) for r in found if r.object.startswith("RayService")] == [
        ("updated", "RayService/llama2-inf2")
    ]
    assert "upgradeStrategy" in found[0].text and not any(r.extra_nodes for r in found)


def test_a_cluster_change_under_upgrade_type_none_waits_for_the_cluster_to_go() -> None:
    old = rendered("llama2-inf2", upgrade="replace")
    new = rendered("llama2-inf2", upgrade="replace", digest="c" * 64)
    [cluster] = [r for r in predict(old, new, strategy="surge") if r.object.startswith("RayService")]
    assert cluster.kind == "unchanged" and "--replace" in cluster.text


def test_a_triton_template_change_surges_one_gpu_pod_or_replaces_it() -> None:
    old = rendered("llama2-triton-vllm-gpu")
    new = rendered("llama2-triton-vllm-gpu", digest="c" * 64)
    deployment = find(new, "Deployment", "llama2-triton-vllm-gpu-triton")
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    [serving] = [r for r in predict(old, new, strategy="surge") if r.object.endswith("-triton")]
    assert (serving.kind, serving.extra_nodes, serving.instance_type) == ("rolling-surge", 1, "g5.2xlarge")
    replaced_old = rendered("llama2-triton-vllm-gpu", upgrade="replace")
    replaced_new = rendered("llama2-triton-vllm-gpu", upgrade="replace", digest="c" * 64)
    [replace] = [
        r for r in predict(replaced_old, replaced_new, strategy="replace") if r.object.endswith("-triton")
    ]
    assert (replace.kind, replace.extra_nodes, replace.downtime) == ("rolling-replace", 0, True)


def test_an_unchanged_workload_rolls_nothing() -> None:
    objects = rendered("llama2-torchserve-inf2")
    assert predict(objects, copy.deepcopy(objects), strategy="surge") == []
