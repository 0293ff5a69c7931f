"""S3 access for a workload's pods through EKS Pod Identity (no keys stored anywhere).

An IAM role trusted by `pods.eks.amazonaws.com` (only for this cluster, namespace and service account,
from this account), associated with one service account of the workload, and allowed exactly the
prefixes of the cache bucket that `bucket_grants.py` grants it: read the code the CLI uploaded, write
only the workload's own caches. Its ARNs use the account's partition (as the load balancer
controller's policy does) and its taggable resources carry the same `llmctl:stack` and
`llmctl:cluster` tags as the platform's, which the sweep and the leftover check read.
"""

from __future__ import annotations

import json

import pulumi

from llmctl.infra.platform.tags import standard_tags
from llmctl.infra.workload.access.bucket_grants import Grants, s3_statements

WORKLOAD_TAG = "llmctl:workload"


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
        grants: Grants,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:workload:CacheAccess", name, None, opts)
        import pulumi_aws as aws

        from llmctl.infra.platform.iam import (  # lazy: imports pulumi_aws, as the line above
            ServiceAccount,
            pod_role,
        )

        child = pulumi.ResourceOptions(parent=self)
        tags = standard_tags(stack, cluster_name, extra={WORKLOAD_TAG: namespace})
        role = pod_role(f"{name}-role", ServiceAccount(cluster_name, namespace, service_account), tags, child)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition

        policy = partition.apply(
            lambda value: json.dumps(
                {"Version": "2012-10-17", "Statement": s3_statements(value, bucket, grants)}
            )
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
