"""What `llmctl up`, `preview` and `down --blueprint` say, before they change anything, about the
running nodes of the deployed platform's Karpenter pools that the platform they apply replaces
(drift), as `llmctl plan` says it.

The comparison (the offline renderer of the platform program, :mod:`llmctl.infra.plan.node_drift`)
lives in infra.plan, a layer above this one: the command hands it down as a parameter, a
:data:`DriftReader` (:func:`llmctl.infra.plan.drift_reader.read_drift`), through its target to
:class:`~llmctl.infra.lifecycle.orchestrate.Lifecycle`. Without one, nothing is said. Nothing is read
when the platform stack does not exist yet (a first `up`); a platform state that cannot be read or
rendered is a note, never an error."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine
from llmctl.infra.lifecycle.environment import Environment

# (engine, stack, the platform config applied, the workload stacks serving on it after the change as
# (project, stack), the heading) -> the plan's lines
DriftReader = Callable[[Engine, str, Any, Sequence[tuple[str, str]], str], list[str]]


def drift_heading(stack: str, command: str) -> str:
    """'platform llmctl-platform/dev: this `down` changes these Karpenter pools'."""
    return f"platform {PLATFORM_PROJECT}/{stack}: this `{command}` changes these Karpenter pools"


def drift_notes(
    reader: DriftReader | None,
    engine: Engine,
    stack: str,
    config: Any,
    *,
    command: str = "up",
    stacks: Sequence[tuple[str, str]] | None = None,
) -> list[str]:
    """The plan's lines on the pools whose running nodes the platform `config` replaces, with the
    workloads of `stacks` (default: every workload stack of the environment) serving on them; []
    without a reader or a deployed platform stack."""
    if reader is None:
        return []
    try:
        deployed = any(i.project == PLATFORM_PROJECT and i.stack == stack for i in engine.list_stacks())
        if not deployed:
            return []
        serving = Environment(engine, stack).stacks() if stacks is None else stacks
        return reader(engine, stack, config, serving, drift_heading(stack, command))
    except LlmctlError as exc:
        return [
            f"the platform: not compared with the deployed stack {PLATFORM_PROJECT}/{stack}: {exc.message}"
        ]
