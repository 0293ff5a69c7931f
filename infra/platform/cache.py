"""Caches: one S3 bucket for model weights and Neuron compiled artifacts (encrypted, public
access blocked, owner-enforced), and a Pod Identity role serving pods use to read it (and to
write compiled artifacts under `neuron-cache/`). Workload stacks associate their service
account with the exported role."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.iam import POD_IDENTITY_SERVICE, policy_document, service_trust
from llmctl.infra.platform.tags import tags_for
from llmctl.serving.compile_cache import COMPILE_PREFIX

# S3 takes a bucket prefix of at most 37 lowercase characters (the provider adds a unique suffix).
_MAX_BUCKET_PREFIX = 37
_BUCKET_SUFFIX = "-cache-"


def bucket_prefix(cluster_name: str) -> str:
    """The cache bucket's name prefix: the cluster name lowercased (bucket names are lowercase,
    cluster names need not be), shortened so that the prefix stays within S3's 37 characters."""
    base = cluster_name.lower()[: _MAX_BUCKET_PREFIX - len(_BUCKET_SUFFIX)].rstrip("-")
    return f"{base}{_BUCKET_SUFFIX}"


def reader_statements(bucket_arn: str) -> list[dict[str, Any]]:
    """Read the whole bucket; write only compiled artifacts."""
    return [
        {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"], "Resource": bucket_arn},
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": f"{bucket_arn}/*"},
        {
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:AbortMultipartUpload"],
            "Resource": f"{bucket_arn}/{COMPILE_PREFIX}*",
        },
    ]


class Cache(pulumi.ComponentResource):
    """The cache bucket and its reader role."""

    bucket: aws.s3.Bucket
    reader_role: aws.iam.Role

    def __init__(self, name: str, config: PlatformConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("llmctl:platform:Cache", name, None, opts)
        tags = tags_for(config)
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket_prefix=bucket_prefix(config.cluster_name),
            force_destroy=config.cache_force_destroy,
            tags=tags,
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access-block",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=self.bucket.id,
            rules=[
                {
                    "apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"},
                    "bucket_key_enabled": True,
                }
            ],
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=self.bucket.id,
            rule={"object_ownership": "BucketOwnerEnforced"},
            opts=child,
        )
        self.reader_role = aws.iam.Role(
            f"{name}-reader-role",
            name=f"{config.cluster_name}-cache-reader",
            assume_role_policy=service_trust(POD_IDENTITY_SERVICE),
            tags=tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-reader-policy",
            role=self.reader_role.id,
            policy=self.bucket.arn.apply(lambda arn: policy_document(reader_statements(arn))),
            opts=child,
        )
        self.register_outputs({"bucket": self.bucket.bucket, "reader_role_arn": self.reader_role.arn})
