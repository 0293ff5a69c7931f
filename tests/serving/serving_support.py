"""Helpers of the serving tests."""

from __future__ import annotations

from pathlib import Path


def mirror_model(model: Path, uri: str, *, complete: bool = True) -> None:
    """Upload a model directory to ``uri`` as the workload's mirror Job does (marker last)."""
    import boto3

    from llmctl.serving.model_mirror import COMPLETE_MARKER, split_s3_uri

    bucket, prefix = split_s3_uri(uri)
    s3 = boto3.client("s3")
    if bucket not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for path in sorted(model.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(model)}")
    if complete:
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{COMPLETE_MARKER}", Body=b"ok")
