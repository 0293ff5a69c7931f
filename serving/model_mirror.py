"""The S3 model mirror seen from a serving pod: ``LLMCTL_MODEL_URI`` synced once to a local dir.

The workload's `model-mirror` Job copies a Hugging Face snapshot to
``s3://<bucket>/models/<model id>/<revision>/`` and writes ``.llmctl-complete`` last; the serving
pods get that URI as ``LLMCTL_MODEL_URI``. :func:`sync_model` downloads every object under it into
``$LLMCTL_MODEL_CACHE/<bucket>/<prefix>`` (default ``/tmp/llmctl-models``) through a temporary
directory renamed into place, so a second call (or a second replica in the same pod) loads from
disk without touching S3. The S3 copy itself is :mod:`.s3_sync` (boto3 imported only when a mirror
is in use). With ``LLMCTL_MODEL_FILES`` in the pod's spec, every file is checked against the Hub's
checksum before the copy counts as complete (:mod:`.model_files`); a file the pinned revision does
not have, or one that differs, fails the start with a ``weights`` ``failed`` phase line. Zero-byte
keys ending in ``/`` (the "folders" the S3 console makes) are not files and are passed over. A copy
checked once is not hashed again while its files and the checksums are unchanged
(:mod:`.verified_copy`); a copy taken without checksums never counts as checked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from llmctl.errors import ServingError
from llmctl.serving.model_files import FILES_ENV, expected_files, unknown_file
from llmctl.serving.phases import log_phase
from llmctl.serving.s3_sync import S3, parse_s3_uri, s3_errors
from llmctl.serving.verified_copy import forget, marker_path, verify_once

MODEL_URI_ENV = "LLMCTL_MODEL_URI"
MODEL_CACHE_ENV = "LLMCTL_MODEL_CACHE"
DEFAULT_MODEL_CACHE = "/tmp/llmctl-models"
COMPLETE_MARKER = ".llmctl-complete"  # written last by the mirror Job, and by a finished local sync
_IGNORED = frozenset({COMPLETE_MARKER})  # not a file of the model: the mirror's own marker
_ACCESS = "check that the bucket exists and that the pod's role may s3:ListBucket and s3:GetObject on it"


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
    return parse_s3_uri(
        uri, variable=MODEL_URI_ENV, expected="s3://<cache bucket>/models/<model id>/<revision>"
    )


def sync_model(
    uri: str, cache_dir: str | None = None, *, on_progress: Callable[[str], None] | None = None
) -> str:
    """The local copy of the mirror at ``uri``, downloaded on the first call; with checksums in the
    pod's spec, checked before it is used (not hashed again while unchanged since its last check)."""
    bucket, prefix = split_s3_uri(uri)
    root = Path(cache_dir or os.environ.get(MODEL_CACHE_ENV) or DEFAULT_MODEL_CACHE)
    target = root / bucket / prefix
    expected = _checksums(uri)
    with _failed_phase(uri):
        fresh = not (target / COMPLETE_MARKER).is_file()
        if fresh:  # checked in its temporary folder and marked: not hashed again just below
            _download(uri, bucket, prefix, target, expected, on_progress)
        _use_copy(target, expected, uri, quiet=fresh)
    return str(target)


def check_listing(uri: str) -> None:
    """Refuse a mirror holding a file the pinned revision does not have, before another downloader
    (Ray Serve LLM, in a replica of its runtime) writes anything; nothing to do without checksums."""
    expected = expected_files()
    if expected is None:
        return
    bucket, prefix = split_s3_uri(uri)
    with _failed_phase(uri), s3_errors(uri, "read the model mirror", _ACCESS):
        _refuse_unknown(S3("the S3 model mirror").files(bucket, prefix), prefix, expected, uri)


def check_copy(folder: str | None, uri: str) -> None:
    """Check a copy of the mirror at ``uri`` that another downloader made in ``folder`` (Ray Serve LLM's
    own S3 download, in a replica of its runtime), before the engine loads it; the same checks and phase
    line as :func:`sync_model`."""
    expected = _checksums(uri)
    if expected is None:
        if folder:
            forget(Path(folder))
        return
    with _failed_phase(uri):
        if not folder or not Path(folder).is_dir():
            raise ServingError(
                f"cannot check the model files downloaded from {uri}: no folder {folder!r}",
                "the Ray Serve LLM in the image put its download elsewhere; report this with the Ray version",
            )
        _verified(Path(folder), expected, uri)


def _checksums(uri: str) -> dict[str, str] | None:
    """The checksums in the pod's spec; without them, says on stderr that the files are not checked."""
    expected = expected_files()
    if expected is None:
        print(
            f"llmctl: the files of {uri} are not checked: the pod's spec has no {FILES_ENV}", file=sys.stderr
        )
    return expected


@contextmanager
def _failed_phase(uri: str) -> Iterator[None]:
    """A ServingError inside: the ``weights`` ``failed`` phase line, then the error."""
    try:
        yield
    except ServingError as error:
        log_phase("weights", "failed", source=uri, error=error.message)
        raise


def _verified(folder: Path, expected: dict[str, str], uri: str, *, quiet: bool = False) -> None:
    if verify_once(folder, expected, uri, ignore=_IGNORED) is None and not quiet:
        print(
            f"llmctl: the files of {uri} in {folder} are unchanged since they were checked against the "
            "same checksums: not hashed again",
            file=sys.stderr,
        )


def _use_copy(target: Path, expected: dict[str, str] | None, uri: str, *, quiet: bool) -> None:
    """The local copy, checked (unless its marker shows it checked and unchanged); one that fails is
    no finished copy any more (the next start downloads it again), one taken unchecked has no marker."""
    if expected is None:
        forget(target)
        return
    try:
        _verified(target, expected, uri, quiet=quiet)
    except ServingError:
        (target / COMPLETE_MARKER).unlink(missing_ok=True)
        raise


def _refuse_unknown(keys: list[str], prefix: str, expected: dict[str, str] | None, uri: str) -> None:
    """With ``expected``, refuse the first of the mirror's ``keys`` (folder placeholders already left
    out) that is a file the pinned revision does not have."""
    if expected is None:
        return
    for key in keys:
        relative = key[len(prefix) + 1 :]
        refused = None if relative == COMPLETE_MARKER else unknown_file(relative, expected, uri)
        if refused is not None:
            raise refused


def _download(
    uri: str,
    bucket: str,
    prefix: str,
    target: Path,
    expected: dict[str, str] | None,
    on_progress: Callable[[str], None] | None,
) -> None:
    with s3_errors(uri, "read the model mirror", _ACCESS):
        s3 = S3("the S3 model mirror")
        keys = s3.files(bucket, prefix)
        if f"{prefix}/{COMPLETE_MARKER}" not in keys:
            raise ServingError(
                f"the model mirror {uri} is incomplete ({len(keys)} object(s), no {COMPLETE_MARKER} marker)",
                "wait for the workload's `model-mirror` Job to finish (kubectl -n <ns> logs job/model-mirror)",
            )
        _refuse_unknown(keys, prefix, expected, uri)  # before anything is downloaded
        if on_progress:
            on_progress(f"downloading {len(keys) - 1} file(s) from {uri}")
        forget(target)  # a new copy: only its own check marks it

        def check(folder: Path) -> None:
            if expected is not None:  # checked in the temporary folder, marked for where it is renamed to
                verify_once(folder, expected, uri, ignore=_IGNORED, marker=marker_path(target))

        s3.download_prefix(bucket, prefix, keys, target, COMPLETE_MARKER, check)
