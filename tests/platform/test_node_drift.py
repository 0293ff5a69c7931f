"""Karpenter drift of a pool's running nodes (infra/plan/node_drift.py), old against new NodePool and
EC2NodeClass as the platform renders them. The rules are Karpenter's (aws/karpenter-provider-aws at
1d927085dd81a9df9301e613f371dac5b4d16bfe, pkg/apis/v1/ec2nodeclass.go `Hash` and the `hash:"ignore"`
fields, pkg/cloudprovider/drift.go; core sigs.k8s.io/karpenter v1.14.0, pkg/apis/v1/nodepool.go `Hash`,
pkg/controllers/nodeclaim/disruption/drift.go): each case asserts the exact lines."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from llmctl.blueprints.pools import pool
from llmctl.infra.plan.node_drift import PoolDrift, budget_text, drift_lines, pool_drift
from llmctl.infra.platform.manifests import ec2nodeclass_manifest, nodepool_manifest

Obj = dict[str, Any]
ALIAS = "al2023@v20260818"
HOW = "Karpenter drift, within the NodePool's budget of 10% of nodes at a time"


def _pair(name: str, **nodeclass: Any) -> tuple[Obj, Obj]:
    spec = pool(name)
    options = {"cluster_name": "llmctl-dev", "node_role": "llmctl-dev-karpenter-node", "ami_alias": ALIAS}
    return nodepool_manifest(spec), ec2nodeclass_manifest(spec, **{**options, **nodeclass})


def _drift(name: str, change: Callable[[Obj, Obj], None], **nodeclass: Any) -> list[PoolDrift]:
    """The drift of pool `name` when `change(nodepool, nodeclass)` edits a copy of its objects."""
    old = _pair(name, **nodeclass)
    new = copy.deepcopy(old)
    change(*new)
    return pool_drift(list(old), list(new))


def _lines(name: str, change: Callable[[Obj, Obj], None], **nodeclass: Any) -> list[str]:
    return [line for d in _drift(name, change, **nodeclass) for line in d.lines()]


def test_user_data_added_replaces_every_node_of_the_pool() -> None:
    """Issue 53's NodeConfig (containerd's device ownership) on a Neuron pool deployed before it: the
    old EC2NodeClass as rendered then, without userData, against today's render."""
    new = _pair("inferentia-inf2")
    assert "device_ownership_from_security_context" in new[1]["spec"]["userData"]
    old = copy.deepcopy(new)
    del old[1]["spec"]["userData"]
    drifts = pool_drift(list(old), list(new))
    assert drift_lines(drifts, "heading") == [
        "heading",
        f"  pool inferentia-inf2: every node is replaced (EC2NodeClass spec.userData added; {HOW})",
        "  (each replacement node is launched and ready before the drifted node drains; a node running a "
        "pod annotated karpenter.sh/do-not-disrupt (a Ray head) stays until that pod leaves)",
    ]
    assert drifts[0].to_dict()["fields"] == [
        {
            "object": "EC2NodeClass",
            "path": "spec.userData",
            "change": "added",
            "drift": "static",
            "nodes": "every",
            "reason": "NodeClassDrift",
            "detail": "",
        }
    ]


def test_a_larger_root_volume_replaces_every_node_and_names_the_workloads() -> None:
    def larger(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] = "1200Gi"

    drifts = _drift("gpu-nvidia", larger)
    drifts[0].workloads = ["llama3-405b", "llama2-70b-vllm-gpu"]
    assert drifts[0].lines() == [
        f"pool gpu-nvidia: every node is replaced (EC2NodeClass spec.blockDeviceMappings changed; {HOW}); "
        "serving llama3-405b and llama2-70b-vllm-gpu restart"
    ]


