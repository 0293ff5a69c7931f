"""A blueprint with capacity reservations: the platform program's EC2NodeClass selects them and its
NodePool allows `reserved`, and both pass the upstream CRD schema and its CEL rules."""

from __future__ import annotations

from typing import Any

import pytest
from crd_validation import load_crds, validate
from upstream_files import upstream

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.plan.offline import run_offline
from llmctl.infra.platform.config import PlatformConfig

CRDS = load_crds(
    upstream("karpenter/karpenter.sh_nodepools.yaml"),
    upstream("karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml"),
)
RESERVATIONS = ["cr-0123456789abcdef0", {"llmctl.dev/reservation": "llama-70b", "team": "*"}]


def reserved_blueprint(fallback: str = "on-demand", name: str = "llama2-70b-vllm-gpu") -> Blueprint:
    data = load_blueprint(name).model_dump(mode="json")
    data["capacity"] = {"reservations": RESERVATIONS, "fallback": fallback}
    return Blueprint.model_validate(data)


def karpenter_objects(config: PlatformConfig) -> dict[tuple[str, str], dict[str, Any]]:
    from llmctl.infra.platform.program import build_platform

    found = {}
    for res in run_offline(lambda: build_platform(config)):
        if res.type in (
            "kubernetes:karpenter.sh/v1:NodePool",
            "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        ):
            obj = {key: res.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")}
            found[(obj["kind"], obj["metadata"]["name"])] = obj
    return found


# the pool keeps on-demand either way: `fallback: none` binds the reserving blueprint's own pods
@pytest.mark.parametrize(
    ("fallback", "capacity_types"),
    [("on-demand", ["reserved", "on-demand"]), ("none", ["reserved", "on-demand"])],
)
def test_reservation_blueprint_renders_valid_nodeclass_and_nodepool(
    fallback: str, capacity_types: list[str]
) -> None:
    config = PlatformConfig.for_blueprints([reserved_blueprint(fallback)], stack="ci")
    objects = karpenter_objects(config)
    node_class = objects[("EC2NodeClass", "gpu-nvidia")]
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"},
        {"tags": {"llmctl.dev/reservation": "llama-70b", "team": "*"}},
    ]
    [capacity] = [
        r
        for r in objects[("NodePool", "gpu-nvidia")]["spec"]["template"]["spec"]["requirements"]
        if r["key"] == "karpenter.sh/capacity-type"
    ]
    assert capacity["values"] == capacity_types
    for obj in objects.values():
        result = validate(obj, CRDS)
        assert result.ok, result.report()
        assert result.cel_evaluated > 0
    # the other pools are untouched
    assert "capacityReservationSelectorTerms" not in objects[("EC2NodeClass", "default")]["spec"]


def test_the_crd_refuses_what_llmctl_refuses_first() -> None:
    """An ID mixed with tags in one term, and an empty tag value, fail the upstream CEL rules; the
    blueprint schema never writes them (one term is an ID or tags) and refuses empty tags."""
    config = PlatformConfig.for_blueprints([reserved_blueprint()], stack="ci")
    node_class = karpenter_objects(config)[("EC2NodeClass", "gpu-nvidia")]
    node_class["spec"]["capacityReservationSelectorTerms"] = [
        {"id": "cr-0123456789abcdef0", "tags": {"a": "b"}}
    ]
    assert validate(node_class, CRDS).cel_failures
    node_class["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"a": ""}}]
    assert validate(node_class, CRDS).cel_failures
    data = load_blueprint("llama2-70b-vllm-gpu").model_dump(mode="json")
    for bad in ({"a": ""}, "cr-UPPER", {}):
        data["capacity"] = {"reservations": [bad]}
        with pytest.raises(ValueError):
            Blueprint.model_validate(data)


def test_reservations_of_two_blueprints_on_one_pool_are_merged_and_survive_stack_config() -> None:
    second = load_blueprint("llama2-triton-vllm-gpu").model_dump(mode="json")
    second["capacity"] = {"reservations": ["cr-0fedcba9876543210"], "fallback": "none"}
    config = PlatformConfig.for_blueprints(
        [reserved_blueprint("none"), Blueprint.model_validate(second)], stack="ci"
    )
    merged = config.capacity_reservations["gpu-nvidia"]
    assert merged.reservations == [*RESERVATIONS, "cr-0fedcba9876543210"] and merged.fallback == "none"
    assert PlatformConfig.from_pulumi_config(config.to_pulumi_config()) == config


def test_spot_and_reservations_do_not_mix() -> None:
    data = reserved_blueprint().model_dump(mode="json")
    data["compute"]["capacity_type"] = "spot"
    with pytest.raises(ValueError, match=r"compute\.capacity_type: on-demand"):
        Blueprint.model_validate(data)


def _pod_specs(resources: list[Any]) -> dict[str, dict[str, Any]]:
    """Every pod template of a workload plan, by the kind and name of its owner (RayService workers too)."""
    specs: dict[str, dict[str, Any]] = {}
    for res in resources:
        spec = res.inputs.get("spec") or {}
        if res.type.endswith(":Deployment"):
            specs[f"Deployment/{res.name}"] = spec["template"]["spec"]
        if res.type.endswith(":RayService"):
            for group in spec["rayClusterConfig"]["workerGroupSpecs"]:
                specs[f"RayService/{group['groupName']}"] = group["template"]["spec"]
    return specs


def test_one_blueprint_s_reservation_without_fallback_leaves_the_other_blueprint_on_demand() -> None:
    """A plan of llama2-70b-vllm-gpu (reservation, `fallback: none`) and llama2-triton-vllm-gpu on one
    platform: both serve from the gpu-nvidia pool, whose NodePool still allows on-demand; the 70b
    workers select reserved capacity, the Triton pods on-demand (they neither wait for the
    reservation nor take it)."""
    from llmctl.infra.plan.workload import run_workload_offline
    from llmctl.infra.workload.config import PlatformFacts
    from llmctl.infra.workload.schedulability import validate_workload

    seventy, triton = reserved_blueprint("none"), load_blueprint("llama2-triton-vllm-gpu")
    config = PlatformConfig.for_blueprints([seventy, triton], stack="ci")
    [capacity] = [
        r
        for r in karpenter_objects(config)[("NodePool", "gpu-nvidia")]["spec"]["template"]["spec"][
            "requirements"
        ]
        if r["key"] == "karpenter.sh/capacity-type"
    ]
    assert "on-demand" in capacity["values"] and "reserved" in capacity["values"]
    selectors = {}
    for bp in (seventy, triton):
        plan = run_workload_offline(bp, config)
        for owner, spec in _pod_specs(plan.resources).items():
            if spec["nodeSelector"].get("karpenter.sh/nodepool") == "gpu-nvidia":
                selectors[(bp.name, owner)] = spec["nodeSelector"].get("karpenter.sh/capacity-type")
    assert selectors == {
        ("llama2-70b-vllm-gpu", "RayService/p4de"): "reserved",
        (
            "llama2-triton-vllm-gpu",
            "Deployment/llama2-triton-vllm-gpu/llama2-triton-vllm-gpu-triton",
        ): "on-demand",
    }, selectors
    # `llmctl validate`'s facts know the reserving blueprint's pool allows reserved capacity
    assert validate_workload(seventy, PlatformFacts.for_blueprint(seventy)) == []
    # and on the platform's pools as its outputs give them, both blueprints' pods can be scheduled
    from llmctl.infra.platform.program import node_pool_outputs

    outputs = {
        "cluster_name": config.cluster_name,
        "region": config.region,
        "node_pools": node_pool_outputs(config),
    }
    facts = PlatformFacts.from_outputs(outputs)
    assert "on-demand" in facts.pool("gpu-nvidia").capacity_types  # type: ignore[union-attr]
    assert validate_workload(seventy, facts) == [] and validate_workload(triton, facts) == []
