from __future__ import annotations

import pytest

from llmctl.blueprints.pools import GPU_TAINT, NEURON_TAINT, POOLS, pool
from llmctl.blueprints.versions import versions
from llmctl.infra.platform.manifests import ec2nodeclass_manifest, nodepool_manifest

KARPENTER_POOLS = [spec for spec in POOLS if spec.managed_by == "karpenter"]
ALIAS = versions().ami["al2023_alias"].value


# Schema and CEL conformance of these objects: tests/conformance/test_crds.py (upstream CRDs).


@pytest.mark.parametrize("spec", KARPENTER_POOLS, ids=lambda s: s.name)
def test_nodepool_carries_the_pool(spec) -> None:  # type: ignore[no-untyped-def]
    template = nodepool_manifest(spec)["spec"]["template"]
    assert template["spec"]["nodeClassRef"]["name"] == spec.name
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    assert requirements["karpenter.k8s.aws/instance-family"] == list(spec.families)
    assert requirements["karpenter.sh/capacity-type"] == list(spec.capacity_types)
    assert template["metadata"]["labels"] == dict(spec.labels)
    manifest = nodepool_manifest(spec)["spec"]
    assert manifest["disruption"] and manifest["limits"]


@pytest.mark.parametrize("spec", KARPENTER_POOLS, ids=lambda s: s.name)
def test_ec2nodeclass_carries_the_pins(spec) -> None:  # type: ignore[no-untyped-def]
    manifest = ec2nodeclass_manifest(spec, cluster_name="c1", node_role="c1-karpenter-node", ami_alias=ALIAS)
    node_class = manifest["spec"]
    assert node_class["role"] == "c1-karpenter-node"
    assert node_class["amiSelectorTerms"][0]["alias"] == ALIAS and not ALIAS.endswith("@latest")
    assert node_class["metadataOptions"]["httpTokens"] == "required"
    assert node_class["subnetSelectorTerms"][0]["tags"] == {"karpenter.sh/discovery": "c1"}
    assert node_class["securityGroupSelectorTerms"][0]["tags"] == {"karpenter.sh/discovery": "c1"}
    root = node_class["blockDeviceMappings"][0]["ebs"]
    assert root["volumeSize"] == f"{spec.root_volume_gib}Gi" and root["encrypted"]


@pytest.mark.parametrize(
    ("name", "taint"),
    [
        ("inferentia-inf2", NEURON_TAINT),
        ("trainium-trn1", NEURON_TAINT),
        ("trainium-trn2", NEURON_TAINT),
        ("gpu-nvidia", GPU_TAINT),
    ],
)
def test_accelerator_pools_are_tainted_and_large(name: str, taint) -> None:  # type: ignore[no-untyped-def]
    spec = nodepool_manifest(pool(name))["spec"]
    assert {"key": taint.key, "effect": "NoSchedule"} in spec["template"]["spec"]["taints"]
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert pool(name).root_volume_gib >= 500


def test_default_pool_is_spot_and_untainted() -> None:
    spec = nodepool_manifest(pool("default"))["spec"]
    assert spec["template"]["spec"]["taints"] == []
    assert "spot" in spec["template"]["spec"]["requirements"][1]["values"]


def test_core_pool_is_not_karpenter() -> None:
    with pytest.raises(ValueError, match="not managed by Karpenter"):
        nodepool_manifest(pool("core"))
