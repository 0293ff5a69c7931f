"""Each file a serving pod takes from the S3 model mirror, checked against the Hub's checksum.

The mirror (``s3://<bucket>/models/<id>/<commit>/``) is written by a pod (the workload's mirror Job),
and every workload of that model revision shares it, so a pod never trusts what it finds there. The
checksums come from its own spec instead: ``LLMCTL_MODEL_FILES`` is JSON, file name -> ``sha256:<hex>``
(an LFS file's SHA-256) or ``git-blob:<sha1>`` (the git blob id of any other file), as the Hugging
Face Hub reported them to the CLI when it pinned the revision (`infra/workload/pins/model_revision.py`).
Without the variable there is nothing to check against (the CLI could not reach the Hub), and the
pod says so in its ``weights`` phase line.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from llmctl.errors import ServingError

FILES_ENV = "LLMCTL_MODEL_FILES"
_CHUNK = 1 << 20


def expected_files() -> dict[str, str] | None:
    """The checksums in this pod's spec, or None when it carries none."""
    value = os.environ.get(FILES_ENV, "").strip()
    if not value:
        return None
    try:
        files = json.loads(value)
    except ValueError:
        files = None
    if not isinstance(files, dict) or not all(isinstance(v, str) and ":" in v for v in files.values()):
        raise ServingError(
            f"{FILES_ENV} is not a JSON object of file name -> 'sha256:...' or 'git-blob:...'",
            "the workload renders it from the stack's pin; run `llmctl up` again",
        )
    return {str(name): str(checksum) for name, checksum in files.items()}


def checksum(path: Path, kind: str) -> str:
    """``kind:<hex>`` of a file: its SHA-256, or its git blob id (SHA-1 of ``blob <size>\\0`` + bytes)."""
    if kind == "sha256":
        digest = hashlib.sha256()
    elif kind == "git-blob":
        digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size, usedforsecurity=False)
    else:
        raise ServingError(f"unknown checksum kind {kind!r} in {FILES_ENV}", "run `llmctl up` again")
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return f"{kind}:{digest.hexdigest()}"


def unknown_file(relative: str, expected: dict[str, str], source: str) -> ServingError | None:
    """The refusal of a mirror file the pinned revision does not have, else None."""
    if relative in expected:
        return None
    return ServingError(
        f"the model mirror {source} holds {relative}, a file the pinned model revision does not have",
        "someone else wrote into the mirror: delete the prefix (aws s3 rm --recursive) and run the "
        "workload's `model-mirror` Job again",
    )


def verify(
    folder: Path, expected: dict[str, str], source: str, *, ignore: frozenset[str] = frozenset()
) -> int:
    """Check every file under ``folder`` against ``expected`` (names relative to the folder; those in
    ``ignore`` left out); the count.

    A file the revision does not have, or whose checksum differs, is a ServingError naming it.
    """
    count = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative in ignore:
            continue
        refused = unknown_file(relative, expected, source)
        if refused is not None:
            raise refused
        want = expected[relative]
        got = checksum(path, want.split(":", 1)[0])
        if got != want:
            raise ServingError(
                f"the model file {relative} from {source} does not match the Hub's checksum "
                f"(expected {want}, got {got})",
                "someone changed the mirror: delete the prefix (aws s3 rm --recursive) and run the "
                "workload's `model-mirror` Job again",
            )
        count += 1
    return count
