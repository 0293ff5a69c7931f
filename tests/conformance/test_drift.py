"""The drift found by reading upstream's files (issue 13), one test each; each failed before its fix."""

from __future__ import annotations

import json

from conformance_objects import ALL_POOLS, platform_resources
from upstream_files import cloudformation, load_yaml, upstream

from llmctl.blueprints.versions import versions
from llmctl.infra.plan.offline import run_offline
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.ingress import controller_statements as lbc_statements
from llmctl.infra.platform.karpenter import INTERRUPTION_EVENTS
from llmctl.infra.platform.karpenter import controller_statements as karpenter_statements
from llmctl.infra.platform.network import ELB_TAG, INTERNAL_ELB_TAG, MANAGED_TAGS_PREFIX
from llmctl.infra.platform.neuron import kube_scheduler_tag, neuron_values

KARPENTER = karpenter_statements(
    cluster="c1",
    region="us-west-2",
    account="123456789012",
    partition="aws",
    queue_arn="q",
    node_role_arn="r",
)


def _granted(statements: list[dict[str, object]]) -> set[str]:
    found: set[str] = set()
    for statement in statements:
        actions = statement["Action"]
        found.update([actions] if isinstance(actions, str) else actions)  # type: ignore[arg-type]
    return found


def test_karpenter_policy_has_the_actions_upstream_grants() -> None:
    assert {
        "iam:ListInstanceProfiles",
        "ec2:DescribeInstanceStatus",
        "ec2:DescribePlacementGroups",
        "arc-zonal-shift:GetManagedResource",
    } <= _granted(KARPENTER)


def test_karpenter_may_launch_into_placement_groups() -> None:
    shared = next(s for s in KARPENTER if s.get("Sid") == "LaunchFromSharedResources")
    assert "arn:aws:ec2:us-west-2:*:placement-group/*" in shared["Resource"]
    assert set(shared["Action"]) == {"ec2:RunInstances", "ec2:CreateFleet"}


def test_karpenter_has_every_upstream_interruption_rule() -> None:
    template = cloudformation(upstream("karpenter/cloudformation.yaml"))["Resources"]
    upstream_rules = {
        (r["Properties"]["EventPattern"]["source"][0], r["Properties"]["EventPattern"]["detail-type"][0])
        for r in template.values()
        if r["Type"] == "AWS::Events::Rule"
    }
    assert len(upstream_rules) == 5
    assert {(source, detail) for _, source, detail in INTERRUPTION_EVENTS} == upstream_rules
    rules = [r for r in platform_resources(ALL_POOLS) if r.type == "aws:cloudwatch/eventRule:EventRule"]
    patterns = [json.loads(r.inputs["eventPattern"]) for r in rules]
    assert {(p["source"][0], p["detail-type"][0]) for p in patterns} == upstream_rules


def test_neuron_custom_scheduler_follows_the_cluster_minor() -> None:
    chart_values = load_yaml(upstream("neuron-helm-chart/values.yaml"))
    default_tag = chart_values["scheduler"]["customScheduler"]["image"]["tag"]
    assert default_tag.startswith("v1.28.")  # the chart default the issue found
    minor = versions().eks.kubernetes_version.value
    release = next(r for r in platform_resources(ALL_POOLS) if r.name == "neuron-release")
    tag = release.inputs["values"]["scheduler"]["customScheduler"]["image"]["tag"]
    assert tag == kube_scheduler_tag(minor) and tag.startswith(f"v{minor}.")
    assert f"eks-{minor.replace('.', '-')}" in tag
    assert neuron_values(f"{minor}.4")["scheduler"]["customScheduler"]["image"]["tag"] == tag  # type: ignore[index]


def test_unpinned_minor_with_neuron_pools_is_refused_before_any_cloud_call() -> None:
    import pytest

    from llmctl.errors import BlueprintError

    with pytest.raises(BlueprintError, match="kube-scheduler"):
        kube_scheduler_tag("1.20")
    with pytest.raises(BlueprintError) as refused:
        PlatformConfig.for_blueprints([], all_pools=True, kubernetes_version="1.20")
    assert "Neuron custom scheduler" in str(refused.value.problems)
    # without a Neuron pool the scheduler is not installed, so no pin is needed
    assert PlatformConfig(kubernetes_version="1.20").kubernetes_version == "1.20"


def test_existing_vpc_subnets_get_load_balancer_role_tags() -> None:
    from llmctl.infra.platform.program import build_platform

    config = PlatformConfig.for_blueprints(
        [],
        vpc={
            "existing_vpc_id": "vpc-1",
            "private_subnet_ids": ["subnet-p1", "subnet-p2"],
            "public_subnet_ids": ["subnet-u1"],
        },
    )
    tags = [r.inputs for r in run_offline(lambda: build_platform(config)) if r.type == "aws:ec2/tag:Tag"]
    by_key: dict[str, set[str]] = {}
    for tag in tags:
        by_key.setdefault(tag["key"], set()).add(tag["resourceId"])
        if not tag["key"].startswith(MANAGED_TAGS_PREFIX):  # the marker lists the keys it added
            assert tag["value"] in ("1", config.cluster_name)
    assert by_key[INTERNAL_ELB_TAG] == {"subnet-p1", "subnet-p2"}
    assert by_key[ELB_TAG] == {"subnet-u1"}


def test_lb_controller_policy_uses_the_accounts_partition() -> None:
    text = json.dumps(lbc_statements("aws-us-gov"))
    assert "arn:aws:" not in text and "arn:aws-us-gov:elasticloadbalancing:" in text
    policy = next(r for r in platform_resources(ALL_POOLS) if r.name == "ingress-lbc-policy")
    assert "arn:aws:elasticloadbalancing:" in policy.inputs["policy"]  # the mocks' partition is aws
