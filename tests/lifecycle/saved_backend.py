"""What a Pulumi backend holds, answered in memory: the fast unit tests of the decision modules
(environment union, `stacks gc`, teardown) read stacks through it instead of the stand-in engine.

It has the read side of `llmctl.infra.lifecycle.engine.Engine` (`list_stacks`, `outputs`, `config`,
`state_resources`) and a `destroy` that records its call and removes the stack. The Engine itself,
which turns these into `pulumi` commands, is tested through the stand-in engine
(tests/lifecycle/test_engine.py and the CLI scenarios); here only the decisions on top of it are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from llmctl.errors import EngineError
from llmctl.infra.lifecycle.engine import StackInfo, StackSpec


@dataclass
class SavedBackend:
    """Stacks with their outputs, config and saved resources; the calls that changed something."""

    infos: list[StackInfo] = field(default_factory=list)
    saved_outputs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    saved_config: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    saved_state: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    destroyed: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # the errors the next destroys of a stack fail with, one per destroy
    fail_destroy: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    reads: list[tuple[str, str, str]] = field(default_factory=list)

    def add(
        self,
        project: str,
        stack: str,
        *,
        last_update: datetime | None = datetime(2026, 1, 1),
        resources: int | None = 3,
        in_progress: bool = False,
        outputs: dict[str, Any] | None = None,
        config: dict[str, str] | None = None,
        state: list[dict[str, Any]] | None = None,
    ) -> StackInfo:
        info = StackInfo(project, stack, last_update, resources, in_progress)
        self.infos.append(info)
        if outputs is not None:
            self.saved_outputs[(project, stack)] = outputs
        if config is not None:
            self.saved_config[(project, stack)] = config
        if state is not None:
            self.saved_state[(project, stack)] = state
        return info

    def list_stacks(self) -> list[StackInfo]:
        return list(self.infos)

    def outputs(self, spec: StackSpec) -> dict[str, Any] | None:
        self.reads.append(("outputs", spec.project, spec.stack))
        return self.saved_outputs.get((spec.project, spec.stack))

    def config(self, spec: StackSpec) -> dict[str, str]:
        self.reads.append(("config", spec.project, spec.stack))
        return dict(self.saved_config.get((spec.project, spec.stack), {}))

    def state_resources(self, spec: StackSpec) -> list[dict[str, Any]]:
        return list(self.saved_state.get((spec.project, spec.stack), []))

    def destroy(self, spec: StackSpec, on_event: Any = None, *, remove: bool = False) -> bool:
        key = (spec.project, spec.stack)
        if self.fail_destroy.get(key):
            raise EngineError(self.fail_destroy[key].pop(0), None)
        self.destroyed.append((spec.project, spec.stack, dict(spec.env)))
        if remove:
            self.infos = [i for i in self.infos if (i.project, i.stack) != key]
        return True
