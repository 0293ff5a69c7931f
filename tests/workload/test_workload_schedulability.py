"""The schedulability check passes for the catalog and fails precisely for each seed failure."""

from __future__ import annotations

from typing import Any

import pytest
from workload_helpers import blueprint, config_for, existing_cluster, find, manifests_for, worker

from llmctl.blueprints.hardware import hardware
from llmctl.errors import BlueprintError
from llmctl.infra.workload.config import PlatformFacts, PoolFacts
from llmctl.infra.workload.schedulability import (
    Problem,
    check_schedulable,
    ensure_schedulable,
    pod_requests,
    pod_templates,
    selector_matches,
    validate_workload,
)


def _check(name: str, manifests: list[dict[str, Any]]) -> list[Problem]:
    return check_schedulable(manifests, config_for(name).platform.pools, hardware())


def test_catalog_blueprints_are_schedulable(catalog_name: str) -> None:
    assert validate_workload(blueprint(catalog_name)) == []


def test_mismatched_labels_name_the_closest_pool() -> None:
    manifests = manifests_for("llama2-inf2")
    worker(manifests)["template"]["spec"]["nodeSelector"] = {"instanceType": "inf2"}  # a seed-style typo
    problems = _check("llama2-inf2", manifests)
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.kind, problem.name, problem.where) == ("RayService", "llama2-inf2", "worker group inf2")
    assert "matches no node of any pool" in problem.message
    assert "closest pool 'inferentia-inf2': instanceType=inferentia-inf2 (not inf2)" in problem.message
    assert "karpenter.sh/nodepool" in problem.hint


def test_instance_type_outside_the_pool_is_a_label_mismatch() -> None:
    manifests = manifests_for("llama3-vllm-inf2")
    worker(manifests)["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"] = "g5.xlarge"
    [problem] = _check("llama3-vllm-inf2", manifests)
    assert "launches inf2, not g5.xlarge" in problem.message


def test_missing_toleration_names_the_taint_and_the_fix() -> None:
    manifests = manifests_for("llama2-70b-vllm-gpu")
    del worker(manifests)["template"]["spec"]["tolerations"]
    [problem] = _check("llama2-70b-vllm-gpu", manifests)
    assert "does not tolerate its taint(s) nvidia.com/gpu:NoSchedule" in problem.message
    assert "pool 'gpu-nvidia'" in problem.message
    assert problem.hint == "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]"


def test_oversize_request_reports_resource_and_allocatable() -> None:
    manifests = manifests_for("llama3-vllm-inf2")
    requests = worker(manifests)["template"]["spec"]["containers"][0]["resources"]["requests"]
    requests["aws.amazon.com/neuron"] = "2"  # inf2.8xlarge has one device
    requests["memory"] = "200Gi"
    problems = _check("llama3-vllm-inf2", manifests)
    fit = [p for p in problems if "do not fit one node" in p.message]
    assert len(fit) == 1
    assert "aws.amazon.com/neuron 2 > 1" in fit[0].message
    assert "memory 200 GiB > " in fit[0].message
    assert "inf2.8xlarge" in fit[0].message
    # two devices without the Neuron scheduler is a second, separate problem
    assert any("my-scheduler" in p.hint for p in problems)


def test_whole_node_request_fails_because_of_the_daemonset_reserve() -> None:
    manifests = manifests_for("tiny-cpu")
    worker(manifests)["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = (
        "4"  # all of m5.xlarge
    )
    [problem] = _check("tiny-cpu", manifests)
    assert "cpu 4 > 3.44" in problem.message
    assert "Karpenter's allocatable less the platform's DaemonSets" in problem.message


def test_missing_scheduler_name_for_many_devices() -> None:
    manifests = manifests_for("llama2-inf2")
    del worker(manifests)["template"]["spec"]["schedulerName"]
    [problem] = _check("llama2-inf2", manifests)
    assert "requests 12 aws.amazon.com/neuron but uses the default scheduler" in problem.message
    assert "schedulerName: my-scheduler" in problem.hint


def test_neuroncore_requests_also_need_the_scheduler() -> None:
    manifests = manifests_for("llama3-vllm-inf2")
    resources = worker(manifests)["template"]["spec"]["containers"][0]["resources"]
    del resources["requests"]["aws.amazon.com/neuron"], resources["limits"]["aws.amazon.com/neuron"]
    resources["limits"]["aws.amazon.com/neuroncore"] = "2"  # limits only: requests default to limits
    [problem] = _check("llama3-vllm-inf2", manifests)
    assert "2 aws.amazon.com/neuroncore" in problem.message


def test_affinity_and_autoscaler_sidecar_are_considered() -> None:
    manifests = manifests_for("tiny-cpu")
    rs = find(manifests, "RayService")
    head = next(t for t in pod_templates(rs) if t.where == "head group")
    assert pod_requests(head)["cpu"] == pytest.approx(2.5)  # head 2 + autoscaler sidecar 0.5
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
    assert not selector_matches(spec, {"karpenter.sh/nodepool": "default"})
    assert selector_matches(spec, {"karpenter.sh/nodepool": "gpu"})


