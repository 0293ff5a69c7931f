"""The EC2NodeClass of the pool of replicas over several nodes, with its `placementGroupSelector`, passes
the upstream CRD (karpenter.k8s.aws_ec2nodeclasses.yaml, chart 1.14.1: its schema and CEL rules
"expected at least one ... ['name', 'id']" and "'name' and 'id' are mutually exclusive")."""

from __future__ import annotations

import copy

from crd_validation import load_crds, validate
from upstream_files import upstream

from llmctl.blueprints.pools import GPU_EFA_POOL, pool
from llmctl.infra.platform.manifests import ec2nodeclass_manifest


def _node_class() -> dict:  # type: ignore[type-arg]
    return ec2nodeclass_manifest(
        pool(GPU_EFA_POOL),
        cluster_name="llmctl-dev",
        node_role="llmctl-dev-karpenter-node",
        ami_alias="al2023@v20260818",
        placement_group="llmctl-dev-gpu-nvidia-efa",
    )


def test_the_efa_pools_node_class_with_its_selector_passes_and_both_keys_are_refused() -> None:
    crds = load_crds(upstream("karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml"))
    good = _node_class()
    assert good["spec"]["placementGroupSelector"] == {"name": "llmctl-dev-gpu-nvidia-efa"}
    result = validate(good, crds)
    assert result.ok, result.report()
    both = copy.deepcopy(good)
    both["spec"]["placementGroupSelector"]["id"] = "pg-0123456789abcdef0"
    assert not validate(both, crds).ok
    empty = copy.deepcopy(good)
    empty["spec"]["placementGroupSelector"] = {}
    assert not validate(empty, crds).ok
