"""Small IAM helpers shared by the platform components (trust policies, managed policy ARNs)."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)


def managed_policy(name: str, partition: str = "aws") -> str:
    """The ARN of an AWS-managed IAM policy."""
    return f"arn:{partition}:iam::aws:policy/{name}"


def service_trust(service: str) -> str:
    """A trust policy letting an AWS service assume the role (EKS Pod Identity also tags sessions)."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if service == POD_IDENTITY_SERVICE else ["sts:AssumeRole"]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
        }
    )


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
            f"{prefix}-{policy}", role=role.name, policy_arn=managed_policy(policy), opts=opts
        )
        for policy in NODE_POLICIES
    ]
    return role, attachments
