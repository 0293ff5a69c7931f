"""Shared CLI options: declared once in cli/options.py, one help text per flag across commands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmctl.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("--json", "--stack", "--yes", "--target", "--backend", "--dry-run", "--hf-token-file", "--progress")


def _commands(command: Any, path: str = "llmctl") -> list[tuple[str, Any]]:
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, f"{path} {name}")
    return found


def test_shared_flags_are_declared_only_in_options() -> None:
    for flag in SHARED:
        files = sorted(
            p.name for p in (ROOT / "cli").glob("*.py") if f'"{flag}"' in p.read_text(encoding="utf-8")
        )
        assert files == ["options.py"], (flag, files)


def test_each_shared_flag_has_one_help_text() -> None:
    helps: dict[str, set[str]] = {flag: set() for flag in SHARED}
    users: dict[str, list[str]] = {flag: [] for flag in SHARED}
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            for flag in SHARED:
                if flag in getattr(param, "opts", []):
                    helps[flag].add(str(getattr(param, "help", "")))
                    users[flag].append(path)
    assert len(users["--json"]) >= 20 and "llmctl chat" in users["--json"]
    assert {flag: len(texts) for flag, texts in helps.items()} == dict.fromkeys(SHARED, 1)
