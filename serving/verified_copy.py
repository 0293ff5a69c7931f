"""A local copy of the model checked once against the Hub's checksums, not hashed again while unchanged.

Checking a 70B model's files is about 140 GB of SHA-256. A replica that starts again on the same
node finds the files it checked before (the local mirror sync, the folder Ray Serve LLM downloaded
into), so after a full check passed :func:`verify_once` writes a marker beside the folder,
``<folder>.llmctl-verified`` (outside it: no object of the mirror can land there): the SHA-256 of the
checksum list the files were checked against, and each file's size, mtime and ctime (a ctime cannot
be set back, an mtime can). A later check against the same list, whose folder holds the same files
with the same size, mtime and ctime, skips the hashing. Anything else checks every file again:
another checksum list, a file changed, added or missing, a marker missing or unreadable.

The marker is written atomically (a temporary file renamed over it), and only after a full check
passed with no file changing while it ran; :func:`forget` removes it, for a copy no check vouches for.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from llmctl.serving.model_files import verify

MARKER_SUFFIX = ".llmctl-verified"

Stats = dict[str, list[int]]


def marker_path(folder: Path) -> Path:
    """Where the marker of ``folder`` is: beside it, never inside."""
    return folder.with_name(folder.name + MARKER_SUFFIX)


def forget(folder: Path) -> None:
    """Remove the marker of ``folder``: its files count as unchecked until the next full check."""
    marker_path(folder).unlink(missing_ok=True)


def verify_once(
    folder: Path,
    expected: dict[str, str],
    source: str,
    *,
    ignore: frozenset[str] = frozenset(),
    marker: Path | None = None,
) -> int | None:
    """Check ``folder`` as :func:`~llmctl.serving.model_files.verify` does, unless the marker shows it
    checked against the same ``expected`` and unchanged since; the number of files hashed, None when
    the marker made it unnecessary. A file that fails is the ServingError of ``verify``.

    ``marker``: where to record the check (default :func:`marker_path` of ``folder``), for a folder
    checked before it is renamed into place.
    """
    where = marker or marker_path(folder)
    before = _stats(folder, ignore)
    if before is not None and _recorded(where) == _record(expected, before):
        return None
    count = verify(folder, expected, source, ignore=ignore)
    if before is not None and _stats(folder, ignore) == before:  # nothing changed while it was hashed
        _write(where, _record(expected, before))
    return count


def _digest(expected: dict[str, str]) -> str:
    text = json.dumps(expected, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _stats(folder: Path, ignore: frozenset[str]) -> Stats | None:
    """Each file's [size, mtime, ctime] (ns) by its name relative to ``folder``; None when unreadable."""
    found: Stats = {}
    try:
        for path in folder.rglob("*"):
            relative = path.relative_to(folder).as_posix()
            if relative not in ignore and path.is_file():
                stat = path.stat()
                found[relative] = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]
    except OSError:
        return None
    return found


def _record(expected: dict[str, str], stats: Stats) -> dict[str, object]:
    return {"checksums": _digest(expected), "files": stats}


def _recorded(marker: Path) -> object:
    """The marker's record; None when it is missing or unreadable (never equal to a record)."""
    try:
        record: object = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record


def _write(marker: Path, record: dict[str, object]) -> None:
    """Write the marker atomically; a marker that cannot be written only costs the next start a check."""
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=marker.name + ".", dir=marker.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, marker)
        tmp = None
    except OSError as error:
        print(
            f"llmctl: could not write {marker} ({error}); the next start checks every file again",
            file=sys.stderr,
        )
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
