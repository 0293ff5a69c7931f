"""Every custom object llmctl creates (NodePool, EC2NodeClass, IngressClassParams, RayService,
ScaledObject) is accepted by the upstream CRD: its openAPIV3Schema with unknown fields rejected, and
its x-kubernetes-validations CEL rules (transition rules are skipped for creates)."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from conformance_objects import (
    ALL_POOLS,
    CATALOG,
    PLATFORMS,
    platform_custom_objects,
    workload_custom_objects,
)
from crd_validation import CrdVersion, evaluate_rule, load_crds, validate
from upstream_files import DATA, upstream

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.pools import POOLS
from llmctl.blueprints.schema import ScalingSpec
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests


@functools.cache
def crds() -> dict[tuple[str, str], CrdVersion]:
    """The upstream CRDs, loaded once per process on first use (not at collection)."""
    return load_crds(
        upstream("karpenter/karpenter.sh_nodepools.yaml"),
        upstream("karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml"),
        upstream("karpenter/karpenter.sh_nodeclaims.yaml"),
        upstream("kuberay/ray.io_rayservices.yaml"),
        upstream("kuberay/ray.io_rayclusters.yaml"),
        upstream("keda/keda.sh_scaledobjects.yaml"),
        DATA / "elbv2.k8s.aws_ingressclassparams.yaml",
    )


def _assert_valid(obj: dict[str, Any]) -> None:
    result = validate(obj, crds())
    assert result.ok, f"{obj['kind']} {obj['metadata']['name']} refused:\n{result.report()}"
    return None


@pytest.mark.parametrize("platform", PLATFORMS)
def test_platform_custom_objects_pass_the_upstream_crds(platform: str) -> None:
    objects = platform_custom_objects(platform)
    kinds = {obj["kind"] for obj in objects}
    assert {"NodePool", "EC2NodeClass", "IngressClassParams"} <= kinds
    for obj in objects:
        _assert_valid(obj)


def test_every_karpenter_pool_is_created_and_checked() -> None:
    names = {o["metadata"]["name"] for o in platform_custom_objects(ALL_POOLS) if o["kind"] == "NodePool"}
    assert names == {spec.name for spec in POOLS if spec.managed_by == "karpenter"}


@pytest.mark.parametrize("name", CATALOG)
def test_workload_custom_objects_pass_the_upstream_crds(name: str) -> None:
    for obj in workload_custom_objects(name):
        _assert_valid(obj)


def test_the_catalog_creates_rayservices_and_a_scaledobject() -> None:
    kinds = [obj["kind"] for name in CATALOG for obj in workload_custom_objects(name)]
    assert kinds.count("RayService") >= 4 and set(kinds) == {"RayService", "ScaledObject"}


def test_cel_rules_are_evaluated_and_transition_rules_named() -> None:
    nodepool = next(o for o in platform_custom_objects(ALL_POOLS) if o["kind"] == "NodePool")
    result = validate(nodepool, crds())
    assert result.ok and result.cel_evaluated >= 10
    # rules on oldSelf (e.g. the nodeClassRef group/kind are immutable) only run on update
    assert any("oldSelf" in rule for rule in result.cel_skipped_transition)


def _nodepool() -> dict[str, Any]:
    return copy.deepcopy(next(o for o in platform_custom_objects(ALL_POOLS) if o["kind"] == "NodePool"))


def _nodeclass() -> dict[str, Any]:
    return copy.deepcopy(next(o for o in platform_custom_objects(ALL_POOLS) if o["kind"] == "EC2NodeClass"))


def test_a_misspelt_field_is_refused() -> None:
    obj = _nodepool()
    obj["spec"]["disruption"]["consolidateAftr"] = "1m"
    result = validate(obj, crds())
    assert not result.ok and "consolidateAftr" in result.report()
    meta = _nodeclass()
    meta["metadata"]["lables"] = {}
    assert "lables" in validate(meta, crds()).report()


def test_a_bad_ami_alias_fails_the_schema_pattern() -> None:
    obj = _nodeclass()
    obj["spec"]["amiSelectorTerms"] = [{"alias": "al2023-latest"}]
    assert not validate(obj, crds()).ok


def test_cel_rule_refuses_what_the_schema_allows() -> None:
    # role and instanceProfile are each valid alone; the CEL rule allows exactly one of them
    obj = _nodeclass()
    obj["spec"]["instanceProfile"] = "my-profile"
    result = validate(obj, crds())
    assert not result.schema_errors and result.cel_failures
    # a restricted Karpenter label in the NodePool template (CEL with the Kubernetes find() function)
    pool = _nodepool()
    pool["spec"]["template"]["metadata"]["labels"]["karpenter.sh/foo"] = "x"
    assert validate(pool, crds()).cel_failures
    # requirements with operator In need values (a rule over a list)
    pool = _nodepool()
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": []}
    )
    assert validate(pool, crds()).cel_failures


def test_rayservice_schema_reaches_into_pod_templates() -> None:
    obj = copy.deepcopy(workload_custom_objects("tiny-cpu")[0])
    assert obj["kind"] == "RayService"
    obj["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "imagePullPolcy"
    ] = "x"
    assert "imagePullPolcy" in validate(obj, crds()).report()


def test_int_or_string_and_kubernetes_cel_functions() -> None:
    assert evaluate_rule("self.split('@')[0] in ['al2023']", "al2023@v20260818")
    assert not evaluate_rule('self.find("^([^/]+)").endsWith("karpenter.sh")', "example.com/x")
    obj = copy.deepcopy(workload_custom_objects("tiny-cpu")[0])
    port = obj["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    port.setdefault("readinessProbe", {"httpGet": {"path": "/", "port": "http"}})
    assert validate(obj, crds()).ok
    port["readinessProbe"] = {"httpGet": {"path": "/", "port": 1.5}}
    assert not validate(obj, crds()).ok


def test_scaledobject_variants_pass_the_keda_crd() -> None:
    """The ScaledObject with every optional part llmctl renders (delays, activation) is accepted too,
    and a misspelt field is refused (the check is not vacuous)."""
    base = load_blueprint("llama2-triton-vllm-gpu")
    scaling = {
        **base.scaling.model_dump(),
        "upscale_delay_s": 5,
        "downscale_delay_s": 90,
        "queue_activation": 2,
    }
    bp = base.model_copy(update={"scaling": ScalingSpec.model_validate(scaling)})
    objects = build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token="x"
    )
    [scaled] = [obj for obj in objects if obj["kind"] == "ScaledObject"]
    assert scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    _assert_valid(scaled)
    broken = copy.deepcopy(scaled)
    broken["spec"]["minReplicas"] = 1  # the HPA's spelling, not KEDA's minReplicaCount
    assert not validate(broken, crds()).ok
