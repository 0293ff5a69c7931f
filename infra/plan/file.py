"""Reading a plan document (`llmctl plan --offline --json > FILE`) back, for `llmctl plan diff`.

A file that is not JSON, not a plan, or a plan of another format or llmctl version is refused with
one line saying so and how to get a plan this llmctl reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmctl import __version__
from llmctl.errors import LlmctlError
from llmctl.infra.plan.doc import FORMAT, FORMAT_VERSION

REGENERATE = "write it again with this llmctl: `llmctl plan --offline --json -b BLUEPRINT > FILE`"


class PlanFileError(LlmctlError):
    """A plan file cannot be compared: unreadable, not a plan, or from another version (exit 2)."""

    exit_code = 2


def load_plan(path: Path, *, allow_version_mismatch: bool = False) -> dict[str, Any]:
    """The plan document in `path`, checked to be one this llmctl can compare."""

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
    problem = damage(data)
    if problem:
        raise PlanFileError(f"{path} is a damaged plan: {problem}", REGENERATE)
    return data


def damage(data: dict[str, Any]) -> str | None:
    """What is wrong with the parts of a plan `plan diff` reads (None when nothing is): a file
    edited by hand or cut short fails here with one line, not deep inside the comparison."""
    stacks = data.get("stacks")
    if not isinstance(stacks, list):
        return "`stacks` is missing or malformed"
    for index, stack in enumerate(stacks):
        if not isinstance(stack, dict) or not isinstance(stack.get("id"), str):
            return f"stacks[{index}] has no `id`"
        resources = stack.get("resources")
        if not isinstance(resources, list):
            return f"stack {stack['id']} has no `resources` list"
        for position, res in enumerate(resources):
            fields = ("urn", "type", "name")
            if not isinstance(res, dict) or not all(isinstance(res.get(key), str) for key in fields):
                return f"resource {position} of stack {stack['id']} lacks its urn, type or name"
    cost = data.get("cost", {})
    rows = cost.get("workloads", []) if isinstance(cost, dict) else None
    if not isinstance(rows, list) or not all(
        isinstance(row, dict) and "blueprint" in row and _number(row.get("serving_hourly_usd"))
        for row in rows
    ):
        return "`cost` is malformed"
    if not _number(cost.get("platform_hourly_usd", 0)):
        return "`cost.platform_hourly_usd` is not a number"
    violations = data.get("violations", [])
    if not isinstance(violations, list) or not all(isinstance(v, dict) for v in violations):
        return "`violations` is malformed"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
