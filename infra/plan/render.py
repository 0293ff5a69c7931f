"""`llmctl plan diff` as text (a terminal) or markdown (a pull-request comment)."""

from __future__ import annotations

import html
import json
from typing import Any

from llmctl.infra.plan.diff import InputChange, PlanDiff, ResourceChange
from llmctl.infra.plan.node_drift import drift_lines

_SIGN = {"add": "+", "remove": "-", "change": "~"}
_WORD = {"add": "added", "remove": "removed", "change": "changed"}
# GitHub refuses comments over 65,536 characters: stop adding details well before that.
MARKDOWN_LIMIT = 60_000
VALUE_WIDTH = 100
_FULL = "run `llmctl plan diff OLD.json NEW.json` for the full list"
DRIFT_HEADING = "node drift: what Karpenter does to the running nodes of the changed pools"


def _value(value: Any, width: int = VALUE_WIDTH) -> str:
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= width else text[: width - 3] + "..."


def _change_text(item: InputChange) -> tuple[str, str]:
    old = "(absent)" if item.change == "added" else _value(item.old)
    new = "(absent)" if item.change == "removed" else _value(item.new)
    return old, new


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _delta(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f}"


def summary_line(diff: PlanDiff) -> str:
    """'N added, N removed, N changed' (or 'no changes')."""
    if not diff.changed:
        return "no changes"
    return ", ".join(f"{len(diff.of(action))} {_WORD[action]}" for action in ("add", "remove", "change"))


def cost_line(diff: PlanDiff) -> str:
    """The total hourly cost before and after, and the difference."""
    cost = diff.cost
    return f"{_money(cost.before)} -> {_money(cost.after)} per hour ({_delta(cost.delta)})"


def _version_note(diff: PlanDiff) -> str | None:
    old, new = diff.versions
    return None if old == new else f"plans written by different llmctl versions: {old} (old), {new} (new)"


def render_text(diff: PlanDiff) -> str:
    """The diff for a terminal: per stack, + added, - removed, ~ changed with its input paths."""
    lines = [f"plan diff: {summary_line(diff)}"]
    note = _version_note(diff)
    if note:
        lines.append(note)
    lines += diff.notes()
    for stack in diff.stacks():
        state = " (new stack)" if stack in diff.stacks_added else ""
        state = " (stack removed)" if stack in diff.stacks_removed else state
        lines.append(f"{stack}{state}")
        for res in (r for r in diff.resources if r.stack == stack):
            lines.append(f"  {_SIGN[res.action]} {res.type} {res.name}")
            for item in res.inputs:
                old, new = _change_text(item)
                lines.append(f"      {item.path}: {old} -> {new}")
    lines += drift_lines(diff.drift, DRIFT_HEADING)
    for v in diff.violations_added:
        lines.append(f"policy: new {v['severity']} [{v['rule']}] {v['resource']}: {v['message']}")
    for v in diff.violations_removed:
        lines.append(f"policy: resolved [{v['rule']}] {v['resource']}")
    lines.append(f"cost: {cost_line(diff)}")
    for part, (old_cost, new_cost) in diff.cost.parts.items():
        if old_cost != new_cost:
            lines.append(f"  {part}: {_money(old_cost)} -> {_money(new_cost)}")
    return "\n".join(lines) + "\n"


def _md_code(text: str) -> str:
    return f"<code>{html.escape(text).replace('|', '&#124;')}</code>"


def _md_resource(res: ResourceChange) -> list[str]:
    lines = [f"{_SIGN[res.action]} {_md_code(res.type)} **{html.escape(res.name)}**"]
    if res.inputs:
        lines += ["", "| input | old | new |", "|---|---|---|"]
        for item in res.inputs:
            old, new = _change_text(item)
            lines.append(f"| {_md_code(item.path)} | {_md_code(old)} | {_md_code(new)} |")
    lines.append("")
    return lines


def _md_stack(diff: PlanDiff, stack: str, budget: int) -> str:
    """One collapsible section; resources that do not fit in `budget` characters are counted."""
    rows = [r for r in diff.resources if r.stack == stack]
    counts = ", ".join(
        f"{sum(r.action == action for r in rows)} {_WORD[action]}" for action in ("add", "remove", "change")
    )
    body = [f"<details><summary><code>{html.escape(stack)}</code>: {counts}</summary>", ""]
    used = len(body[0])
    for index, res in enumerate(rows):
        lines = _md_resource(res)
        size = sum(len(line) + 1 for line in lines)
        if used + size > budget:
            body += [f"_{len(rows) - index} more resource(s) left out to fit a comment: {_FULL}_", ""]
            break
        body += lines
        used += size
    body += ["</details>", ""]
    return "\n".join(body)


def render_markdown(diff: PlanDiff) -> str:
    """The diff as a pull-request comment: summary, cost table, one collapsible section per stack."""
    cost = diff.cost
    out = ["### llmctl plan diff", ""]
    note = _version_note(diff)
    if note:
        out += [f"> {note}", ""]
    out += [line for item in diff.notes() for line in (f"> {item}", "")]
    if not diff.changed:
        out += [
            f"No changes: {diff.resource_counts[1]} resources, {_money(cost.after)} per hour.",
            "",
        ]
        return "\n".join(out)
    out += [
        f"**{summary_line(diff)}** · cost **{_money(cost.before)} → {_money(cost.after)}** per hour "
        f"({_delta(cost.delta)})",
        "",
        "| stack | added | removed | changed |",
        "|---|---:|---:|---:|",
    ]
    for stack in diff.stacks():
        rows = [r for r in diff.resources if r.stack == stack]
        counts = " | ".join(str(sum(r.action == a for r in rows)) for a in ("add", "remove", "change"))
        out.append(f"| {_md_code(stack)} | {counts} |")
    out += ["", "| cost per hour | before | after |", "|---|---:|---:|"]
    for part, (old_cost, new_cost) in diff.cost.parts.items():
        out.append(f"| {html.escape(part)} | {_money(old_cost)} | {_money(new_cost)} |")
    out += [f"| **total** | **{_money(cost.before)}** | **{_money(cost.after)}** |", ""]
    if diff.violations_added or diff.violations_removed:
        for v in diff.violations_added:
            out.append(
                f"- policy: new {v['severity']} `{v['rule']}` on {_md_code(str(v['resource']))}: "
                f"{html.escape(str(v['message']))}"
            )
        for v in diff.violations_removed:
            out.append(f"- policy: resolved `{v['rule']}` on {_md_code(str(v['resource']))}")
        out.append("")
    drift = drift_lines(diff.drift, f"**{DRIFT_HEADING}**")
    out += (
        [drift[0], "", *(f"- {html.escape(line.strip(), quote=False)}" for line in drift[1:]), ""]
        if drift
        else []
    )
    text = "\n".join(out)
    for stack in diff.stacks():
        budget = MARKDOWN_LIMIT - len(text) - 400
        if budget <= 0:
            text += f"\n_more stacks left out to fit a comment: {_FULL}_\n"
            break
        text += "\n" + _md_stack(diff, stack, budget)
    return text
