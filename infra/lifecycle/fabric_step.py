"""`up`'s fabric preflight step: the workload update of a replica over several nodes, judged by the
preflight Job's run (docs/fabric.md, "Wiring").

The Job is rendered ahead of the RayService (`builders/preflight.py`, `preflight_hook`) and is its
prerequisite: a probe that judged a fallback exits 3, the Job fails, and so does the update, before
the model's objects are applied. Pulumi then says only that the Job failed; this step reads node 0's
log first, so `up` stops with the FabricError that names the figure, the expectation, the transport
and what to check. After a successful update it reads the same log for the line `up` prints and the
figure `up --json` carries.

What the log cannot decide is left to the update's own error: no node-0 pod (the update failed before
the Job ran), a log kubectl cannot give (a pod that never started: the launch watch says why), or a
verdict that passed (the update failed elsewhere, after the Job). A successful update whose Job's pods
are gone (unchanged since an earlier `up`, its pods deleted by its TTL) was not measured this time:
said, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.errors import FabricError, LlmctlError
from llmctl.infra.lifecycle.fabric import FabricVerdict, check_preflight, node0_log
from llmctl.infra.workload.builders.preflight import FabricSpec, replica_spec
from llmctl.infra.workload.config import WorkloadConfig

__all__ = ["FabricStep", "fabric_step"]


@dataclass(frozen=True)
class FabricStep:
    """The preflight of one workload's update: the spec its Job was rendered from and the kubeconfig
    that reads the Job's pods."""

    spec: FabricSpec
    kubeconfig: Path

    def run(
        self, update: Callable[[], dict[str, Any]], note: Callable[[str], None]
    ) -> tuple[dict[str, Any], FabricVerdict | None]:
        """The update's outputs and the verdict on the Job's run (None when not measured this time);
        the FabricError of a failed verdict in place of the update's own error."""
        try:
            outputs = update()
        except LlmctlError as failed:
            stop = self._failed_verdict(note)
            if stop is not None:
                raise stop from failed
            raise
        try:
            log = node0_log(self.kubeconfig, self.spec.namespace)
        except LlmctlError as exc:
            note(f"fabric preflight: not measured this time ({exc.message})")
            return outputs, None
        verdict = check_preflight(log, self.spec)  # the Job passed: a failed verdict here is a stale log
        note(verdict.line())
        hint = verdict.hint()
        if hint:
            note(f"fabric preflight: {hint}")
        return outputs, verdict

    def _failed_verdict(self, note: Callable[[str], None]) -> FabricError | None:
        """The FabricError of node 0's log when it holds a failed verdict; None when the update's own
        error says more (no node-0 pod or log, or a verdict that passed: said)."""
        try:
            log = node0_log(self.kubeconfig, self.spec.namespace)
        except LlmctlError:
            return None  # the Job never ran, or its pod never started
        try:
            verdict = check_preflight(log, self.spec)
        except FabricError as stop:
            return stop
        note(verdict.line())
        return None


def fabric_step(config: WorkloadConfig, kubeconfig: Path | None) -> FabricStep | None:
    """The step for a workload whose replica spans nodes, given a kubeconfig to read its pods."""
    spec = replica_spec(config)
    if spec is None or kubeconfig is None:
        return None
    return FabricStep(spec, kubeconfig)
