"""Helpers of the lifecycle tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress


def lifecycle(progress: Progress | None = None, stack: str = "dev") -> Lifecycle:
    return Lifecycle(Engine(resolve_backend()), progress or Progress("quiet"), stack=stack)


def ready_pod(namespace: str, name: str = "serve-0") -> dict[str, Any]:
    """A Ready pod as the API server reports it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def short(urn: str) -> str:
    """'Type::name' of a URN (the type without its parents)."""
    qualified, name = urn.split("::")[2:4]
    return f"{qualified.split('$')[-1]}::{name}"


class FakePulumi:
    """Controls and reads the older stand-in `pulumi` script (tests/lifecycle/fake_pulumi.py)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls_file = root / "calls.jsonl"
        self.control_file = root / "control.json"
        self.control_file.write_text("{}")

    def control(self, **settings: Any) -> None:
        current = json.loads(self.control_file.read_text())
        current.update(settings)
        self.control_file.write_text(json.dumps(current))

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line.strip()]

    def ops(self) -> list[tuple[str, str, str]]:
        return [
            (call["op"], call["project"], call["stack"])
            for call in self.calls()
            if call.get("op") in ("up", "preview", "destroy", "cancel", "stack rm")
        ]
