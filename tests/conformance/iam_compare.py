"""Compare our IAM policy statements with an upstream policy, statement by statement.

For every Allow statement upstream, each (action, resource) pair must be granted by at least one
of our statements (action and resource patterns matched as IAM does, `*` and `?` wildcards). Every
condition of the upstream statement (operator, key and values) must be on each of our statements
that grant the pair: a statement without it grants more than upstream does, i.e. it drops the
condition. Actions we grant that upstream does not are reported too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from upstream_files import cloudformation, substitute

Statement = dict[str, Any]


def as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, (str, bool, int)) else list(value)


def conditions(statement: Statement) -> set[tuple[str, str, tuple[str, ...]]]:
    found = set()
    for operator, entries in statement.get("Condition", {}).items():
        for key, values in entries.items():
            found.add((operator, key, tuple(sorted(str(v).lower() for v in as_list(values)))))
    return found


def _matches(value: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(value.lower(), pattern.lower()) for pattern in patterns)


@dataclass
class Findings:
    """Where our policy differs from upstream's."""

    not_granted: set[str] = field(default_factory=set)
    dropped_conditions: set[tuple[str, str]] = field(default_factory=set)  # (action, "Operator:key")
    extra_actions: set[str] = field(default_factory=set)


def _grants(statement: Statement, action: str, resource: str) -> bool:
    return _matches(action, as_list(statement["Action"])) and _matches(
        resource, as_list(statement["Resource"])
    )


def compare(upstream: list[Statement], ours: list[Statement]) -> Findings:
    """Upstream may grant one (action, resource) pair in several statements with different
    conditions; one of ours is as strict as upstream when it carries every condition of at least one
    of them. Otherwise the conditions missing against the closest upstream statement are dropped."""
    findings = Findings()
    allowed = [s for s in ours if s["Effect"] == "Allow"]
    wanted = [s for s in upstream if s["Effect"] == "Allow"]
    pairs = {(a, r) for s in wanted for a in as_list(s["Action"]) for r in as_list(s["Resource"])}
    for action, resource in sorted(pairs):
        upstream_grants = [conditions(s) for s in wanted if _grants(s, action, resource)]
        granting = [s for s in allowed if _grants(s, action, resource)]
        if not granting:
            findings.not_granted.add(action)
        for statement in granting:
            have = conditions(statement)
            missing = min((grant - have for grant in upstream_grants), key=len)
            findings.dropped_conditions.update((action, f"{op}:{key}") for op, key, _ in missing)
    upstream_actions = {a.lower() for a, _ in pairs}
    for statement in allowed:
        for action in as_list(statement["Action"]):
            if not any(fnmatchcase(u, action.lower()) for u in upstream_actions):
                findings.extra_actions.add(action)
    return findings


def karpenter_upstream_statements(template_path: Any, values: dict[str, str]) -> list[Statement]:
    """The controller's statements from the getting-started template's managed policies."""
    resources = cloudformation(template_path)["Resources"]
    statements: list[Statement] = []
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            document = json.loads(substitute(resource["Properties"]["PolicyDocument"], values))
            statements.extend(document["Statement"])
    return statements