def test_tags_are_hashed() -> None:
    def tagged(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["tags"]["team"] = "ml"

    assert _lines("default", tagged) == [
        f"pool default: every node is replaced (EC2NodeClass spec.tags changed; {HOW})"
    ]


def test_a_pinned_ami_alias_that_moves_replaces_every_node_dynamically() -> None:
    def moved(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["amiSelectorTerms"] = [{"alias": "al2023@v20261001"}]

    drifts = _drift("trainium-trn1", moved)
    assert drifts[0].lines() == [
        f"pool trainium-trn1: every node is replaced (EC2NodeClass spec.amiSelectorTerms changed, AMIDrift; {HOW})"
    ]
    assert [(f.rule, f.reason) for f in drifts[0].fields] == [("dynamic", "AMIDrift")]


def test_an_alias_to_latest_replaces_the_nodes_on_another_ami() -> None:
    def latest(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]

    assert _lines("default", latest) == [
        "pool default: nodes whose AMI is not one the new amiSelectorTerms resolve to are replaced "
        f"(EC2NodeClass spec.amiSelectorTerms changed, AMIDrift; {HOW})"
    ]


def test_another_ami_family_is_static_drift() -> None:
    def bottlerocket(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["amiSelectorTerms"] = [{"alias": "bottlerocket@latest"}]

    (field,) = _drift("default", bottlerocket)[0].fields
    assert (field.rule, field.nodes, field.reason, field.detail) == (
        "static",
        "every",
        "NodeClassDrift",
        "AMI family al2023 -> bottlerocket",
    )


def test_resolved_selectors_replace_only_the_nodes_they_no_longer_select() -> None:
    def reselect(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["subnetSelectorTerms"] = [{"tags": {"llmctl:tier": "private"}}]
        nodeclass["spec"]["capacityReservationSelectorTerms"] = [{"id": "cr-0123456789abcdef0"}]

    assert _lines("gpu-nvidia", reselect) == [
        "pool gpu-nvidia: nodes in a capacity reservation the new capacityReservationSelectorTerms no longer "
        f"select are replaced (EC2NodeClass spec.capacityReservationSelectorTerms added, CapacityReservationDrift; {HOW})",
        "pool gpu-nvidia: nodes in a subnet the new subnetSelectorTerms do not select are replaced "
        f"(EC2NodeClass spec.subnetSelectorTerms changed, SubnetDrift; {HOW})",
    ]


def test_ip_prefix_count_replaces_no_node() -> None:
    def prefixes(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["ipPrefixCount"] = 2

    assert _lines("default", prefixes) == [
        "pool default: EC2NodeClass spec.ipPrefixCount added: no node is replaced (outside "
        "EC2NodeClass.Hash() and not resolved per node)"
    ]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("limits", {"cpu": "2000", "nvidia.com/gpu": "128"}),
        (
            "disruption",
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h", "budgets": [{"nodes": "1"}]},
        ),
        ("weight", 10),
    ],
)
def test_behavioural_nodepool_fields_replace_no_node(path: str, value: Any) -> None:
    def change(nodepool: Obj, _nodeclass: Obj) -> None:
        nodepool["spec"][path] = value

    verb = "added" if path == "weight" else "changed"
    assert _lines("gpu-nvidia", change) == [
        f"pool gpu-nvidia: NodePool spec.{path} {verb}: no node is replaced (a behavioural field: "
        "NodePool.Hash() hashes spec.template only)"
    ]


def test_template_labels_and_taints_replace_every_node() -> None:
    def relabel(nodepool: Obj, _nodeclass: Obj) -> None:
        nodepool["spec"]["template"]["metadata"]["labels"]["llmctl.dev/tier"] = "a"
        nodepool["spec"]["template"]["spec"]["taints"].append({"key": "dedicated", "effect": "NoSchedule"})

    drifts = _drift("inferentia-inf2", relabel)
    assert drifts[0].lines() == [
        "pool inferentia-inf2: every node is replaced (NodePool spec.template.metadata.labels changed; "
        f"NodePool spec.template.spec.taints changed; {HOW})"
    ]
    assert {(f.rule, f.reason) for f in drifts[0].fields} == {("static", "NodePoolDrifted")}


def test_requirements_widened_replace_no_node_and_narrowed_replace_the_nodes_they_no_longer_admit() -> None:
    def widened(nodepool: Obj, _nodeclass: Obj) -> None:  # a capacity reservation joins the pool
        nodepool["spec"]["template"]["spec"]["requirements"][1]["values"] = ["reserved", "on-demand"]

    def narrowed(nodepool: Obj, _nodeclass: Obj) -> None:
        nodepool["spec"]["template"]["spec"]["requirements"][0]["values"] = ["c6i", "m6i", "r6i"]

    assert _lines("gpu-nvidia", widened) == [
        "pool gpu-nvidia: NodePool spec.template.spec.requirements changed: no node is replaced (every "
        "running node still satisfies them: values added or requirements removed only)"
    ]
    assert _lines("default", narrowed) == [
        "pool default: nodes whose karpenter.k8s.aws/instance-family is c5 or c7i or m5 or m7i or r5 or r7i "
        "are replaced (NodePool spec.template.spec.requirements changed, RequirementsDrifted; "
        f"{HOW})"
    ]


def test_lists_in_another_order_are_no_change() -> None:
    def reorder(nodepool: Obj, nodeclass: Obj) -> None:
        requirements = nodepool["spec"]["template"]["spec"]["requirements"]
        requirements.reverse()  # hashed as a set (SlicesAsSets)
        requirements[-1]["values"].reverse()
        nodeclass["spec"]["tags"] = dict(reversed(nodeclass["spec"]["tags"].items()))
        nodeclass["spec"]["detailedMonitoring"] = None  # absent and null hash alike (ZeroNil)

    assert _drift("default", reorder) == []


def test_pools_only_one_side_has_are_not_drift() -> None:
    old = [*_pair("default"), *_pair("gpu-nvidia")]
    assert pool_drift(old, list(_pair("default"))) == []
    assert pool_drift(list(_pair("default")), old) == []


@pytest.mark.parametrize(
    ("budgets", "text"),
    [
        (None, "10% of nodes"),
        ([{"nodes": "1"}], "1 node"),
        ([{"nodes": "0", "reasons": ["Underutilized"]}, {"nodes": "2", "reasons": ["Drifted"]}], "2 nodes"),
        ([{"nodes": "20%"}, {"nodes": "3"}], "the smallest of 20% of nodes, 3 nodes"),
        ([{"nodes": "0", "reasons": ["Empty"]}], "any number of nodes (no budget limits drift)"),
    ],
)
def test_the_budgets_that_limit_drift(budgets: list[Obj] | None, text: str) -> None:
    nodepool, _ = _pair("default")
    if budgets is None:
        del nodepool["spec"]["disruption"]["budgets"]
    else:
        nodepool["spec"]["disruption"]["budgets"] = budgets
    assert budget_text(nodepool) == text


def test_some_nodes_replaced_may_restart_the_workloads_serving_there() -> None:
    def on_demand_only(nodepool: Obj, _nodeclass: Obj) -> None:
        nodepool["spec"]["template"]["spec"]["requirements"][1]["values"] = ["on-demand"]

    [drift] = _drift("default", on_demand_only)
    drift.workloads = ["tiny-cpu"]
    assert drift.lines() == [
        "pool default: nodes whose karpenter.sh/capacity-type is spot are replaced (NodePool "
        f"spec.template.spec.requirements changed, RequirementsDrifted; {HOW}); serving tiny-cpu may restart"
    ]


def test_a_termination_grace_period_lets_drift_take_nodes_with_do_not_disrupt_pods() -> None:
    def graced(nodepool: Obj, nodeclass: Obj) -> None:
        nodepool["spec"]["template"]["spec"]["terminationGracePeriod"] = "24h"
        nodeclass["spec"]["userData"] = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"

    drifts = _drift("inferentia-inf2", graced)
    assert drift_lines(drifts, "heading")[-1] == (
        "  (each replacement node is launched and ready before the drifted node drains; with the NodePool's "
        "terminationGracePeriod, nodes with do-not-disrupt pods are taken too)"
    )
    assert drifts[0].to_dict()["do_not_disrupt_blocks"] is False


def test_a_value_the_plan_does_not_know_is_said_so() -> None:
    def unknown_role(_pool: Obj, nodeclass: Obj) -> None:
        nodeclass["spec"]["role"] = "<unknown>"

    [drift] = _drift("default", unknown_role)
    assert (drift.nodes, drift.lines()) == (
        "unknown",
        ["pool default: EC2NodeClass spec.role changed: known only at `up`"],
    )
    assert drift_lines([drift], "heading") == [
        "heading",
        "  pool default: EC2NodeClass spec.role changed: known only at `up`",
    ]


def test_a_placement_group_selector_replaces_every_node_of_the_pool() -> None:
    """placementGroupSelector is hashed (no `hash:"ignore"`, provider pkg/apis/v1/ec2nodeclass.go) and
    also resolved per node: drift.go `isPlacementGroupDrifted` holds each node's
    karpenter.k8s.aws/placement-group-id label to the group the selector resolves to."""
    new = _pair("gpu-nvidia-efa", placement_group="llmctl-dev-gpu-nvidia-efa")
    old = copy.deepcopy(new)
    del old[1]["spec"]["placementGroupSelector"]
    [drift] = pool_drift(list(old), list(new))
    assert drift.lines() == [
        f"pool gpu-nvidia-efa: every node is replaced (EC2NodeClass spec.placementGroupSelector added; {HOW})"
    ]
    [item] = drift.to_dict()["fields"]
    assert (item["drift"], item["nodes"], item["reason"]) == ("static", "every", "NodeClassDrift")
    assert (
        "karpenter.k8s.aws/placement-group-id" in item["detail"] and "PlacementGroupDrift" in item["detail"]
    )
