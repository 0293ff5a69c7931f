"""The plan document that `llmctl plan --offline --json` writes and `llmctl plan diff` reads.

Every input of every resource (Helm values included), secrets redacted at the exact path Pulumi
marked secret, values known only after creation shown as `<unknown>`; resources sorted by URN and
keys sorted, so two plans of the same inputs are byte-identical and their diff is meaningful.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmctl import __version__
from llmctl.infra.plan.offline import UNKNOWN, Registered

FORMAT = "llmctl-plan"
FORMAT_VERSION = 1
SECRET = "[secret]"
# Pulumi bookkeeping among the inputs, not something a user set.
_INTERNAL = frozenset({"__defaults"})


def redacted(value: Any, path: str, secrets: set[str]) -> Any:
    """`value` with every secret path (as :mod:`llmctl.infra.plan.offline` records them) replaced by SECRET,
    and whole-number floats as integers."""
    if path in secrets:
        return SECRET
    if isinstance(value, dict):
        return {key: redacted(item, f"{path}.{key}", secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item, f"{path}[{index}]", secrets) for index, item in enumerate(value)]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the engine protocol carries every number as a double: 4.0 was 4
    return value


def full_inputs(res: Registered) -> dict[str, Any]:
    """Every input of a resource, secrets redacted."""
    return {
        key: redacted(value, key, res.secret_inputs)
        for key, value in sorted(res.inputs.items())
        if key not in _INTERNAL
    }


def resource_entry(res: Registered) -> dict[str, Any]:
    """One resource of a plan document (inputs already redacted by the caller)."""
    return {**res.to_dict(), "urn": res.urn}


def stack_entry(
    kind: str, project: str, stack: str, resources: Sequence[Registered], blueprint: str | None = None
) -> dict[str, Any]:
    """One stack of a plan document, its resources in URN order."""
    ordered = sorted(resources, key=lambda res: res.urn)
    return {
        "id": f"{project}/{stack}",
        "kind": kind,
        "project": project,
        "stack": stack,
        "blueprint": blueprint,
        "resource_count": len(ordered),
        "resources": [resource_entry(res) for res in ordered],
    }


def canonical(value: Any) -> Any:
    """`value` with every mapping's keys in sorted order (JSON writers keep insertion order)."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def header() -> dict[str, Any]:
    """The keys that say what a file is and which llmctl wrote it."""

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "llmctl_version": __version__}


def placeholders() -> dict[str, str]:
    """How unknown and secret values appear in a plan."""
    return {"unknown": UNKNOWN, "secret": SECRET}
