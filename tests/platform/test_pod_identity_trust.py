"""What a pod can get from AWS (docs/security.md): not the node's credentials (IMDSv2 hop limit 1 on
every node, the VPC CNI's policy on a Pod Identity role of its own instead of the node role), and
only the Pod Identity role of its own service account (every trust policy names the account, the
cluster, the namespace and the service account); managed policies in the account's partition."""

from __future__ import annotations

import json
from typing import Any

from platform_support import Graph

from llmctl.infra.plan.offline import OfflineMocks, run_offline
from llmctl.infra.platform.config import PlatformConfig

NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
ACCOUNT = "123456789012"  # the offline mocks' account
#: every Pod Identity role of the platform: (namespace, service account)
PLATFORM_POD_ROLES = {
    "karpenter-controller-role": ("kube-system", "karpenter"),
    "ingress-lbc-role": ("kube-system", "aws-load-balancer-controller"),
    "cluster-vpc-cni-role": ("kube-system", "aws-node"),
    "cluster-ebs-csi-role": ("kube-system", "ebs-csi-controller-sa"),
    "observability-cloudwatch-role": ("amazon-cloudwatch", "cloudwatch-agent"),
}


def _trust(role: Any) -> dict[str, Any]:
    return json.loads(role.inputs["assumeRolePolicy"])  # type: ignore[no-any-return]


def _pod_roles(graph: Graph) -> dict[str, Any]:
    return {
        r.name: r
        for r in graph.of("aws:iam/role:Role")
        if _trust(r)["Statement"][0]["Principal"].get("Service") == "pods.eks.amazonaws.com"
    }


def test_pods_cannot_reach_the_node_metadata(all_pools_graph: Graph) -> None:
    """Hop limit 1: the IMDSv2 token reply does not survive the hop into a pod's network namespace.
    Karpenter's EC2NodeClass CRD defaults to 1 as well (upstream karpenter.k8s.aws_ec2nodeclasses.yaml)."""
    template = all_pools_graph.named("cluster-core-lt").inputs["metadataOptions"]
    assert template["httpPutResponseHopLimit"] == 1 and template["httpTokens"] == "required"
    classes = all_pools_graph.of(NODECLASS)
    assert classes
    for nodeclass in classes:
        options = nodeclass.inputs["spec"]["metadataOptions"]
        assert options["httpPutResponseHopLimit"] == 1 and options["httpTokens"] == "required", nodeclass.name
    # Karpenter finds its region without the metadata
    env = all_pools_graph.named("karpenter-release").inputs["values"]["controller"]["env"]
    assert {"name": "AWS_REGION", "value": "us-west-2"} in env


def test_the_vpc_cni_has_its_own_role_and_no_node_role_carries_its_policy(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    attachments = graph.of("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    cni = [a for a in attachments if a.inputs["policyArn"].endswith("/AmazonEKS_CNI_Policy")]
    assert [a.name for a in cni] == ["cluster-vpc-cni-policy"]
    [addon] = [r for r in graph.of("aws:eks/addon:Addon") if r.inputs["addonName"] == "vpc-cni"]
    [association] = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "aws-node"
    assert graph.depends(addon, cni[0])
    [agent] = [
        r for r in graph.of("aws:eks/addon:Addon") if r.inputs["addonName"] == "eks-pod-identity-agent"
    ]
    assert graph.depends(addon, agent)  # its credentials come through the agent
    node_roles = [
        r.name for r in graph.of("aws:iam/role:Role") if "ec2.amazonaws.com" in json.dumps(_trust(r))
    ]
    assert node_roles  # the core nodes' and Karpenter's
    for attachment in attachments:
        if attachment.name.startswith(("cluster-core-node-", "karpenter-node-")):
            assert "CNI" not in attachment.inputs["policyArn"], attachment.name


def test_every_pod_identity_role_trusts_one_service_account_of_this_cluster(all_pools_graph: Graph) -> None:
    roles = _pod_roles(all_pools_graph)
    assert sorted(roles) == sorted(PLATFORM_POD_ROLES)  # a new role must be listed (and scoped) here
    for name, (namespace, account) in PLATFORM_POD_ROLES.items():
        [statement] = _trust(roles[name])["Statement"]
        assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
        assert statement["Condition"] == {
            "StringEquals": {
                "aws:SourceAccount": ACCOUNT,
                "aws:RequestTag/eks-cluster-name": "llmctl-dev",
                "aws:RequestTag/kubernetes-namespace": namespace,
                "aws:RequestTag/kubernetes-service-account": account,
            }
        }, name


def test_managed_policy_arns_use_the_accounts_partition() -> None:
    from llmctl.infra.platform.program import build_platform

    config = PlatformConfig.for_blueprints([], all_pools=True)
    graph = Graph(run_offline(lambda: build_platform(config), mocks=OfflineMocks(region="us-gov-west-1")))
    arns = [a.inputs["policyArn"] for a in graph.of("aws:iam/rolePolicyAttachment:RolePolicyAttachment")]
    assert arns and all(arn.startswith("arn:aws-us-gov:iam::aws:policy/") for arn in arns), arns
