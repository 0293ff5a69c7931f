"""S3 access for the serving pods through EKS Pod Identity (no keys stored anywhere).

An IAM role trusted by `pods.eks.amazonaws.com`, allowed to read and write the platform's cache
bucket (weights mirror and Neuron compile cache), associated with the workload's
`llmctl-serving` service account.
"""

from __future__ import annotations

import json

import pulumi


class CacheAccess(pulumi.ComponentResource):
    """Pod Identity role + association giving one namespace's service account the cache bucket."""

    role_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        namespace: str,
        service_account: str,
        bucket: str,
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
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=json.dumps(trust),
            tags={"llmctl.dev/workload": namespace, "llmctl.dev/cluster": cluster_name},
            opts=child,
        )
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{bucket}"]},
                {
                    "Effect": "Allow",
                    "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                    "Resource": [f"arn:aws:s3:::{bucket}/*"],
                },
            ],
        }
        aws.iam.RolePolicy(f"{name}-s3", role=role.id, policy=json.dumps(policy), opts=child)
        aws.eks.PodIdentityAssociation(
            f"{name}-association",
            cluster_name=cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.arn,
            opts=child,
        )
        self.role_arn = role.arn
        self.register_outputs({"role_arn": role.arn})
