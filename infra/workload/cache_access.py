"""S3 access for the serving pods through EKS Pod Identity (no keys stored anywhere).

An IAM role trusted by `pods.eks.amazonaws.com`, allowed to read and write the platform's cache
bucket (weights mirror and Neuron compile cache), associated with the workload's
`llmctl-serving` service account; the same component with `read_prefix` gives a service account read
access to one key prefix only (the Gradio UI's `llmctl-ui` and its lock's wheelhouse). Its ARNs use the account's partition (as the load balancer
controller's policy does) and its taggable resources carry the same `llmctl:stack` and
`llmctl:cluster` tags as the platform's, which the sweep and the leftover check read.
"""

from __future__ import annotations

import json

import pulumi

from llmctl.infra.platform.tags import standard_tags

WORKLOAD_TAG = "llmctl:workload"


def s3_statements(partition: str, bucket: str) -> list[dict[str, object]]:
    """Read and write the cache bucket, in the account's ARN partition."""
    arn = f"arn:{partition}:s3:::{bucket}"
    return [
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [arn]},
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Resource": [f"{arn}/*"],
        },
    ]


def read_statements(partition: str, bucket: str, prefix: str) -> list[dict[str, object]]:
    """List and read the objects under one key prefix of the cache bucket, nothing else."""
    arn = f"arn:{partition}:s3:::{bucket}"
    return [
        {
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [arn],
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*"]}},
        },
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [f"{arn}/{prefix}/*"]},
    ]


class CacheAccess(pulumi.ComponentResource):
    """Pod Identity role + association giving one namespace's service account the cache bucket."""

    role_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        stack: str,
        namespace: str,
        service_account: str,
        bucket: str,
        read_prefix: str | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:workload:CacheAccess", name, None, opts)
        import pulumi_aws as aws

        child = pulumi.ResourceOptions(parent=self)
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
        tags = standard_tags(stack, cluster_name, extra={WORKLOAD_TAG: namespace})
        role = aws.iam.Role(f"{name}-role", assume_role_policy=json.dumps(trust), tags=tags, opts=child)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        def statements(value: str) -> list[dict[str, object]]:
            if read_prefix is not None:
                return read_statements(value, bucket, read_prefix)
            return s3_statements(value, bucket)

        policy = partition.apply(
            lambda value: json.dumps({"Version": "2012-10-17", "Statement": statements(value)})
        )
        aws.iam.RolePolicy(f"{name}-s3", role=role.id, policy=policy, opts=child)
        aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.arn,
            tags=tags,
            opts=child,
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": role.arn})
