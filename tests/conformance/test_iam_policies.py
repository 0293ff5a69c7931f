"""Our Karpenter and load balancer controller policies against upstream's, statement by statement:
every upstream action granted, no upstream condition dropped, no extra action, unless
tests/conformance/data/policy_differences.yaml lists it with a reason."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from iam_compare import Findings, compare, karpenter_upstream_statements
from upstream_files import DATA, load_yaml, upstream

from llmctl.infra.platform.ingress import controller_statements as lbc_statements
from llmctl.infra.platform.karpenter import controller_statements as karpenter_statements

ACCOUNT, REGION, CLUSTER = "123456789012", "us-west-2", "c1"
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/{CLUSTER}-karpenter-node"
QUEUE = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{CLUSTER}"
DIFFERENCES = load_yaml(DATA / "policy_differences.yaml")


def _karpenter_upstream() -> list[dict[str, Any]]:
    values = {
        "AWS::Partition": "aws",
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        "ClusterName": CLUSTER,
        "KarpenterNodeRole.Arn": NODE_ROLE,
        "KarpenterInterruptionQueue.Arn": QUEUE,
    }
    return karpenter_upstream_statements(upstream("karpenter/cloudformation.yaml"), values)


def _karpenter_ours() -> list[dict[str, Any]]:
    return karpenter_statements(
        cluster=CLUSTER,
        region=REGION,
        account=ACCOUNT,
        partition="aws",
        queue_arn=QUEUE,
        node_role_arn=NODE_ROLE,
    )


def _lbc_upstream() -> list[dict[str, Any]]:
    return list(json.loads(upstream("aws-load-balancer-controller/iam_policy.json").read_text())["Statement"])


POLICIES = {
    "karpenter": (_karpenter_upstream, _karpenter_ours),
    "aws_load_balancer_controller": (_lbc_upstream, lambda: lbc_statements("aws")),
}


def _listed(findings: Findings) -> dict[str, set[str]]:
    return {
        "not_granted": set(findings.not_granted),
        "dropped_conditions": {
            f"{action} | {condition}" for action, condition in findings.dropped_conditions
        },
        "extra_actions": set(findings.extra_actions),
    }


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_policy_matches_upstream_or_says_why(policy: str) -> None:
    upstream_statements, ours = POLICIES[policy]
    wanted = upstream_statements()
    assert len(wanted) >= 10  # the upstream document was read, not an empty file
    found = _listed(compare(wanted, ours()))
    recorded = DIFFERENCES[policy]
    for kind, differences in found.items():
        reasons = recorded[kind] or {}
        unexplained = sorted(differences - set(reasons))
        assert not unexplained, f"{policy}: {kind} without a reason in policy_differences.yaml: {unexplained}"
        stale = sorted(set(reasons) - differences)
        assert not stale, (
            f"{policy}: policy_differences.yaml lists {kind} that are no longer different: {stale}"
        )
        assert all(str(reason).strip() for reason in reasons.values())


def test_comparison_finds_a_missing_action_and_a_dropped_condition() -> None:
    upstream_statements = _karpenter_upstream()
    ours = _karpenter_ours()
    without = [s for s in copy.deepcopy(ours) if s.get("Sid") != "ReadZonalShift"]
    assert "arc-zonal-shift:GetManagedResource" in compare(upstream_statements, without).not_granted
    loose = copy.deepcopy(ours)
    delete = next(s for s in loose if s.get("Sid") == "DeleteOwn")
    del delete["Condition"]["StringLike"]
    dropped = compare(upstream_statements, loose).dropped_conditions
    assert ("ec2:TerminateInstances", "StringLike:aws:ResourceTag/karpenter.sh/nodepool") in dropped
    wider = copy.deepcopy(ours)
    wider.append({"Effect": "Allow", "Action": "ec2:DeleteVolume", "Resource": "*"})
    assert compare(upstream_statements, wider).extra_actions == {
        "ec2:DeleteVolume",
        "ec2:DescribeAvailabilityZones",
        "sqs:GetQueueAttributes",
    }
