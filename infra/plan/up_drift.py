"""`llmctl up`'s word on node drift (:mod:`llmctl.infra.lifecycle.up_drift`): the deployed platform's
Karpenter pools whose running nodes the platform `up` applies replaces, rendered as the offline plan
renders it (:func:`~llmctl.infra.plan.run.run_platform_offline`) and compared as `llmctl plan` compares
it (:func:`~llmctl.infra.plan.deployed.platform_drift`). Handed down to lifecycle, which may not import
this layer, by the `up` command (:func:`up_drift`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from llmctl.errors import EngineError
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine
from llmctl.infra.lifecycle.up_drift import reading
from llmctl.infra.plan.deployed import platform_drift
from llmctl.infra.plan.node_drift import drift_lines
from llmctl.infra.plan.run import plan_view, run_platform_offline


def up_drift_lines(engine: Engine, stack: str, config: Any, stacks: Sequence[tuple[str, str]]) -> list[str]:
    """`up`'s plan lines (:mod:`llmctl.infra.lifecycle.up_drift`): the deployed platform's pools whose
    running nodes the platform `config` (a PlatformConfig), rendered as the offline plan renders it,
    replaces, with the workloads of `stacks` serving on them."""
    try:
        planned = [res.inputs for res in plan_view(run_platform_offline(config))]
    except Exception as exc:  # the program under mocks: any failure is a note of `up`, not its end
        raise EngineError(
            f"the platform {config.stack} did not render offline: {exc}",
            "run `llmctl plan --blueprint NAME` to see the platform's resources",
        ) from exc
    heading = f"platform {PLATFORM_PROJECT}/{stack}: this `up` changes these Karpenter pools"
    return drift_lines(platform_drift(engine, stack, planned, stacks), heading)


def up_drift() -> AbstractContextManager[None]:
    """Within the block, `llmctl up` says the node drift of the platform it applies before it asks."""
    return reading(up_drift_lines)
