"""What `llmctl up` says, before it asks, about the running nodes of the deployed platform's Karpenter
pools that the platform it is about to apply replaces (drift), as `llmctl plan` says it.

The comparison (the offline renderer of the platform program, :mod:`llmctl.infra.plan.node_drift`)
lives in infra.plan, a layer above this one: it is handed in (:func:`reading`) by
:mod:`llmctl.infra.plan.deployed`, for the `up` command's run. Without it, `up` says nothing.
Nothing is read when the platform stack does not exist yet (a first `up`); a platform state that
cannot be read or rendered is a note, never an error."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine
from llmctl.infra.lifecycle.environment import Environment

# (engine, stack, the platform config `up` applies, the environment's workload stacks) -> plan lines
DriftLines = Callable[[Engine, str, Any, Sequence[tuple[str, str]]], list[str]]
_READERS: list[DriftLines] = []


@contextlib.contextmanager
def reading(reader: DriftLines) -> Iterator[None]:
    """Within the block, `up` calls this drift reader (then the one before it, if any, again)."""
    before = list(_READERS)
    _READERS[:] = [reader]
    try:
        yield
    finally:
        _READERS[:] = before


def drift_notes(engine: Engine, stack: str, config: Any) -> list[str]:
    """The plan's lines on the pools whose running nodes the platform `config` replaces, with the
    deployed workloads serving on them; [] without a reader or a deployed platform stack."""
    if not _READERS:
        return []
    try:
        deployed = any(i.project == PLATFORM_PROJECT and i.stack == stack for i in engine.list_stacks())
        if not deployed:
            return []
        return _READERS[0](engine, stack, config, Environment(engine, stack).stacks())
    except LlmctlError as exc:
        return [
            f"the platform: not compared with the deployed stack {PLATFORM_PROJECT}/{stack}: {exc.message}"
        ]
