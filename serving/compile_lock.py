"""One writer per compile-cache key: a lock object created with an S3 conditional write.

:meth:`S3Lock.acquire` puts ``<key>.lock`` with ``If-None-Match: *``: S3 creates the object for
exactly one caller and answers every other one ``412 Precondition Failed``. A lock older than
``stale_s`` (its holder died mid-compile) is taken over with ``If-Match: <its ETag>``, which again
succeeds for one caller only (each body names its owner and time, so every lock has its own
ETag). :meth:`S3Lock.release` deletes the lock when it is still the caller's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DEFAULT_STALE_S = 3600.0  # longer than Ray Serve LLM lets an engine start (RAYLLM_ENGINE_START_TIMEOUT_S)


def _precondition_failed(error: Any) -> bool:
    response = getattr(error, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


@dataclass
class LockHolder:
    """Who holds a lock, and since when (unix seconds)."""

    owner: str
    since: float
    etag: str


@dataclass
class S3Lock:
    """The lock object ``s3://bucket/key`` of one compile-cache key; ``client`` is a boto3 S3 client."""

    client: Any
    errors: Any  # botocore.exceptions
    bucket: str
    key: str
    owner: str
    stale_s: float = DEFAULT_STALE_S
    clock: Callable[[], float] = field(default=time.time)
    _etag: str | None = None

    def _body(self) -> bytes:
        return json.dumps({"owner": self.owner, "since": self.clock()}).encode()

    def holder(self) -> LockHolder | None:
        """The current holder, or None when nobody holds the lock."""
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.errors.ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        try:
            data = json.loads(got["Body"].read())
            owner, since = str(data["owner"]), float(data["since"])
        except (ValueError, KeyError, TypeError):
            owner, since = "unreadable lock", 0.0  # treated as stale
        return LockHolder(owner, since, str(got["ETag"]))

    def acquire(self) -> bool:
        """Take the lock (or a stale one); False while someone else holds a live one."""
        try:
            put = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(), IfNoneMatch="*")
        except self.errors.ClientError as error:
            if not _precondition_failed(error):
                raise
        else:
            self._etag = str(put["ETag"])
            return True
        held = self.holder()
        if held is None:
            return self.acquire_once()
        if self.clock() - held.since < self.stale_s:
            return False
        try:  # take over a stale lock: only one of several callers can replace that exact version
            put = self.client.put_object(
                Bucket=self.bucket, Key=self.key, Body=self._body(), IfMatch=held.etag
            )
        except self.errors.ClientError as error:
            if _precondition_failed(error) or error.response.get("Error", {}).get("Code") == "NoSuchKey":
                return False
            raise
        self._etag = str(put["ETag"])
        return True

    def acquire_once(self) -> bool:
        """One more create attempt (the lock vanished between the failed create and the read)."""
        try:
            put = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self._body(), IfNoneMatch="*")
        except self.errors.ClientError as error:
            if _precondition_failed(error):
                return False
            raise
        self._etag = str(put["ETag"])
        return True

    @property
    def held(self) -> bool:
        """Whether this caller holds the lock."""
        return self._etag is not None

    def release(self) -> None:
        """Delete the lock if it is still this caller's (a takeover after a stall leaves it alone)."""
        if self._etag is None:
            return
        held = self.holder()
        if held is not None and held.etag == self._etag:
            self.client.delete_object(Bucket=self.bucket, Key=self.key)
        self._etag = None
