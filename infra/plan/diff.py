"""`llmctl plan diff OLD NEW`: what changes between two offline plans.

Resources are matched by stack id (`project/stack`) and URN. A changed resource lists each changed
input path (`spec.template.spec.containers[name=head].image`, `labels["karpenter.sh/nodepool"]`) with
its old and new value; lists whose items all carry a distinct `name` are matched by name, other
lists by position. Secrets were redacted when the plans were written and stay so. The hourly cost
(platform plus each blueprint's serving nodes) is compared too, and the Karpenter pools whose running
nodes the change replaces (drift: :mod:`llmctl.infra.plan.node_drift`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from llmctl.infra.plan.node_drift import PoolDrift, pool_drift

Change = Literal["added", "removed", "changed"]
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class InputChange:
    """One changed input path of a resource; `old`/`new` are None when the path was added/removed."""

    path: str
    change: Change
    old: Any = None
    new: Any = None


@dataclass(frozen=True)
class ResourceChange:
    """One resource added, removed or changed, with its changed inputs (changed resources only)."""

    stack: str
    urn: str
    type: str
    name: str
    action: Literal["add", "remove", "change"]
    inputs: list[InputChange] = field(default_factory=list)


@dataclass
class CostDiff:
    """Hourly cost before and after, per part (`platform`, then each blueprint) and in total."""

    before: float
    after: float
    parts: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        """After minus before, in USD per hour."""
        return round(self.after - self.before, 4)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {
            "hourly_usd_before": self.before,
            "hourly_usd_after": self.after,
            "hourly_usd_delta": self.delta,
            "parts": [
                {"part": part, "hourly_usd_before": old, "hourly_usd_after": new}
                for part, (old, new) in self.parts.items()
            ],
        }


@dataclass
class PlanDiff:
    """Everything that differs between two plans."""

    resources: list[ResourceChange]
    cost: CostDiff
    stacks_added: list[str] = field(default_factory=list)
    stacks_removed: list[str] = field(default_factory=list)
    violations_added: list[dict[str, Any]] = field(default_factory=list)
    violations_removed: list[dict[str, Any]] = field(default_factory=list)
    versions: tuple[str, str] = ("", "")
    resource_counts: tuple[int, int] = (0, 0)
    missing: tuple[list[str], list[str]] = ([], [])  # blueprints each plan left out (--skip-missing)
    drift: list[PoolDrift] = field(default_factory=list)  # pools whose running nodes are replaced

    def of(self, action: str) -> list[ResourceChange]:
        """The resource changes of one action (add, remove, change)."""
        return [res for res in self.resources if res.action == action]

    @property
    def changed(self) -> bool:
        """True when anything differs (resources, cost or policy verdicts)."""
        return bool(
            self.resources or self.cost.delta or self.violations_added or self.violations_removed
        ) or any(old != new for old, new in self.cost.parts.values())

    def stacks(self) -> list[str]:
        """Stack ids with a change, in order."""
        return sorted({res.stack for res in self.resources})

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape of `llmctl plan diff --format json`."""
        data: dict[str, Any] = {
            "changed": self.changed,
            "summary": {
                "added": len(self.of("add")),
                "removed": len(self.of("remove")),
                "changed": len(self.of("change")),
            },
            "stacks_added": self.stacks_added,
            "stacks_removed": self.stacks_removed,
            "resources": [
                {**asdict(res), "inputs": [asdict(item) for item in res.inputs]} for res in self.resources
            ],
            "cost": self.cost.to_dict(),
            "violations_added": self.violations_added,
            "violations_removed": self.violations_removed,
            "drift": [pool.to_dict() for pool in self.drift],
        }
        if self.versions[0] != self.versions[1]:
            data["llmctl_versions"] = {"old": self.versions[0], "new": self.versions[1]}
        if any(self.missing):
            data["missing_blueprints"] = {"old": self.missing[0], "new": self.missing[1]}
        return data

    def notes(self) -> list[str]:
        """What the reader must know to read the diff: blueprints one of the plans left out."""
        old, new = self.missing
        found = []
        if old:
            found.append(f"not in the old revision: {', '.join(old)} (its workload stack shows as new)")
        if new:
            found.append(f"not in the new revision: {', '.join(new)} (its workload stack shows as removed)")
        return found


def _key_path(path: str, key: str) -> str:
    if _IDENT.match(key):
        if path.endswith(">"):
            return f"{path} {key}"
        return f"{path}.{key}" if path else key
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{path}[{quoted}]"


def _named(items: list[Any]) -> dict[str, Any] | None:
    """Items keyed by their `name` when every item is a mapping with a distinct string name."""
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    keys = [name for name in names if isinstance(name, str)]
    if not items or len(keys) != len(items) or len(set(keys)) != len(keys):
        return None
    return {item["name"]: item for item in items}


