"""`llmctl plan` against deployed stacks (issue 51): for each blueprint whose workload stack exists
in the backend, what the next `up` does to it (:mod:`llmctl.infra.lifecycle.day_two`). A backend
that cannot be read, or AWS that cannot be asked, is a note: the offline plan stands on its own.

A planned workload whose namespace another workload of the environment already has is refused, as
`up` and `preview` refuse it (`environment.refuse_namespace_clash`; issue 53, finding 6): the plan would
otherwise say `ok` for a workload `up` will not deploy.

The platform stack's Karpenter objects (NodePools, EC2NodeClasses) are compared with the planned
platform's: a change that makes Karpenter replace a pool's running nodes (drift:
:mod:`llmctl.infra.plan.node_drift`) is said, with the deployed workloads that serve on that pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BadInput, LlmctlError
from llmctl.infra.lifecycle.backend import recorded_stacks, resolve_backend
from llmctl.infra.lifecycle.day_two import deployed_objects, serving_pool
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec, workload_project
from llmctl.infra.lifecycle.environment import (
    Environment,
    record_by_name,
    refuse_namespace_clash,
)
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.names import workload_stack
from llmctl.infra.plan.node_drift import PoolDrift, pool_drift


@dataclass
class Deployed:
    """The day-two plans of the deployed blueprints, and why any was not compared."""

    plans: list[Any] = field(default_factory=list)  # day_two.DayTwo
    notes: list[str] = field(default_factory=list)
    drift: list[PoolDrift] = field(default_factory=list)  # the platform's pools whose nodes change


def deployed_rollouts(
    blueprints: Sequence[Blueprint],
    *,
    stack: str,
    region: str,
    workload: str | None = None,
    backend: str | None = None,
    platform: Sequence[dict[str, Any]] = (),
) -> Deployed:
    """Each deployed blueprint's day-two plan, and the drift of the deployed platform's pools from the
    planned `platform` (its resources' inputs). A local file backend is read from its files first
    (no pulumi CLI for stacks that are not deployed); any other backend through the CLI."""
    found = Deployed()
    w_stack = workload_stack(stack, workload)
    recorded = recorded_stacks(backend, stack)
    pairs: list[tuple[str, str]] = []
    if recorded is not None:
        pairs = [(name.split("/", 1)[0], name.split("/", 1)[1]) for name in recorded if "/" in name]
        refuse_clashes(blueprints, w_stack, pairs)
    wanted = [
        bp for bp in blueprints if recorded is None or f"{workload_project(bp.name)}/{w_stack}" in recorded
    ]
    has_platform = bool(platform) and (recorded is None or f"{PLATFORM_PROJECT}/{stack}" in recorded)
    if not wanted and not has_platform:
        return found

    try:
        lifecycle = Lifecycle(Engine(resolve_backend(backend)), Progress("quiet"), stack=stack)
        if recorded is None:  # a backend only the pulumi CLI lists
            pairs = Environment(lifecycle.engine, stack).stacks()
            refuse_clashes(blueprints, w_stack, pairs)
    except BadInput:  # a clash: the plan fails, as `up` would
        raise
    except LlmctlError as exc:
        found.notes.append(f"not compared with the deployed stacks: {exc.message}")
        return found
    if has_platform:
        try:
            found.drift = platform_drift(lifecycle.engine, stack, platform, pairs)
        except LlmctlError as exc:
            found.notes.append(
                f"the platform: not compared with the deployed stack {PLATFORM_PROJECT}/{stack}: {exc.message}"
            )
    for bp in wanted:
        try:
            plan = lifecycle.day_two(bp, region=region, workload=workload)
        except LlmctlError as exc:
            found.notes.append(f"{bp.name}: not compared with the deployed stack {w_stack}: {exc.message}")
            continue
        if plan is not None:
            found.plans.append(plan)
    return found


def platform_drift(
    engine: Engine, stack: str, planned: Sequence[dict[str, Any]], stacks: Sequence[tuple[str, str]]
) -> list[PoolDrift]:
    """The deployed platform's pools whose running nodes the planned platform replaces, each with the
    deployed workloads (of `stacks`, (project, stack)) whose serving pods select it
    (:func:`~llmctl.infra.lifecycle.day_two.serving_pool`). Pools only one side has are left out: a
    plan of some blueprints does not render the pools only other workloads need."""
    deployed = deployed_objects(engine.state_resources(StackSpec(PLATFORM_PROJECT, stack)))
    drifts = pool_drift(deployed, planned)
    moving = {d.pool: d for d in drifts if d.replaces}
    for project, name in _workload_stacks(stacks) if moving else ():
        pool = serving_pool(deployed_objects(engine.state_resources(StackSpec(project, name))))
        if pool in moving:
            moving[pool].workloads.append(record_by_name(project, name).label())
    return drifts


def refuse_clashes(blueprints: Sequence[Blueprint], w_stack: str, stacks: Sequence[tuple[str, str]]) -> None:
    """Refuse (BadInput, exit 2) a planned workload (each blueprint as workload stack `w_stack`) whose
    namespace a workload stack of the environment, (project, stack), already has, as `up` would."""
    others = [record_by_name(project, name) for project, name in _workload_stacks(stacks)]
    for bp in blueprints:
        refuse_namespace_clash(record_by_name(workload_project(bp.name), w_stack), others)


def _workload_stacks(stacks: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The workload stacks among (project, stack) pairs of an environment."""
    return [
        (project, name)
        for project, name in stacks
        if project != PLATFORM_PROJECT and project.startswith(workload_project(""))
    ]