def test_platform_without_the_pool_fails_validation() -> None:
    bp = blueprint("llama2-inf2")
    facts = PlatformFacts.for_blueprint(bp)
    no_inf2 = facts.model_copy(update={"pools": [p for p in facts.pools if p.name != "inferentia-inf2"]})
    problems = validate_workload(bp, no_inf2)
    assert problems and all("matches no node" in p.message for p in problems)
    with pytest.raises(BlueprintError) as info:
        ensure_schedulable(bp, no_inf2)
    assert "would leave pods Pending" in info.value.message
    assert info.value.problems[0][0] == "RayService/llama2-inf2 (worker group inf2)"


def test_kubeconfig_target_uses_the_named_pools() -> None:
    bp = blueprint("tiny-cpu")
    facts = existing_cluster(
        [PoolFacts(name="cpu", labels={"pool": "cpu"}, instance_types=["m5.xlarge"], managed_by="existing")]
    )
    assert validate_workload(bp, facts) == []
    from llmctl.infra.workload.config import WorkloadConfig
    from llmctl.infra.workload.manifests import build_manifests

    objects = build_manifests(WorkloadConfig(blueprint=bp, platform=facts), hf_token=None)
    assert worker(objects)["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    gpu_bp = blueprint("llama2-triton-vllm-gpu")
    [problem] = validate_workload(gpu_bp, facts)
    assert "no pool of the cluster runs g5.2xlarge" in problem.message


def test_from_outputs_reads_the_platform_node_pools_export() -> None:
    outputs = {
        "cluster_name": "llmctl-dev",
        "region": "us-west-2",
        "kubeconfig": {"apiVersion": "v1"},
        "node_pools": [
            {
                "name": "inferentia-inf2",
                "labels": {"karpenter.sh/nodepool": "inferentia-inf2", "instanceType": "inferentia-inf2"},
                "taints": [{"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}],
                "instance_families": ["inf2"],
                "capacity_types": ["on-demand"],
                "managed_by": "karpenter",
            },
            {"name": "default", "labels": {}, "taints": ["dedicated=x:NoExecute"], "families": ["m5"]},
        ],
        "cache_bucket": "bucket-1",
        "versions": {"kubernetes": "1.35"},
    }
    facts = PlatformFacts.from_outputs(outputs)
    assert facts.pool("inferentia-inf2").taints[0].key == "aws.amazon.com/neuron"  # type: ignore[union-attr]
    default = facts.pool("default")
    assert default is not None and default.taints[0].value == "x" and default.taints[0].effect == "NoExecute"
    assert default.instance_families == ["m5"]
    assert facts.kubeconfig == '{"apiVersion": "v1"}' and "kubeconfig" not in repr(facts)
    assert facts.kubernetes_version == "1.35" and facts.cache_bucket == "bucket-1"


def test_an_api_key_is_refused_exactly_where_the_registry_says_the_app_cannot_check_it(
    catalog_name: str,
) -> None:
    from llmctl.blueprints.rules import API_KEY_CHECKED
    from llmctl.blueprints.runtimes import runtime

    bp = blueprint(catalog_name)
    keyed = bp.model_copy(update={"exposure": bp.exposure.model_copy(update={"api_key": True})})
    refused = [p for p in validate_workload(keyed) if p.where == "exposure"]
    checks = runtime(bp.runtime).api_key_check
    assert checks == (bp.runtime in API_KEY_CHECKED)  # the schedulability check and the rules agree
    assert bool(refused) == (not checks)
    if refused:
        assert refused[0].message == f"{bp.runtime} cannot check an API key, so the endpoint would be open"


def test_a_capacity_type_selector_matches_only_pools_that_launch_that_capacity() -> None:
    # the model-mirror Job asks for karpenter.sh/capacity-type: on-demand (issue 25, item 3)
    job = find(manifests_for("llama2-inf2"), "Job", "model-mirror")
    [template] = pod_templates(job)
    spec = template.spec
    assert spec["nodeSelector"]["karpenter.sh/capacity-type"] == "on-demand"
    spot_only = PoolFacts(name="default", capacity_types=["spot"], instance_families=["m5"])
    both = spot_only.model_copy(update={"capacity_types": ["spot", "on-demand"]})
    unsaid = spot_only.model_copy(update={"capacity_types": []})
    assert not any(selector_matches(spec, labels) for labels in spot_only.node_label_sets())
    assert [selector_matches(spec, labels) for labels in both.node_label_sets()] == [False, True]
    assert any(selector_matches(spec, labels) for labels in unsaid.node_label_sets())
    problems = check_schedulable([job], [spot_only], hardware())
    assert [p.message.split(";")[0] for p in problems] == [
        "nodeSelector/affinity karpenter.sh/nodepool=default, karpenter.sh/capacity-type=on-demand matches no "
        "node of any pool"
    ]
