"""Karpenter: controller IAM (EKS Pod Identity), node role with an EC2_LINUX access entry, the
SQS interruption queue and its EventBridge rules, and the controller's Helm release."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from llmctl.blueprints.allocatable import karpenter_model
from llmctl.infra.platform.charts import CORE_NODE_SELECTOR, release
from llmctl.infra.platform.cluster import Cluster
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.iam import ServiceAccount, pod_role, policy_document
from llmctl.infra.platform.iam import node_role as iam_node_role
from llmctl.infra.platform.tags import tags_for

NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"
# EventBridge events Karpenter reacts to: (rule suffix, source, detail-type).
INTERRUPTION_EVENTS = (
    ("health", "aws.health", "AWS Health Event"),
    ("spot", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("state-change", "aws.ec2", "EC2 Instance State-change Notification"),
    ("capacity-reservation", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
)


def queue_name_prefix(cluster_name: str) -> str:
    """The interruption queue's name prefix. The provider appends a unique 26-character suffix, so a
    queue made right after a `down` gets a new name: SQS refuses to reuse a deleted queue's name for
    60 s (QueueDeletedRecently). Cluster names have at most 38 characters: the name fits SQS's 80."""
    return f"{cluster_name}-karpenter-"


def node_role_name(cluster_name: str) -> str:
    """The IAM role of Karpenter's nodes (a plain name: the EC2NodeClasses refer to it)."""
    return f"{cluster_name}-karpenter-node"


