"""Presentation helpers shared by every command: consoles, JSON output and error rendering."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from llmctl.errors import LlmctlError, UserAbort

# Piped output keeps whole table cells (a terminal uses its own width); scripts should use --json.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


class _Mode:
    """Whether the running command was asked for `--json` (so errors are JSON too)."""

    json = False


mode = _Mode()


def start(*, json_output: bool = False) -> None:
    """Called first by every command that prints: records the output mode."""
    mode.json = json_output


def emit_json(data: Any) -> None:
    """Write one JSON document to stdout (stable keys, no Rich markup)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def render_error(error: LlmctlError) -> None:
    """One red line plus the hint on stderr; with `--json` also the error as JSON on stdout."""
    err_console.print(f"[bold red]error:[/] {error.message}", soft_wrap=True)
    for path, problem in getattr(error, "problems", []):
        err_console.print(f"  [red]•[/] [bold]{path}[/]: {problem}", soft_wrap=True)
    if error.hint:
        err_console.print(f"[yellow]hint:[/] {error.hint}", soft_wrap=True)
    if mode.json:
        data: dict[str, Any] = dict(error.to_dict())
        problems = getattr(error, "problems", [])
        if problems:
            data["problems"] = [{"path": p, "message": m} for p, m in problems]
        emit_json(data)


def confirm(question: str, items: list[str], *, yes: bool) -> bool:
    """Ask before a destructive or costly step; refuse to ask when stdin is not a terminal."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UserAbort(
            "confirmation needed but stdin is not a terminal", "re-run with --yes to proceed without asking"
        )
    for item in items:
        err_console.print(f"  • {item}", markup=False)
    return typer.confirm(question, default=False, err=True)