def _document(text: str) -> Any:
    """A mapping or list embedded as YAML or JSON text (Ray's serveConfigV2, IAM policies), or None."""
    if "\n" not in text and not text.lstrip().startswith(("{", "[")):
        return None
    import yaml

    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def _same(old: Any, new: Any) -> bool:
    """Equal as the engine compares inputs: `true` is not `1` (Python's `==` says it is), while 1 and
    1.0 are one number, as in JSON."""
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new) and old == new
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(_same(old[key], new[key]) for key in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(map(_same, old, new))
    return bool(old == new)


def diff_values(old: Any, new: Any, path: str = "") -> list[InputChange]:
    """Every path where `new` differs from `old`, in a stable order. Strings that both hold a YAML or
    JSON document are compared inside (`spec.serveConfigV2 > applications[name=x].args`); texts that
    differ only in their layout, and named items that only changed places, are a change of the
    whole value (the engine sends the new text or order)."""
    if _same(old, new):
        return []
    found: list[InputChange] = []
    if isinstance(old, str) and isinstance(new, str):
        old_doc, new_doc = _document(old), _document(new)
        if old_doc is not None and new_doc is not None:
            inside = diff_values(old_doc, new_doc, f"{path} >")
            return inside or [InputChange(path, "changed", old, new)]
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            sub = _key_path(path, str(key))
            if key not in old:
                found.append(InputChange(sub, "added", None, new[key]))
            elif key not in new:
                found.append(InputChange(sub, "removed", old[key], None))
            else:
                found.extend(diff_values(old[key], new[key], sub))
        return found
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _named(old), _named(new)
        if old_named is not None and new_named is not None:
            order = [*old_named, *(name for name in new_named if name not in old_named)]
            for name in order:
                sub = f"{path}[name={name}]"
                if name not in old_named:
                    found.append(InputChange(sub, "added", None, new_named[name]))
                elif name not in new_named:
                    found.append(InputChange(sub, "removed", old_named[name], None))
                else:
                    found.extend(diff_values(old_named[name], new_named[name], sub))
            return found or [InputChange(path, "changed", list(old_named), list(new_named))]
        for index in range(max(len(old), len(new))):
            sub = f"{path}[{index}]"
            if index >= len(old):
                found.append(InputChange(sub, "added", None, new[index]))
            elif index >= len(new):
                found.append(InputChange(sub, "removed", old[index], None))
            else:
                found.extend(diff_values(old[index], new[index], sub))
        return found
    return [InputChange(path, "changed", old, new)]


def _resources(plan: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (str(stack["id"]), str(res["urn"])): res for stack in plan["stacks"] for res in stack["resources"]
    }


def _resource_changes(old: dict[str, Any], new: dict[str, Any]) -> list[ResourceChange]:
    before, after = _resources(old), _resources(new)
    changes: list[ResourceChange] = []
    for key in sorted(set(before) | set(after)):
        stack, urn = key
        res = after.get(key) or before[key]
        ident = (stack, urn, str(res["type"]), str(res["name"]))
        if key not in before:
            changes.append(ResourceChange(*ident, "add"))
        elif key not in after:
            changes.append(ResourceChange(*ident, "remove"))
        else:
            was, now = before[key], after[key]
            inputs = diff_values(was.get("inputs", {}), now.get("inputs", {}))
            for extra in ("parent", "depends_on"):
                if was.get(extra) != now.get(extra):
                    inputs.append(InputChange(f"({extra})", "changed", was.get(extra), now.get(extra)))
            if inputs:
                changes.append(ResourceChange(*ident, "change", inputs))
    return changes


def _cost_parts(plan: dict[str, Any]) -> dict[str, float]:
    cost = plan.get("cost") or {}
    parts = {"platform": float(cost.get("platform_hourly_usd", 0.0))}
    for row in cost.get("workloads", []):
        parts[f"workload {row['blueprint']}"] = float(row["serving_hourly_usd"])
    return parts


def _cost(old: dict[str, Any], new: dict[str, Any]) -> CostDiff:
    before, after = _cost_parts(old), _cost_parts(new)
    parts = {
        part: (before.get(part), after.get(part)) for part in [*before, *sorted(set(after) - set(before))]
    }
    return CostDiff(
        before=float((old.get("cost") or {}).get("hourly_usd", 0.0)),
        after=float((new.get("cost") or {}).get("hourly_usd", 0.0)),
        parts=parts,
    )


def _violation_key(v: dict[str, Any]) -> tuple[str, ...]:
    return (str(v.get("rule")), str(v.get("urn")), str(v.get("message")), str(v.get("severity")))


def diff_plans(old: dict[str, Any], new: dict[str, Any]) -> PlanDiff:
    """Compare two plan documents (as :func:`llmctl.infra.plan.file.load_plan` returns them)."""
    old_stacks = {str(s["id"]) for s in old["stacks"]}
    new_stacks = {str(s["id"]) for s in new["stacks"]}
    old_v = {_violation_key(v): v for v in old.get("violations", [])}
    new_v = {_violation_key(v): v for v in new.get("violations", [])}
    return PlanDiff(
        resources=_resource_changes(old, new),
        cost=_cost(old, new),
        stacks_added=sorted(new_stacks - old_stacks),
        stacks_removed=sorted(old_stacks - new_stacks),
        violations_added=[new_v[key] for key in sorted(set(new_v) - set(old_v))],
        violations_removed=[old_v[key] for key in sorted(set(old_v) - set(new_v))],
        versions=(str(old.get("llmctl_version")), str(new.get("llmctl_version"))),
        resource_counts=(len(_resources(old)), len(_resources(new))),
        missing=(_names(old.get("missing_blueprints")), _names(new.get("missing_blueprints"))),
        drift=pool_drift(_objects(old), _objects(new)),
    )


def _objects(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's resources' inputs (its Kubernetes objects among them)."""
    return [res["inputs"] for res in _resources(plan).values() if isinstance(res.get("inputs"), dict)]


def _names(value: Any) -> list[str]:
    return sorted(str(item) for item in value) if isinstance(value, list) else []