def controller_statements(
    *, cluster: str, region: str, account: str, partition: str, queue_arn: str, node_role_arn: str
) -> list[dict[str, Any]]:
    """The controller's permissions, scoped to instances and profiles tagged for this cluster."""
    ec2 = f"arn:{partition}:ec2:{region}"
    cluster_arn = f"arn:{partition}:eks:{region}:{account}:cluster/{cluster}"
    owned = {
        f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": cluster,
    }
    owned_resource = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    # What RunInstances/CreateFleet/CreateLaunchTemplate create (and tag on creation) for a node.
    launched = [
        f"{ec2}:*:{kind}/*"
        for kind in (
            "fleet",
            "instance",
            "volume",
            "network-interface",
            "launch-template",
            "spot-instances-request",
        )
    ]
    profile_tags = {
        f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned",
        "aws:ResourceTag/topology.kubernetes.io/region": region,
    }
    return [
        {
            "Sid": "LaunchFromSharedResources",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                f"{ec2}::image/*",
                f"{ec2}::snapshot/*",
                f"{ec2}:*:security-group/*",
                f"{ec2}:*:subnet/*",
                f"{ec2}:*:capacity-reservation/*",
                f"{ec2}:*:placement-group/*",
            ],
        },
        {
            "Sid": "LaunchFromOwnLaunchTemplates",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": f"{ec2}:*:launch-template/*",
            "Condition": {
                "StringEquals": owned_resource,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "LaunchTaggedForCluster",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": launched,
            "Condition": {"StringEquals": owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}},
        },
        {
            "Sid": "TagOnCreate",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": launched,
            "Condition": {
                "StringEquals": {
                    **owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "TagOwnInstances",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:*:instance/*",
            "Condition": {
                "StringEquals": owned_resource,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        },
        {
            "Sid": "DeleteOwn",
            "Effect": "Allow",
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Condition": {
                "StringEquals": owned_resource,
                "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
            },
        },
        {
            "Sid": "ReadRegion",
            "Effect": "Allow",
            "Action": [
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            "Sid": "ReadAmiParameters",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
        },
        {"Sid": "ReadPrices", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
        {
            "Sid": "InterruptionQueue",
            "Effect": "Allow",
            "Action": [
                "sqs:DeleteMessage",
                "sqs:GetQueueUrl",
                "sqs:GetQueueAttributes",
                "sqs:ReceiveMessage",
            ],
            "Resource": queue_arn,
        },
        {
            "Sid": "PassNodeRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": node_role_arn,
            "Condition": {
                "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
            },
        },
        {
            "Sid": "CreateInstanceProfiles",
            "Effect": "Allow",
            "Action": ["iam:CreateInstanceProfile"],
            "Resource": f"arn:{partition}:iam::{account}:instance-profile/*",
            "Condition": {
                "StringEquals": {**owned, "aws:RequestTag/topology.kubernetes.io/region": region},
                "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "ManageOwnInstanceProfiles",
            "Effect": "Allow",
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Resource": f"arn:{partition}:iam::{account}:instance-profile/*",
            "Condition": {
                "StringEquals": profile_tags,
                "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
            },
        },
        {
            "Sid": "TagOwnInstanceProfiles",
            "Effect": "Allow",
            "Action": "iam:TagInstanceProfile",
            "Resource": f"arn:{partition}:iam::{account}:instance-profile/*",
            "Condition": {
                "StringEquals": {
                    **profile_tags,
                    **owned,
                    "aws:RequestTag/topology.kubernetes.io/region": region,
                },
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                },
            },
        },
        {
            "Sid": "ListInstanceProfiles",
            "Effect": "Allow",
            "Action": "iam:ListInstanceProfiles",
            "Resource": "*",
        },
        {
            "Sid": "ReadInstanceProfiles",
            "Effect": "Allow",
            "Action": "iam:GetInstanceProfile",
            "Resource": f"arn:{partition}:iam::{account}:instance-profile/*",
        },
        {
            "Sid": "DiscoverEndpoint",
            "Effect": "Allow",
            "Action": "eks:DescribeCluster",
            "Resource": cluster_arn,
        },
        {
            "Sid": "ReadZonalShift",
            "Effect": "Allow",
            "Action": "arc-zonal-shift:GetManagedResource",
            "Resource": "*",
            "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
        },
    ]


def controller_settings(cluster_name: str, queue_name: object) -> dict[str, Any]:
    """The chart's `settings`: the cluster, the interruption queue, and the values llmctl's allocatable
    arithmetic assumes (VM memory overhead, reserved ENIs; `blueprints/data/karpenter.yaml`), so the
    controller and `llmctl validate` size nodes alike. Reserved capacity (ODCRs, capacity blocks) is on."""

    model = karpenter_model().controller
    return {
        "clusterName": cluster_name,
        "interruptionQueue": queue_name,
        "vmMemoryOverheadPercent": model.vm_memory_overhead_percent,
        "reservedENIs": str(model.reserved_enis),
        "featureGates": {"reservedCapacity": model.reserved_capacity_gate},
    }


class Karpenter(pulumi.ComponentResource):
    """The Karpenter controller and the AWS resources it works with."""

    release: pulumi.Resource
    node_role_name: str
    queue_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        cluster: Cluster,
        *,
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:platform:Karpenter", name, None, opts)
        tags = tags_for(config)
        child = pulumi.ResourceOptions(parent=self)
        after_cluster = pulumi.ResourceOptions(parent=self, depends_on=[cluster.eks_cluster])
        self.node_role_name = node_role_name(config.cluster_name)

        node_role, node_policies = iam_node_role(
            f"{name}-node", tags=tags, opts=child, role_name=self.node_role_name
        )
        node_access = aws.eks.AccessEntry(
            f"{name}-node-access",
            cluster_name=config.cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=after_cluster,
        )

        queue = aws.sqs.Queue(
            f"{name}-interruption",
            name_prefix=queue_name_prefix(config.cluster_name),
            message_retention_seconds=300,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        # The real name (known after create) goes to the controller; the rules and IAM use the ARN.
        self.queue_name = queue.name
        queue_policy = aws.sqs.QueuePolicy(
            f"{name}-interruption-policy",
            queue_url=queue.url,
            policy=queue.arn.apply(
                lambda arn: policy_document(
                    [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                            "Action": "sqs:SendMessage",
                            "Resource": arn,
                        },
                        {
                            "Sid": "DenyHTTP",
                            "Effect": "Deny",
                            "Principal": "*",
                            "Action": "sqs:*",
                            "Resource": arn,
                            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                        },
                    ]
                )
            ),
            opts=child,
        )
        rules: list[pulumi.Resource] = []
        for suffix, source, detail_type in INTERRUPTION_EVENTS:
            rule = aws.cloudwatch.EventRule(
                f"{name}-{suffix}",
                description=f"Karpenter interruption events ({detail_type}) for {config.cluster_name}",
                event_pattern=json.dumps({"source": [source], "detail-type": [detail_type]}),
                tags=tags,
                opts=child,
            )
            target = aws.cloudwatch.EventTarget(
                f"{name}-{suffix}-target",
                rule=rule.name,
                arn=queue.arn,
                target_id="karpenter-interruption-queue",
                opts=child,
            )
            rules += [rule, target]

        caller = aws.get_caller_identity(opts=pulumi.InvokeOptions(parent=self))
        partition = aws.get_partition(opts=pulumi.InvokeOptions(parent=self)).partition
        who = ServiceAccount(config.cluster_name, NAMESPACE, SERVICE_ACCOUNT)
        controller_role = pod_role(
            f"{name}-controller-role", who, tags, child, f"{config.cluster_name}-karpenter"
        )
        controller_policy = aws.iam.RolePolicy(
            f"{name}-controller-policy",
            role=controller_role.id,
            policy=pulumi.Output.all(queue.arn, node_role.arn).apply(
                lambda arns: policy_document(
                    controller_statements(
                        cluster=config.cluster_name,
                        region=config.region,
                        account=caller.account_id,
                        partition=partition,
                        queue_arn=arns[0],
                        node_role_arn=arns[1],
                    )
                )
            ),
            opts=child,
        )
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=config.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=controller_role.arn,
            tags=tags,
            opts=after_cluster,
        )
        # Helm installs a chart's crds/ only once and never upgrades them; the karpenter-crd chart
        # (same version) keeps the NodePool/EC2NodeClass CRDs in step with the controller.
        crds = release(
            f"{name}-crd",
            "karpenter_crd",
            namespace=NAMESPACE,
            values={},
            opts=after_cluster,
        )
        self.release = release(
            f"{name}-release",
            "karpenter",
            namespace=NAMESPACE,
            skip_crds=True,
            values={
                "settings": controller_settings(config.cluster_name, self.queue_name),
                "serviceAccount": {"name": SERVICE_ACCOUNT},
                "nodeSelector": CORE_NODE_SELECTOR,
                "controller": {
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                    # the region without the instance metadata, which pods cannot reach (hop limit 1)
                    "env": [{"name": "AWS_REGION", "value": config.region}],
                },
            },
            # The controller's IAM, queue and node role must exist before it starts and outlive it
            # on destroy (it deletes instances with them).
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[
                    *cluster.ready,
                    *after,
                    crds,
                    identity,
                    controller_policy,
                    queue_policy,
                    node_access,
                    *node_policies,
                    *rules,
                ],
            ),
        )
        self.register_outputs({"node_role_name": self.node_role_name, "queue_name": self.queue_name})
