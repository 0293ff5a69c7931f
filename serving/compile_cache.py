"""Neuron compiled artifacts: saved once, shared through S3, loaded before ``to_neuron()``.

Used by both transformers-neuronx runtimes, the Ray Serve engine (serving/ray_neuronx) and the
TorchServe handler, through :func:`compile_or_load`:

1. a complete local copy (``<dir>/.llmctl-compiled``) is loaded with ``model.load(dir)``;
2. else, when ``$LLMCTL_COMPILE_CACHE_URL`` (``s3://<bucket>/neuron-cache/<blueprint>``) is set and
   ``<url>/<key>/.llmctl-compiled`` exists, the prefix is downloaded to the local dir and loaded;
3. ``model.to_neuron()`` (compiles with neuronx-cc unless something was loaded);
4. after a compile, ``model.save(dir)`` then the local marker, then the dir is uploaded to
   ``<url>/<key>/`` with the marker object written last, by the one replica that holds the key's
   ``<url>/<key>.lock`` (:mod:`.compile_lock`). A prefix without it (an upload cut short) is never
   downloaded.

``<key>`` (:class:`CompileKey`) names everything that changes the compiled graphs: model id and
revision, tp degree, amp, batch size, n_positions, the context-length buckets and the Neuron SDK.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.serving.s3_sync import S3, parse_s3_uri, s3_errors

COMPILE_CACHE_URL_ENV = "LLMCTL_COMPILE_CACHE_URL"
# Where compiled artifacts live in the platform's cache bucket (its IAM grants writes under it).
COMPILE_PREFIX = "neuron-cache/"
COMPILED_MARKER = ".llmctl-compiled"
_EXPECTED = "s3://<cache bucket>/neuron-cache/<blueprint>"


def slug(text: str) -> str:
    """``text`` lowercased with runs of anything but ``a-z0-9._-`` turned into one ``-``."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class CompileKey:
    """Everything that changes the graphs transformers-neuronx compiles."""

    model_id: str
    revision: str
    tp_degree: int
    amp: str
    batch_size: int
    n_positions: int
    context_length_estimate: tuple[int, ...]
    neuron_sdk: str | None

    @property
    def name(self) -> str:
        """The folder / S3 prefix name of this configuration: readable, then a digest of the exact
        fields, since `slug` maps different ids to one name (`org-a/model` and `org/a-model`, case)
        and two configurations must never share compiled graphs."""
        buckets = "_".join(str(size) for size in self.context_length_estimate) or "default"
        exact = json.dumps(dataclasses.astuple(self), separators=(",", ":"))
        return (
            f"{slug(self.model_id)}@{slug(self.revision)}-tp{self.tp_degree}-{self.amp}-b{self.batch_size}"
            f"-n{self.n_positions}-ctx{buckets}-sdk{self.neuron_sdk or 'unknown'}"
            f"-{hashlib.sha256(exact.encode()).hexdigest()[:10]}"
        )


def compile_cache_url(explicit: str | None = None) -> str | None:
    """The S3 base URL of the shared cache: ``explicit``, else ``$LLMCTL_COMPILE_CACHE_URL``, else None."""
    value = (explicit or os.environ.get(COMPILE_CACHE_URL_ENV, "")).strip()
    if not value:
        return None
    parse_s3_uri(value, variable=COMPILE_CACHE_URL_ENV, expected=_EXPECTED)  # malformed: fail at start
    return value.rstrip("/")


def has_compiled(artifacts_dir: Path) -> bool:
    """Whether ``model.save()`` finished writing compiled artifacts there (the marker is written last)."""
    return (artifacts_dir / COMPILED_MARKER).is_file()


def save_compiled(artifacts_dir: Path, save: Callable[[str], None]) -> None:
    """``save(dir)`` (``model.save``) then the marker, so an interrupted save is redone next start."""
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    save(str(artifacts_dir))
    (artifacts_dir / COMPILED_MARKER).write_text("ok\n")


def _access_hint(bucket: str) -> str:
    return (
        f"check that the bucket {bucket} exists and that the pod's role may s3:ListBucket, s3:GetObject "
        "and s3:PutObject under neuron-cache/ (the platform's cache role grants that)"
    )


def fetch_compiled(base_url: str, key: CompileKey, target: Path) -> bool:
    """Download ``<base_url>/<key>/`` to ``target`` when its marker exists; whether it did."""
    bucket, base = parse_s3_uri(base_url, variable=COMPILE_CACHE_URL_ENV, expected=_EXPECTED)
    prefix = f"{base}/{key.name}".strip("/")
    uri = f"s3://{bucket}/{prefix}"
    with s3_errors(uri, "read the Neuron compile cache", _access_hint(bucket)):
        s3 = S3("the S3 Neuron compile cache")
        keys = s3.keys(bucket, prefix)
        if f"{prefix}/{COMPILED_MARKER}" not in keys:
            return False  # nothing there, or an upload that did not finish
        s3.download_prefix(bucket, prefix, keys, target, COMPILED_MARKER)
    return True


def publish_compiled(source: Path, base_url: str, key: CompileKey) -> bool:
    """Upload a complete local ``source`` to ``<base_url>/<key>/`` (marker last); False if already
    there or while another replica uploads it (it holds ``<key>.lock``: one writer per key)."""
    from llmctl.serving.compile_lock import S3Lock

    bucket, base = parse_s3_uri(base_url, variable=COMPILE_CACHE_URL_ENV, expected=_EXPECTED)
    prefix = f"{base}/{key.name}".strip("/")
    uri = f"s3://{bucket}/{prefix}"
    with s3_errors(uri, "write the Neuron compile cache", _access_hint(bucket)):
        s3 = S3("the S3 Neuron compile cache")
        if s3.has(bucket, f"{prefix}/{COMPILED_MARKER}"):
            return False  # another replica published the same configuration first
        owner = f"{os.environ.get('HOSTNAME', 'replica')}/{os.getpid()}"
        lock = S3Lock(s3.client, s3.errors, bucket, f"{prefix}.lock", owner)
        if not lock.acquire():
            return False  # another replica is uploading the same configuration right now
        try:
            if s3.has(bucket, f"{prefix}/{COMPILED_MARKER}"):
                return False
            s3.upload_dir(source, bucket, prefix, COMPILED_MARKER)
        finally:
            lock.release()
    return True


def compile_or_load(
    model: Any,
    artifacts_dir: Path,
    key: CompileKey,
    base_url: str | None,
    *,
    on_progress: Callable[[str], None] | None = None,
) -> str:
    """Load saved artifacts (local, else S3) before ``to_neuron()``, or compile, save and publish.

    Returns where the graphs came from: ``"local"``, ``"s3"`` or ``"compiled"``.
    """
    say = on_progress or (lambda _message: None)
    source = "local" if has_compiled(artifacts_dir) else None
    if source is None and base_url and fetch_compiled(base_url, key, artifacts_dir):
        say(f"downloaded compiled artifacts from {base_url}/{key.name}")
        source = "s3"
    if source is not None:
        model.load(str(artifacts_dir))  # before to_neuron(): neuronx-cc is skipped
    model.to_neuron()
    if source is not None:
        return source
    save_compiled(artifacts_dir, model.save)
    if base_url and publish_compiled(artifacts_dir, base_url, key):
        say(f"uploaded compiled artifacts to {base_url}/{key.name}")
    return "compiled"
