"""The S3 model mirror seen from a serving pod: ``LLMCTL_MODEL_URI`` synced once to a local dir.

The workload's `model-mirror` Job copies a Hugging Face snapshot to
``s3://<bucket>/models/<model id>/<revision>/`` and writes ``.llmctl-complete`` last; the serving
pods get that URI as ``LLMCTL_MODEL_URI``. :func:`sync_model` downloads every object under it into
``$LLMCTL_MODEL_CACHE/<bucket>/<prefix>`` (default ``/tmp/llmctl-models``) through a temporary
directory renamed into place, so a second call (or a second replica in the same pod) loads from
disk without touching S3. boto3 is imported only here, and only when a mirror is in use; it reads
credentials the usual way (EKS Pod Identity in the cluster) and honours ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmctl.errors import ServingError
from llmctl.serving.common.deps import require

MODEL_URI_ENV = "LLMCTL_MODEL_URI"
MODEL_CACHE_ENV = "LLMCTL_MODEL_CACHE"
DEFAULT_MODEL_CACHE = "/tmp/llmctl-models"
COMPLETE_MARKER = ".llmctl-complete"  # written last by the mirror Job, and by a finished local sync


def mirror_uri() -> str | None:
    """The mirror this pod should load from (``$LLMCTL_MODEL_URI``), or None."""
    value = os.environ.get(MODEL_URI_ENV, "").strip()
    return value or None


def mirrored_or(default: str, *, on_progress: Callable[[str], None] | None = None) -> str:
    """The synced mirror directory when ``LLMCTL_MODEL_URI`` is set, else ``default`` (e.g. a hub id)."""
    uri = mirror_uri()
    return sync_model(uri, on_progress=on_progress) if uri else default


def split_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key prefix without a trailing slash) of an ``s3://bucket/prefix`` URI."""
    if not uri.startswith("s3://") or not uri[5:].split("/", 1)[0]:
        raise ServingError(
            f"{MODEL_URI_ENV}={uri!r} is not an s3://bucket/prefix URI",
            "the workload sets it to s3://<cache bucket>/models/<model id>/<revision>",
        )
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def _download(s3: Any, bucket: str, prefix: str, keys: list[str], target: Path) -> None:
    for key in keys:
        relative = key[len(prefix) + 1 :]
        if not relative or relative.endswith("/") or relative == COMPLETE_MARKER:
            continue
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(path))
    (target / COMPLETE_MARKER).write_text(f"s3://{bucket}/{prefix}\n")


def sync_model(
    uri: str, cache_dir: str | None = None, *, on_progress: Callable[[str], None] | None = None
) -> str:
    """The local copy of the mirror at ``uri``, downloaded on the first call."""
    bucket, prefix = split_s3_uri(uri)
    root = Path(cache_dir or os.environ.get(MODEL_CACHE_ENV) or DEFAULT_MODEL_CACHE)
    target = root / bucket / prefix
    if (target / COMPLETE_MARKER).is_file():
        return str(target)
    install = "pip install boto3 (the llmctl serving images include it)"
    boto3 = require("boto3", install=install, purpose="the S3 model mirror")
    exceptions = require("botocore.exceptions", install=install, purpose="the S3 model mirror")
    try:
        s3 = boto3.session.Session().client("s3")  # a fresh session reads the current environment
        keys = _keys(s3, bucket, prefix)
        if f"{prefix}/{COMPLETE_MARKER}" not in keys:
            raise ServingError(
                f"the model mirror {uri} is incomplete ({len(keys)} object(s), no {COMPLETE_MARKER} marker)",
                "wait for the workload's `model-mirror` Job to finish (kubectl -n <ns> logs job/model-mirror)",
            )
        if on_progress:
            on_progress(f"downloading {len(keys) - 1} file(s) from {uri}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            _download(s3, bucket, prefix, keys, tmp)
            if not (target / COMPLETE_MARKER).is_file():  # another replica may have finished first
                shutil.rmtree(target, ignore_errors=True)
                tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except exceptions.NoCredentialsError:
        raise ServingError(
            f"no AWS credentials to read the model mirror {uri}",
            "in the cluster the pod's service account gets them through EKS Pod Identity "
            "(llmctl-serving); elsewhere set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
        ) from None
    except (exceptions.BotoCoreError, exceptions.ClientError) as error:
        raise ServingError(
            f"could not read the model mirror {uri}: {error}",
            "check that the bucket exists and that the pod's role may s3:ListBucket and s3:GetObject on it",
        ) from None
    return str(target)
