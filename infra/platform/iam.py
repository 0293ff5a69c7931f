"""Small IAM helpers shared by the platform components (trust policies, managed policy ARNs)."""

from __future__ import annotations

import json
from typing import NamedTuple

import pulumi
import pulumi_aws as aws

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
#: what every node role carries. Not AmazonEKS_CNI_Policy: the VPC CNI (`aws-node`) gets its own Pod
#: Identity role (cluster.py), so a pod that reached the node's credentials could not rewire the network
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
#: the VPC CNI's managed policy, on the `aws-node` service account's Pod Identity role
CNI_POLICY = "AmazonEKS_CNI_Policy"
#: the session tags EKS Pod Identity sets when it assumes a role (EKS user guide, pod-id-abac: "List of
#: session tags added by EKS Pod Identity"), matched in each role's trust policy
_POD_TAGS = ("eks-cluster-name", "kubernetes-namespace", "kubernetes-service-account")


def managed_policy(name: str, partition: str = "aws") -> str:
    """The ARN of an AWS-managed IAM policy."""
    return f"arn:{partition}:iam::aws:policy/{name}"


def managed_policy_output(name: str, parent: pulumi.Resource | None) -> pulumi.Output[str]:
    """The ARN of an AWS-managed IAM policy in the account's partition (aws, aws-us-gov, aws-cn)."""
    partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent)).partition
    return partition.apply(lambda value: managed_policy(name, value))


def service_trust(service: str) -> str:
    """A trust policy letting an AWS service assume the role (EKS Pod Identity also tags sessions)."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if service == POD_IDENTITY_SERVICE else ["sts:AssumeRole"]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
        }
    )


def pod_identity_trust(account: str, cluster: str, namespace: str, service_account: str) -> str:
    """A trust policy for EKS Pod Identity that only one service account of one cluster of this account
    can use: `aws:SourceAccount` and the request tags Pod Identity sets (cluster, namespace, service
    account). Without them any Pod Identity association in the account could name the role."""
    values = (cluster, namespace, service_account)
    condition = {
        "aws:SourceAccount": account,
        **{f"aws:RequestTag/{k}": v for k, v in zip(_POD_TAGS, values, strict=True)},
    }
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": POD_IDENTITY_SERVICE},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {"StringEquals": condition},
                }
            ],
        }
    )


class ServiceAccount(NamedTuple):
    """One Kubernetes service account of one cluster: who may assume a Pod Identity role."""

    cluster: str
    namespace: str
    name: str


def pod_role(
    name: str,
    who: ServiceAccount,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    role_name: str | None = None,
) -> aws.iam.Role:
    """An IAM role only `who` can assume through EKS Pod Identity."""
    account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=opts.parent)).account_id
    trust = account.apply(lambda a: pod_identity_trust(a, who.cluster, who.namespace, who.name))
    return aws.iam.Role(name, name=role_name, assume_role_policy=trust, tags=tags, opts=opts)


def policy_document(statements: list[dict[str, object]]) -> str:
    """A policy document as JSON."""
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def principal_for_access_entry(arn: str) -> str:
    """The IAM principal behind a caller ARN: an assumed-role session maps to its role.

    Role paths are not part of an STS ARN; a role with a path must be given explicitly
    (`admin_principal_arns`).
    """
    if ":assumed-role/" in arn:
        prefix, _, rest = arn.partition(":assumed-role/")
        partition_account = prefix.replace(":sts:", ":iam:")
        return f"{partition_account}:role/{rest.split('/')[0]}"
    return arn


def node_role(
    prefix: str, *, tags: dict[str, str], opts: pulumi.ResourceOptions, role_name: str | None = None
) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """An EC2 node role (`<prefix>-role`) with the managed policies every EKS node needs."""
    role = aws.iam.Role(
        f"{prefix}-role",
        name=role_name,
        assume_role_policy=service_trust("ec2.amazonaws.com"),
        tags=tags,
        opts=opts,
    )
    attachments = [
        aws.iam.RolePolicyAttachment(
            f"{prefix}-{policy}",
            role=role.name,
            policy_arn=managed_policy_output(policy, opts.parent),
            opts=opts,
        )
        for policy in NODE_POLICIES
    ]
    return role, attachments
