"""The fields `plan`'s drift rules (infra/plan/node_drift.py) name are the upstream CRDs' fields, and
the budget it assumes when a NodePool sets none is the CRD's default (upstream_manifest.yaml:
aws/karpenter-provider-aws at 1d927085dd81a9df9301e613f371dac5b4d16bfe, pkg/apis/crds)."""

from __future__ import annotations

from typing import Any

from upstream_files import load_yaml, upstream

from llmctl.infra.plan.node_drift import DEFAULT_BUDGET, RESOLVED


def _spec(file: str) -> dict[str, Any]:
    crd = load_yaml(upstream(file))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def test_the_resolved_selectors_and_unhashed_fields_are_ec2nodeclass_fields() -> None:
    fields = set(_spec("karpenter/karpenter.k8s.aws_ec2nodeclasses.yaml")["properties"])
    assert {*RESOLVED, "ipPrefixCount", "amiFamily", "kubelet", "userData", "blockDeviceMappings"} <= fields


def test_the_nodepool_fields_and_the_default_budget() -> None:
    spec = _spec("karpenter/karpenter.sh_nodepools.yaml")
    # outside spec.template (NodePool.Hash hashes the template only): disruption, limits, weight, replicas
    assert set(spec["properties"]) == {"template", "disruption", "limits", "weight", "replicas"}
    template = set(spec["properties"]["template"]["properties"]["spec"]["properties"])
    assert {"requirements", "taints", "startupTaints", "expireAfter", "terminationGracePeriod"} <= template
    assert spec["properties"]["disruption"]["properties"]["budgets"]["default"] == [DEFAULT_BUDGET]
