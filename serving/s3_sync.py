"""Copy a directory to and from an S3 prefix, with a marker object that says "complete".

The one S3 code path of the serving pods, used by the model mirror (:mod:`.model_mirror`) and the
Neuron compiled-artifact cache (:mod:`.compile_cache`). A prefix counts as complete only when its
marker object exists: :func:`upload_dir` writes it after every other file, and
:func:`download_prefix` fills a temporary directory that is renamed into place once its own local
marker is written, so neither side ever sees half a copy. boto3 is imported here only, and only
when a copy is made; it reads credentials the usual way (EKS Pod Identity in the cluster) and
honours ``AWS_ENDPOINT_URL``. botocore's errors become :class:`ServingError` at this edge.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from llmctl.errors import ServingError
from llmctl.serving.common.deps import require

_INSTALL = "pip install boto3 (the llmctl serving images include it)"
_POD_IDENTITY = (
    "in the cluster the pod's service account gets them through EKS Pod Identity "
    "(llmctl-serving); elsewhere set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
)


def parse_s3_uri(uri: str, *, variable: str, expected: str) -> tuple[str, str]:
    """(bucket, key prefix without slashes at the ends) of ``s3://bucket/prefix``.

    ``variable`` names where the URI came from and ``expected`` shows its usual value; both go into
    the error of a malformed URI.
    """
    if not uri.startswith("s3://") or not uri[5:].split("/", 1)[0]:
        raise ServingError(
            f"{variable}={uri!r} is not an s3://bucket/prefix URI", f"the workload sets it to {expected}"
        )
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


def is_folder_placeholder(key: str, size: int) -> bool:
    """Whether an object is a "folder": a zero-byte key ending in ``/``, which the S3 console (and some
    tools) create for each folder. It is not a file; a key ending in ``/`` that holds bytes is not one."""
    return key.endswith("/") and size == 0


def local_path(folder: Path, bucket: str, prefix: str, key: str) -> Path:
    """Where the object ``key`` (under ``prefix/``) lands in ``folder``; refused when the key is not
    under the prefix or its path, once resolved (``..``, an absolute part, a link), leaves ``folder``:
    a key is data another writer chose, never a path to trust."""
    relative = key[len(prefix) + 1 :] if key.startswith(prefix + "/") else ""
    root = folder.resolve()
    path = (root / relative).resolve() if relative else root
    if not relative or path == root or not path.is_relative_to(root):
        raise ServingError(
            f"refusing the object s3://{bucket}/{key}: its local path would be outside {folder}",
            f"delete that object (aws s3 rm 's3://{bucket}/{key}'); only keys below s3://{bucket}/{prefix}/ "
            "with plain relative paths are downloaded",
        )
    return path


class S3:
    """An S3 client plus botocore's exception module, made from the current environment."""

    def __init__(self, purpose: str) -> None:
        boto3 = require("boto3", install=_INSTALL, purpose=purpose)
        self.errors: Any = require("botocore.exceptions", install=_INSTALL, purpose=purpose)
        self.client: Any = boto3.session.Session().client("s3")  # a fresh session reads the env

    def keys(self, bucket: str, prefix: str) -> list[str]:
        """Every object key under ``prefix/``."""
        found: list[str] = []
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        for page in pages:
            found.extend(item["Key"] for item in page.get("Contents", []))
        return found

    def sizes(self, bucket: str, prefix: str) -> dict[str, int]:
        """Every object key under ``prefix/`` with its size in bytes."""
        found: dict[str, int] = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        for page in pages:
            found.update({item["Key"]: int(item["Size"]) for item in page.get("Contents", [])})
        return found

    def files(self, bucket: str, prefix: str) -> list[str]:
        """Every object key under ``prefix/`` but the folder placeholders (:func:`is_folder_placeholder`)."""
        return [
            key for key, size in self.sizes(bucket, prefix).items() if not is_folder_placeholder(key, size)
        ]

    def has(self, bucket: str, key: str) -> bool:
        """Whether the object ``key`` exists."""
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
        return any(item["Key"] == key for item in listed.get("Contents", []))

    def download_prefix(
        self,
        bucket: str,
        prefix: str,
        keys: list[str],
        target: Path,
        marker: str,
        check: Callable[[Path], None] | None = None,
    ) -> None:
        """Download ``keys`` (all under ``prefix/``) into ``target`` atomically; the local marker last.

        The files land in a temporary sibling directory that replaces ``target`` once complete (and,
        with ``check``, once ``check(folder)`` returned), so an interrupted or refused download leaves
        nothing that looks finished. When another process finished the same copy first, its copy is
        kept.
        """
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            for key in keys:
                relative = key[len(prefix) + 1 :]
                if not relative or relative.endswith("/") or relative == marker:
                    continue
                path = local_path(tmp, bucket, prefix, key)
                path.parent.mkdir(parents=True, exist_ok=True)
                self.client.download_file(bucket, key, str(path))
            if check is not None:
                check(tmp)
            (tmp / marker).write_text(f"s3://{bucket}/{prefix}\n")
            if not (target / marker).is_file():
                shutil.rmtree(target, ignore_errors=True)
                tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def upload_dir(
        self, source: Path, bucket: str, prefix: str, marker: str, marker_body: bytes = b"ok\n"
    ) -> int:
        """Upload every file under ``source`` to ``prefix/``, then the marker object; the file count."""
        count = 0
        for root, _dirs, files in os.walk(source):
            for name in sorted(files):
                path = Path(root) / name
                relative = path.relative_to(source).as_posix()
                if relative == marker:
                    continue
                self.client.upload_file(str(path), bucket, f"{prefix}/{relative}")
                count += 1
        self.client.put_object(Bucket=bucket, Key=f"{prefix}/{marker}", Body=marker_body)
        return count


@contextmanager
def s3_errors(uri: str, what: str, access_hint: str) -> Iterator[None]:
    """Turn botocore's errors while touching ``uri`` into ServingErrors (``what``: e.g. "read the model mirror")."""
    exceptions = require("botocore.exceptions", install=_INSTALL, purpose=what)
    try:
        yield
    except exceptions.NoCredentialsError:
        raise ServingError(f"no AWS credentials to {what} {uri}", _POD_IDENTITY) from None
    except (exceptions.BotoCoreError, exceptions.ClientError) as error:
        raise ServingError(f"could not {what} {uri}: {error}", access_hint) from None
