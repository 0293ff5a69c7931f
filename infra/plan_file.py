"""Reading a plan document (`llmctl plan --offline --json > FILE`) back, for `llmctl plan diff`.

A file that is not JSON, not a plan, or a plan of another format or llmctl version is refused with
one line saying so and how to get a plan this llmctl reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmctl.errors import LlmctlError
from llmctl.infra.plan_doc import FORMAT, FORMAT_VERSION

REGENERATE = "write it again with this llmctl: `llmctl plan --offline --json -b BLUEPRINT > FILE`"


class PlanFileError(LlmctlError):
    """A plan file cannot be compared: unreadable, not a plan, or from another version (exit 2)."""

    exit_code = 2


def load_plan(path: Path, *, allow_version_mismatch: bool = False) -> dict[str, Any]:
    """The plan document in `path`, checked to be one this llmctl can compare."""
    from llmctl import __version__

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(
            f"cannot read plan file {path}: {getattr(exc, 'strerror', None) or exc}",
            "pass the path of a file written by `llmctl plan --offline --json`",
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanFileError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            f"a plan is the output of `llmctl plan --offline --json`; {REGENERATE}",
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        older = isinstance(data, dict) and "resources" in data and "ok" in data
        raise PlanFileError(
            f"{path} is a plan from an older llmctl (it has no format version)"
            if older
            else f'{path} is not an llmctl plan (no "format": "{FORMAT}" header)',
            REGENERATE,
        )
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise PlanFileError(
            f"{path} is a plan of format version {version}; llmctl {__version__} reads format version "
            f"{FORMAT_VERSION}",
            REGENERATE,
        )
    written_by = data.get("llmctl_version")
    if written_by != __version__ and not allow_version_mismatch:
        raise PlanFileError(
            f"{path} was written by llmctl {written_by}; this is llmctl {__version__}",
            f"{REGENERATE}; or pass --allow-version-mismatch to compare plans of two llmctl versions "
            "(inputs may then differ because llmctl changed)",
        )
    stacks = data.get("stacks")
    if not isinstance(stacks, list) or not all(
        isinstance(s, dict) and isinstance(s.get("resources"), list) for s in stacks
    ):
        raise PlanFileError(f"{path} is a damaged plan: `stacks` is missing or malformed", REGENERATE)
    return data
