"""What `up`, `down` and `preview` report: plans, results, the PR-comment markdown, next commands
and `down`'s final verdict on leftovers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmctl.errors import CloudError, LlmctlError
from llmctl.infra.aws.sweep_kinds import KINDS
from llmctl.infra.lifecycle.cold_start import render_at_zero
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, PreviewResult
from llmctl.infra.lifecycle.progress import Timeline
from llmctl.infra.lifecycle.ray_upgrade import pending_instances
from llmctl.state import Endpoint


@dataclass
class Plan:
    """What `up` is about to do, shown before the confirmation."""

    blueprint: str
    stack: str
    region: str
    target: str
    cluster: str
    changes: dict[str, dict[str, int]]
    cost: Any
    notes: list[str] = field(default_factory=list)  # the environment: shared with, AZs re-chosen
    # scaling to zero: the hourly saving and the last recorded cold start (cold_start.at_zero)
    at_zero: dict[str, Any] | None = None
    # against a deployed workload: what the controllers do with the change (day_two.DayTwo)
    day_two: Any = None

    def summary(self) -> list[str]:
        """The lines shown before the confirmation."""
        cost = self.cost
        changes = self.changes.get("platform", {})
        return [
            f"blueprint {self.blueprint} on {self.target} (stack {self.stack}, cluster {self.cluster}, {self.region})",
            "platform changes: "
            + (", ".join(f"{op} {n}" for op, n in changes.items() if op != "same") or "none"),
            f"cost: about ${cost.total_hourly_usd:.2f}/h ({cost.nodes} x {cost.instance_type} "
            f"+ platform ${cost.platform_hourly_usd:.2f}/h)",
            *self.notes,
            *([render_at_zero(self.at_zero)] if self.at_zero else []),
            *(self.day_two.lines() if self.day_two is not None else []),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "blueprint": self.blueprint,
            "stack": self.stack,
            "region": self.region,
            "target": self.target,
            "cluster": self.cluster,
            "changes": self.changes,
            "cost": self.cost.to_dict() if self.cost is not None else None,
            "notes": self.notes,
            "at_zero": self.at_zero,
            "rollouts": self.day_two.to_dict() if self.day_two is not None else None,
        }


@dataclass
class UpResult:
    endpoint: Endpoint
    plan: Plan | None
    timeline: Timeline
    starts: list[Any] = field(default_factory=list)  # timeline.StartTimeline of each serving pod
    via_connect: bool = False  # the endpoint answers on localhost once `llmctl connect` runs
    fabric: dict[str, Any] | None = None  # the fabric preflight's verdict (FabricVerdict.as_dict)


def next_commands(endpoint: Endpoint) -> list[str]:
    """What to run after `up`: chat, bench, down."""
    bp, stack = endpoint.blueprint, endpoint.stack
    if endpoint.workload:  # a named workload: address it by name; `down` only that one
        flag = f"--blueprint {bp} --stack {stack} --workload {endpoint.workload}"
        return [
            f"llmctl connect {flag}",
            f"llmctl chat {flag}",
            f"llmctl bench {flag}",
            f"llmctl down --stack {stack} --workload {endpoint.workload}",
        ]
    # `down` of this blueprint only: another blueprint's local server, or workload, stays (on a
    # cluster the platform goes with its last workload)
    return [
        f"llmctl chat --blueprint {bp} --stack {stack}",
        f"llmctl bench --blueprint {bp} --stack {stack}",
        f"llmctl down --blueprint {bp}"
        + (" --target local" if endpoint.target == "local" else "")
        + f" --stack {stack}",
    ]


@dataclass
class DownResult:
    stack: str
    destroyed: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)  # the platform, shrunk for the workloads left
    sweep: Any = None
    leftovers: list[Any] = field(default_factory=list)
    timeline: Timeline = field(default_factory=Timeline)
    # What down decided and did beyond plain destroys: delete-unreachable and why, finalizers removed.
    notes: list[str] = field(default_factory=list)
    # RayServices that had a pending second RayCluster when `down` began (ray_upgrade.Upgrade.to_dict)
    pending_clusters: list[dict[str, Any]] = field(default_factory=list)
    # what the platform update for the workloads left changed: pools, root volumes, KEDA (shrink.py)
    platform_changes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        verdict = self.verdict()
        return {
            "stack": self.stack,
            "destroyed": self.destroyed,
            "updated": self.updated,
            "platform_changes": self.platform_changes,
            "sweep": self.sweep.to_dict() if self.sweep is not None else None,
            "leftovers": [asdict(item) for item in self.leftovers],
            "notes": self.notes,
            "pending_clusters": self.pending_clusters,
            "ok": verdict is None,
            "error": verdict.to_dict() if verdict is not None else None,
            "timeline": self.timeline.to_dict(),
        }

    def lines(self) -> list[str]:
        """The text `llmctl down` prints."""
        if self.destroyed:
            lines = ["destroyed: " + ", ".join(self.destroyed)]
        elif self.updated:
            lines = ["destroyed: nothing (already gone)"]
        else:
            lines = [f"nothing to destroy: no llmctl stacks in environment {self.stack}"]
        if self.updated:
            lines.append(f"updated for the workloads left: {', '.join(self.updated)}")
            lines += [f"  {change}" for change in self.platform_changes]
        lines += [f"note: {note}" for note in self.notes]
        if self.sweep is not None:
            lines.append(
                f"sweep: {len(self.sweep.found)} found, {len(self.sweep.deleted)} deleted, {len(self.sweep.failed)} failed"
                if self.sweep.found
                else f"sweep: nothing tagged for {self.sweep.cluster} in {self.sweep.region}"
            )
        return [*lines, "timeline:\n" + self.timeline.render()]

    def verdict(self) -> LlmctlError | None:
        """The error `down` ends with when the leftover check found anything (None: clean)."""
        try:
            check_leftovers(self)
        except LlmctlError as exc:
            return exc
        return None

    def check(self) -> None:
        """The final verdict on leftovers (see :func:`check_leftovers`)."""
        check_leftovers(self)


@dataclass
class PreviewReport:
    blueprint: str
    stack: str  # the environment (the platform stack's name)
    stacks: dict[str, PreviewResult]  # by project
    cost: Any
    workload_stack: str = ""  # the workload stack's name (`ci.pr-42` for a named workload)
    # the deployed platform's pools whose running nodes `up` replaces, as `up` says it (drift_notes.py)
    drift: list[str] = field(default_factory=list)

    def stack_of(self, project: str) -> str:
        """The stack name previewed in `project`: the environment for the platform, else the
        workload stack."""
        return self.stack if project == PLATFORM_PROJECT else (self.workload_stack or self.stack)

    def lines(self) -> list[str]:
        """One line per stack for a terminal (`project/stack: changes`), then the node drift."""
        return [
            *(
                f"{name}/{self.stack_of(name)}: "
                + (", ".join(f"{op} {n}" for op, n in result.changes.items()) or "no changes")
                for name, result in self.stacks.items()
            ),
            *self.drift,
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "blueprint": self.blueprint,
            "stack": self.stack,
            "workload_stack": self.workload_stack or self.stack,
            "stacks": {name: {"changes": r.changes, "steps": r.steps} for name, r in self.stacks.items()},
            "cost_per_hour_usd": round(self.cost.total_hourly_usd, 4),
            "drift_notes": self.drift,  # lines, as `up` says them (`plan --json` has `drift[]` objects)
        }

    def to_markdown(self) -> str:
        """A PR comment: change summary per stack, the resources by operation, the hourly cost."""
        lines = [
            f"### llmctl preview: `{self.blueprint}` on stack `{self.workload_stack or self.stack}`",
            "",
            "| stack | create | update | replace | delete |",
            "|---|---|---|---|---|",
        ]
        for name, r in self.stacks.items():
            lines.append(
                f"| {name}/{self.stack_of(name)} | {r.count('create')} | {r.count('update')} | {r.count('replace', 'create-replacement')} | {r.count('delete')} |"
            )
        for name, r in self.stacks.items():
            changed = [s for s in r.steps if s["op"] not in ("same", "read")]
            if changed:
                lines += ["", f"<details><summary>{name}: {len(changed)} resource changes</summary>", ""]
                lines += [f"- `{s['op']}` {s['type']} `{s['urn'].split('::')[-1]}`" for s in changed]
                lines += ["", "</details>"]
        if self.drift:  # the running nodes the platform change replaces
            lines += ["", "```text", *self.drift, "```"]
        c = self.cost
        lines += [
            "",
            f"**Cost:** ${c.total_hourly_usd:.2f}/h ({c.nodes} x {c.instance_type} ${c.serving_hourly_usd:.2f}/h + platform ${c.platform_hourly_usd:.2f}/h)",
        ]
        return "\n".join(lines) + "\n"


def check_leftovers(result: DownResult) -> None:
    """`down`'s final verdict: a CloudError listing what is still there; an instance that was a node of a
    pending second RayCluster when `down` began is named so."""

    if result.leftovers:
        pending = pending_instances(result.pending_clusters)
        names = ", ".join(
            item.label()
            + (f" ({pending[item.id]})" if item.kind == "instance" and item.id in pending else "")
            for item in result.leftovers[:10]
        )
        kinds = [item.kind for item in result.leftovers]
        counts = ", ".join(f"{kinds.count(kind)} {kind}" for kind in KINDS if kind in kinds)
        of_pending = sum(1 for item in result.leftovers if item.kind == "instance" and item.id in pending)
        also = (
            f"; {of_pending} of the instances were a pending second RayCluster's nodes" if of_pending else ""
        )
        raise CloudError(
            f"{len(result.leftovers)} object(s) left for the cluster are still there ({counts}): {names}{also}",
            f"run `llmctl sweep --cluster {result.sweep.cluster if result.sweep else '...'} --region {result.leftovers[0].region}` "
            "again in a few minutes (AWS deletes ENIs and LBs asynchronously), or delete them in the console",
        )
