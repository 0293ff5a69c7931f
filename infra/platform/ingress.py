"""Ingress: the AWS Load Balancer Controller (IAM through Pod Identity) and an ingress class for
internal exposure. Its IAM outlives the load balancers it deletes: the release depends on it."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import (
    IngressClass,
    IngressClassParametersReferenceArgs,
    IngressClassSpecArgs,
)

from llmctl.infra.platform.charts import CORE_NODE_SELECTOR, release
from llmctl.infra.platform.cluster import Cluster
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.iam import ServiceAccount, pod_role, policy_document
from llmctl.infra.platform.network import Network
from llmctl.infra.platform.tags import tags_for

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "aws-load-balancer-controller"
INTERNAL_CLASS = "alb-internal"
CLUSTER_TAG = "elbv2.k8s.aws/cluster"

_READ = [
    "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInternetGateways", "ec2:DescribeVpcs", "ec2:DescribeVpcPeeringConnections",
    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
    "ec2:DescribeNetworkInterfaces", "ec2:DescribeTags", "ec2:DescribeRouteTables",
    "ec2:GetCoipPoolUsage", "ec2:DescribeCoipPools", "ec2:GetSecurityGroupsForVpc", "ec2:DescribeIpamPools",
    "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeLoadBalancerAttributes",
    "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeListenerCertificates",
    "elasticloadbalancing:DescribeListenerAttributes", "elasticloadbalancing:DescribeSSLPolicies",
    "elasticloadbalancing:DescribeRules", "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetGroupAttributes", "elasticloadbalancing:DescribeTargetHealth",
    "elasticloadbalancing:DescribeTags", "elasticloadbalancing:DescribeTrustStores",
    "elasticloadbalancing:DescribeCapacityReservation",
    "cognito-idp:DescribeUserPoolClient", "acm:ListCertificates", "acm:DescribeCertificate",
    "iam:ListServerCertificates", "iam:GetServerCertificate",
    "waf-regional:GetWebACL", "waf-regional:GetWebACLForResource", "waf-regional:AssociateWebACL",
    "waf-regional:DisassociateWebACL", "wafv2:GetWebACL", "wafv2:GetWebACLForResource",
    "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL", "shield:GetSubscriptionState",
    "shield:DescribeProtection", "shield:CreateProtection", "shield:DeleteProtection",
]  # fmt: skip
_OWNED_ELB = [
    "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
    "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
    "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
    "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
    "elasticloadbalancing:ModifyListenerAttributes", "elasticloadbalancing:ModifyCapacityReservation",
    "elasticloadbalancing:ModifyIpPools",
]  # fmt: skip


def controller_statements(partition: str) -> list[dict[str, Any]]:
    """The controller's permissions: reads, plus writes limited to objects tagged elbv2.k8s.aws/cluster.

    `partition`: the account's ARN partition (`aws`, `aws-cn`, `aws-us-gov`)."""
    arn = f"arn:{partition}"
    tagged_request = {"Null": {f"aws:RequestTag/{CLUSTER_TAG}": "false"}}
    tagged_resource = {"Null": {f"aws:ResourceTag/{CLUSTER_TAG}": "false"}}
    elb_arns = [
        f"{arn}:elasticloadbalancing:*:*:targetgroup/*/*",
        f"{arn}:elasticloadbalancing:*:*:loadbalancer/net/*/*",
        f"{arn}:elasticloadbalancing:*:*:loadbalancer/app/*/*",
    ]
    return [
        {
            "Effect": "Allow",
            "Action": "iam:CreateServiceLinkedRole",
            "Resource": "*",
            "Condition": {"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}},
        },
        {"Effect": "Allow", "Action": _READ, "Resource": "*"},
        # Opens the nodes' (EKS cluster) security group to the load balancer's security group: that
        # group is not the controller's, so this cannot be limited to the elbv2.k8s.aws/cluster tag.
        {
            "Effect": "Allow",
            "Action": ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
            "Resource": "*",
        },
        {"Effect": "Allow", "Action": ["ec2:CreateSecurityGroup"], "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{arn}:ec2:*:*:security-group/*",
            "Condition": {"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, **tagged_request},
        },
        {
            "Effect": "Allow",
            "Action": ["ec2:CreateTags", "ec2:DeleteTags"],
            "Resource": f"{arn}:ec2:*:*:security-group/*",
            "Condition": {
                "Null": {f"aws:RequestTag/{CLUSTER_TAG}": "true", f"aws:ResourceTag/{CLUSTER_TAG}": "false"}
            },
        },
        {
            "Effect": "Allow",
            "Action": [
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupIngress",
                "ec2:DeleteSecurityGroup",
            ],
            "Resource": "*",
            "Condition": tagged_resource,
        },
        {
            "Effect": "Allow",
            "Action": ["elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
            "Resource": "*",
            "Condition": tagged_request,
        },
        {
            "Effect": "Allow",
            "Action": [
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:CreateRule",
                "elasticloadbalancing:DeleteRule",
            ],
            "Resource": "*",
        },
        {
            "Effect": "Allow",
            "Action": ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            "Resource": elb_arns,
            "Condition": {
                "Null": {f"aws:RequestTag/{CLUSTER_TAG}": "true", f"aws:ResourceTag/{CLUSTER_TAG}": "false"}
            },
        },
        {
            "Effect": "Allow",
            "Action": ["elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            "Resource": [
                f"{arn}:elasticloadbalancing:*:*:listener/net/*/*/*",
                f"{arn}:elasticloadbalancing:*:*:listener/app/*/*/*",
                f"{arn}:elasticloadbalancing:*:*:listener-rule/net/*/*/*",
                f"{arn}:elasticloadbalancing:*:*:listener-rule/app/*/*/*",
            ],
        },
        {
            "Effect": "Allow",
            "Action": "elasticloadbalancing:AddTags",
            "Resource": elb_arns,
            "Condition": {
                "StringEquals": {
                    "elasticloadbalancing:CreateAction": ["CreateTargetGroup", "CreateLoadBalancer"]
                },
                **tagged_request,
            },
        },
        {"Effect": "Allow", "Action": _OWNED_ELB, "Resource": "*", "Condition": tagged_resource},
        {
            "Effect": "Allow",
            "Action": ["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
            "Resource": f"{arn}:elasticloadbalancing:*:*:targetgroup/*/*",
        },
        {
            "Effect": "Allow",
            "Action": [
                "elasticloadbalancing:SetWebAcl",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:AddListenerCertificates",
                "elasticloadbalancing:RemoveListenerCertificates",
                "elasticloadbalancing:ModifyRule",
                "elasticloadbalancing:SetRulePriorities",
            ],
            "Resource": "*",
        },
    ]


class Ingress(pulumi.ComponentResource):
    """The AWS Load Balancer Controller and the internal ingress class."""

    release: pulumi.Resource
    ingress_class: str

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        cluster: Cluster,
        network: Network,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:platform:Ingress", name, None, opts)
        tags = tags_for(config)
        child = pulumi.ResourceOptions(parent=self)
        who = ServiceAccount(config.cluster_name, NAMESPACE, SERVICE_ACCOUNT)
        role = pod_role(f"{name}-lbc-role", who, tags, child)
        policy = aws.iam.RolePolicy(
            f"{name}-lbc-policy",
            role=role.id,
            policy=aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition.apply(
                lambda partition: policy_document(controller_statements(partition))
            ),
            opts=child,
        )
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-lbc-pod-identity",
            cluster_name=config.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.eks_cluster]),
        )
        self.release = release(
            f"{name}-lbc",
            "aws_load_balancer_controller",
            namespace=NAMESPACE,
            values={
                "clusterName": config.cluster_name,
                "region": config.region,
                "vpcId": network.vpc_id,
                "serviceAccount": {"name": SERVICE_ACCOUNT},
                "nodeSelector": CORE_NODE_SELECTOR,
                "defaultTags": tags,
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*cluster.ready, identity, policy]),
        )
        after_controller = pulumi.ResourceOptions(parent=self, depends_on=[self.release])
        params = CustomResource(
            f"{name}-internal-params",
            api_version="elbv2.k8s.aws/v1beta1",
            kind="IngressClassParams",
            metadata={"name": INTERNAL_CLASS},
            spec={"scheme": "internal", "tags": [{"key": k, "value": v} for k, v in tags.items()]},
            opts=after_controller,
        )
        self.ingress_class = INTERNAL_CLASS
        IngressClass(
            f"{name}-internal-class",
            metadata=ObjectMetaArgs(name=INTERNAL_CLASS),
            spec=IngressClassSpecArgs(
                controller="ingress.k8s.aws/alb",
                parameters=IngressClassParametersReferenceArgs(
                    api_group="elbv2.k8s.aws", kind="IngressClassParams", name=INTERNAL_CLASS
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.release, params]),
        )
        self.register_outputs({"ingress_class": INTERNAL_CLASS})
