"""What a real `pulumi up` checks but Pulumi's mocks do not: nested input keys known to the installed
SDKs, values AWS accepts, IAM the controllers need, and the order in which things start and go."""

from __future__ import annotations

import copy
import json
from typing import Any

from platform_support import Graph, graph_for, unknown_nested_keys

from llmctl.infra.platform.cache import bucket_prefix
from llmctl.infra.platform.charts import CORE_NODE_SELECTOR
from llmctl.infra.platform.config import PlatformConfig


def _statements(graph: Graph, name: str) -> list[dict[str, Any]]:
    return list(json.loads(graph.named(name).inputs["policy"])["Statement"])


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _resources(statement: dict[str, Any]) -> list[str]:
    resource = statement["Resource"]
    return [resource] if isinstance(resource, str) else list(resource)


def test_nested_input_keys_are_known_to_the_sdk(all_pools_graph: Graph) -> None:
    checked = [r for r in all_pools_graph.resources if r.type.startswith(("aws:", "eks:"))]
    assert len(checked) > 40
    assert {r.name: unknown_nested_keys(r) for r in checked if unknown_nested_keys(r)} == {}


def test_nested_key_check_catches_a_snake_case_key(all_pools_graph: Graph) -> None:
    template = copy.deepcopy(all_pools_graph.named("cluster-core-lt"))
    template.inputs["metadataOptions"]["http_put_response_hop_limit"] = 2
    assert unknown_nested_keys(template) == ["metadataOptions.http_put_response_hop_limit"]


def test_no_second_access_entry_for_the_cluster_creator(all_pools_graph: Graph) -> None:
    # pulumi-eks sets bootstrapClusterCreatorAdminPermissions; an explicit entry for the caller
    # (arn:aws:iam::123456789012:user/llmctl under the mocks) would fail with a 409.
    cluster = all_pools_graph.of("eks:index:Cluster")[0].inputs
    assert cluster["authenticationMode"] == "API"
    assert not cluster.get("accessEntries")


def test_configured_admins_get_access_entries() -> None:
    config = PlatformConfig.for_blueprints(
        [],
        admin_principal_arns=[
            "arn:aws:sts::123456789012:assumed-role/Admins/alice",
            "arn:aws:iam::123456789012:role/Admins",
            "arn:aws:iam::123456789012:user/bob",
        ],
    )
    entries = Graph(graph_for(config)).of("eks:index:Cluster")[0].inputs["accessEntries"]
    assert [entries[key]["principalArn"] for key in sorted(entries)] == [
        "arn:aws:iam::123456789012:role/Admins",
        "arn:aws:iam::123456789012:user/bob",
    ]
    for entry in entries.values():
        policy = entry["accessPolicies"]["cluster-admin"]
        assert policy["policyArn"].endswith("AmazonEKSClusterAdminPolicy")
        assert policy["accessScope"] == {"type": "cluster"}


def test_karpenter_tags_spot_requests_and_launches_only_from_its_templates(all_pools_graph: Graph) -> None:
    statements = _statements(all_pools_graph, "karpenter-controller-policy")
    spot = "arn:aws:ec2:us-west-2:*:spot-instances-request/*"
    template = "arn:aws:ec2:us-west-2:*:launch-template/*"
    tag_on_create = next(s for s in statements if s.get("Sid") == "TagOnCreate")
    assert spot in _resources(tag_on_create)
    assert (
        tag_on_create["Condition"]["StringEquals"]["aws:RequestTag/kubernetes.io/cluster/llmctl-dev"]
        == "owned"
    )
    unconditioned_launch = [
        s for s in statements if "ec2:RunInstances" in _actions(s) and "Condition" not in s
    ]
    assert unconditioned_launch and all(template not in _resources(s) for s in unconditioned_launch)
    own_templates = next(s for s in statements if s.get("Sid") == "LaunchFromOwnLaunchTemplates")
    assert _resources(own_templates) == [template]
    assert own_templates["Condition"]["StringEquals"] == {
        "aws:ResourceTag/kubernetes.io/cluster/llmctl-dev": "owned"
    }


def test_lb_controller_may_open_the_node_security_group(all_pools_graph: Graph) -> None:
    # The controller adds rules to the EKS cluster security group, which it did not create and
    # which carries no elbv2.k8s.aws/cluster tag.
    statements = _statements(all_pools_graph, "ingress-lbc-policy")
    unconditioned = {
        action for s in statements if "Condition" not in s and s["Resource"] == "*" for action in _actions(s)
    }
    assert {"ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"} <= unconditioned
    tagged_delete = next(s for s in statements if "ec2:DeleteSecurityGroup" in _actions(s))
    assert tagged_delete["Condition"] == {"Null": {"aws:ResourceTag/elbv2.k8s.aws/cluster": "false"}}


def test_cache_bucket_prefix_is_lowercase_and_short_enough() -> None:
    assert bucket_prefix("llmctl-dev") == "llmctl-dev-cache-"
    long_name = "Team-ML-Inference-Platform-Production1"
    assert len(long_name) == 38
    prefix = bucket_prefix(long_name)
    assert len(prefix) <= 37 and prefix == prefix.lower() and prefix.endswith("-cache-")
    assert "--" not in bucket_prefix("abcdefghijklmnopqrstuvwxyz012-3456")
    config = PlatformConfig.for_blueprints([], cluster_name=long_name)
    assert Graph(graph_for(config)).named("cache-bucket").inputs["bucketPrefix"] == prefix


def test_service_creating_charts_wait_for_the_lb_controller_webhook(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    lbc = graph.named("ingress-lbc")
    for name in ("karpenter-release", "neuron-release", "nvidia-release", "kuberay-release"):
        assert graph.depends(graph.named(name), lbc), name
    assert not graph.depends(lbc, graph.named("karpenter-release"))


def test_neuron_custom_scheduler_runs_on_core_nodes(all_pools_graph: Graph) -> None:
    scheduler = all_pools_graph.named("neuron-release").inputs["values"]["scheduler"]
    assert scheduler["nodeSelector"] == CORE_NODE_SELECTOR
    custom = scheduler["customScheduler"]
    assert custom["enabled"] is True and custom["nodeSelector"] == CORE_NODE_SELECTOR


def test_karpenter_crds_come_from_the_crd_chart(all_pools_graph: Graph, exports) -> None:  # type: ignore[no-untyped-def]
    graph = all_pools_graph
    crds = graph.named("karpenter-crd").inputs
    controller = graph.named("karpenter-release")
    assert crds["chart"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert crds["version"] == controller.inputs["version"]  # CRDs and controller in lockstep
    assert controller.inputs["skipCrds"] is True and graph.depends(controller, graph.named("karpenter-crd"))
    assert "skipCrds" not in graph.named("kuberay-release").inputs
    out = exports(PlatformConfig.for_blueprints([]))
    assert out["versions"]["charts"]["karpenter_crd"] == crds["version"]
