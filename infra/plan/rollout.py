"""The day-two rules under the name the design gave them (issue 51). They live in
:mod:`llmctl.infra.workload.scheduling.rollout` so that `up` (infra/lifecycle, below infra/plan in the
import contract) can use them too; this module names the same objects."""

from __future__ import annotations

from llmctl.infra.workload.scheduling.rollout import (
    Rollout,
    RolloutKind,
    Strategy,
    cluster_hash,
    extra_nodes,
    predict,
)

__all__ = ["Rollout", "RolloutKind", "Strategy", "cluster_hash", "extra_nodes", "predict"]
