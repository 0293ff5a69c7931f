"""`llmctl plan` against deployed stacks (issue 51): for each blueprint whose workload stack exists
in the backend, what the next `up` does to it (:mod:`llmctl.infra.lifecycle.day_two`). A backend
that cannot be read, or AWS that cannot be asked, is a note: the offline plan stands on its own.

A planned workload whose namespace another workload of the environment already has is refused, as
`up` and `preview` refuse it (`environment.refuse_namespace_clash`; issue 53, finding 6): the plan would
otherwise say `ok` for a workload `up` will not deploy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BadInput, LlmctlError
from llmctl.infra.lifecycle.backend import recorded_stacks, resolve_backend
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, workload_project
from llmctl.infra.lifecycle.environment import (
    Environment,
    record_by_name,
    refuse_namespace_clash,
)
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.names import workload_stack


@dataclass
class Deployed:
    """The day-two plans of the deployed blueprints, and why any was not compared."""

    plans: list[Any] = field(default_factory=list)  # day_two.DayTwo
    notes: list[str] = field(default_factory=list)


def deployed_rollouts(
    blueprints: Sequence[Blueprint],
    *,
    stack: str,
    region: str,
    workload: str | None = None,
    backend: str | None = None,
) -> Deployed:
    """Each deployed blueprint's day-two plan. A local file backend is read from its files first
    (no pulumi CLI for a blueprint that is not deployed); any other backend through the CLI."""
    found = Deployed()
    w_stack = workload_stack(stack, workload)
    recorded = recorded_stacks(backend, stack)
    if recorded is not None:
        pairs = [name.split("/", 1) for name in recorded if "/" in name]
        refuse_clashes(blueprints, w_stack, [(project, name) for project, name in pairs])
    wanted = [
        bp for bp in blueprints if recorded is None or f"{workload_project(bp.name)}/{w_stack}" in recorded
    ]
    if not wanted:
        return found

    try:
        lifecycle = Lifecycle(Engine(resolve_backend(backend)), Progress("quiet"), stack=stack)
        if recorded is None:  # a backend only the pulumi CLI lists
            refuse_clashes(blueprints, w_stack, Environment(lifecycle.engine, stack).stacks())
    except BadInput:  # a clash: the plan fails, as `up` would
        raise
    except LlmctlError as exc:
        found.notes.append(f"not compared with the deployed stacks: {exc.message}")
        return found
    for bp in wanted:
        try:
            plan = lifecycle.day_two(bp, region=region, workload=workload)
        except LlmctlError as exc:
            found.notes.append(f"{bp.name}: not compared with the deployed stack {w_stack}: {exc.message}")
            continue
        if plan is not None:
            found.plans.append(plan)
    return found


def refuse_clashes(blueprints: Sequence[Blueprint], w_stack: str, stacks: Sequence[tuple[str, str]]) -> None:
    """Refuse (BadInput, exit 2) a planned workload (each blueprint as workload stack `w_stack`) whose
    namespace a workload stack of the environment, (project, stack), already has, as `up` would."""
    others = [
        record_by_name(project, name)
        for project, name in stacks
        if project != PLATFORM_PROJECT and project.startswith(workload_project(""))
    ]
    for bp in blueprints:
        refuse_namespace_clash(record_by_name(workload_project(bp.name), w_stack), others)
