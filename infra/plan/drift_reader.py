"""The word of `llmctl up`, `preview` and `down --blueprint` on node drift
(:mod:`llmctl.infra.lifecycle.drift_notes`): the deployed platform's Karpenter pools whose running
nodes the platform they apply replaces, rendered as the offline plan renders it
(:func:`~llmctl.infra.plan.run.run_platform_offline`) and compared as `llmctl plan` compares it
(:func:`~llmctl.infra.plan.deployed.platform_drift`). Lifecycle may not import this layer: the
commands hand :func:`read_drift` down to it (a ``drift`` parameter of the targets' operations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmctl.errors import EngineError
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.plan.deployed import platform_drift
from llmctl.infra.plan.node_drift import drift_lines
from llmctl.infra.plan.run import plan_view, run_platform_offline


def read_drift(
    engine: Engine, stack: str, config: Any, stacks: Sequence[tuple[str, str]], heading: str
) -> list[str]:
    """A :data:`~llmctl.infra.lifecycle.drift_notes.DriftReader`: under `heading`, the deployed
    platform's pools whose running nodes the platform `config` (a PlatformConfig), rendered as the
    offline plan renders it, replaces, with the workloads of `stacks` serving on them."""
    try:
        planned = [res.inputs for res in plan_view(run_platform_offline(config))]
    except Exception as exc:  # the program under mocks: any failure is a note of the command, not its end
        raise EngineError(
            f"the platform {config.stack} did not render offline: {exc}",
            "run `llmctl plan --blueprint NAME` to see the platform's resources",
        ) from exc
    return drift_lines(platform_drift(engine, stack, planned, stacks), heading)
