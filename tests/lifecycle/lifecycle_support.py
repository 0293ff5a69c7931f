"""Helpers of the lifecycle tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class FakePulumi:
    """Controls and reads the stand-in `pulumi` script (tests/lifecycle/fake_pulumi.py)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls_file = root / "calls.jsonl"
        self.control_file = root / "control.json"
        self.control_file.write_text("{}")

    def control(self, **settings: Any) -> None:
        """Tell the stand-in what to do: fail_up=[project], lock=[project], outputs={project: {...}}."""
        current = json.loads(self.control_file.read_text())
        current.update(settings)
        self.control_file.write_text(json.dumps(current))

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines() if line.strip()]

    def ops(self) -> list[tuple[str, str, str]]:
        """(operation, project, stack) of every up/preview/destroy, in order."""
        return [
            (call["op"], call["project"], call["stack"])
            for call in self.calls()
            if call.get("op") in ("up", "preview", "destroy", "cancel", "stack rm")
        ]
