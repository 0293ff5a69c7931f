"""Caches: one S3 bucket for the delivered code, model weights and Neuron compiled artifacts:
encrypted, public access blocked, owner-enforced, reachable over TLS only (a bucket policy denies
any request without `aws:SecureTransport`), versioned (an overwritten or deleted object can be
restored) with noncurrent versions expired after `NONCURRENT_DAYS`. The bucket has no role of its
own: each workload stack makes the Pod Identity roles of its service accounts, granted only their
own prefixes (llmctl.infra.workload.access.bucket_grants)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.iam import policy_document
from llmctl.infra.platform.tags import tags_for

# S3 takes a bucket prefix of at most 37 lowercase characters (the provider adds a unique suffix).
_MAX_BUCKET_PREFIX = 37
_BUCKET_SUFFIX = "-cache-"


def bucket_prefix(cluster_name: str) -> str:
    """The cache bucket's name prefix: the cluster name lowercased (bucket names are lowercase,
    cluster names need not be), shortened so that the prefix stays within S3's 37 characters."""
    base = cluster_name.lower()[: _MAX_BUCKET_PREFIX - len(_BUCKET_SUFFIX)].rstrip("-")
    return f"{base}{_BUCKET_SUFFIX}"


#: days a replaced or deleted object's old version is kept (to restore one), then expired
NONCURRENT_DAYS = 30
#: days an unfinished multipart upload (an interrupted mirror or compile-cache upload) is kept
ABORT_UPLOADS_DAYS = 7


def tls_only_statements(bucket_arn: str) -> list[dict[str, Any]]:
    """Deny every request to the bucket or its objects that does not come over TLS."""
    return [
        {
            "Sid": "TLSOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ]


class Cache(pulumi.ComponentResource):
    """The cache bucket and the rules on it."""

    bucket: aws.s3.Bucket

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
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(lambda arn: policy_document(tls_only_statements(arn))),
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=self.bucket.id,
            versioning_configuration={"status": "Enabled"},
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=self.bucket.id,
            rules=[
                {
                    "id": "expire-noncurrent-versions",
                    "status": "Enabled",
                    "filter": {"prefix": ""},
                    "noncurrent_version_expiration": {"noncurrent_days": NONCURRENT_DAYS},
                    "abort_incomplete_multipart_upload": {"days_after_initiation": ABORT_UPLOADS_DAYS},
                }
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        self.register_outputs({"bucket": self.bucket.bucket})
