from __future__ import annotations

import pytest

from llmctl.blueprints.versions import versions
from llmctl.infra.platform.crd_models import EC2NodeClass, NodePool
from llmctl.infra.platform.manifests import ec2nodeclass_manifest, nodepool_manifest
from llmctl.infra.pools import GPU_TAINT, NEURON_TAINT, POOLS, pool

KARPENTER_POOLS = [spec for spec in POOLS if spec.managed_by == "karpenter"]
ALIAS = versions().ami["al2023_alias"].value


@pytest.mark.parametrize("spec", KARPENTER_POOLS, ids=lambda s: s.name)
def test_nodepool_validates_against_model(spec) -> None:  # type: ignore[no-untyped-def]
    model = NodePool.model_validate(nodepool_manifest(spec))
    template = model.spec.template
    assert template.spec.node_class_ref.name == spec.name
    families = next(r for r in template.spec.requirements if r.key == "karpenter.k8s.aws/instance-family")
    assert families.values == list(spec.families)
    capacity = next(r for r in template.spec.requirements if r.key == "karpenter.sh/capacity-type")
    assert capacity.values == list(spec.capacity_types)
    assert template.metadata.labels == {k: v for k, v in spec.labels.items()}
    assert model.spec.disruption is not None and model.spec.limits


@pytest.mark.parametrize("spec", KARPENTER_POOLS, ids=lambda s: s.name)
def test_ec2nodeclass_validates_against_model(spec) -> None:  # type: ignore[no-untyped-def]
    manifest = ec2nodeclass_manifest(spec, cluster_name="c1", node_role="c1-karpenter-node", ami_alias=ALIAS)
    model = EC2NodeClass.model_validate(manifest)
    assert model.spec.role == "c1-karpenter-node"
    assert model.spec.ami_selector_terms[0].alias == ALIAS and not ALIAS.endswith("@latest")
    assert model.spec.metadata_options is not None and model.spec.metadata_options.http_tokens == "required"
    assert model.spec.subnet_selector_terms[0].tags == {"karpenter.sh/discovery": "c1"}
    assert model.spec.security_group_selector_terms[0].tags == {"karpenter.sh/discovery": "c1"}
    root = model.spec.block_device_mappings[0].ebs
    assert root.volume_size == f"{spec.root_volume_gib}Gi" and root.encrypted


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


def test_models_reject_misspelt_fields() -> None:
    manifest = nodepool_manifest(pool("default"))
    manifest["spec"]["disruption"]["consolidateAftr"] = "1m"
    with pytest.raises(ValueError, match="consolidateAftr"):
        NodePool.model_validate(manifest)
    bad_alias = ec2nodeclass_manifest(
        pool("default"), cluster_name="c", node_role="r", ami_alias="al2023-latest"
    )
    with pytest.raises(ValueError, match="not an AMI alias"):
        EC2NodeClass.model_validate(bad_alias)
