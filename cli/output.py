"""Presentation helpers shared by every command: consoles, JSON output and error rendering."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from llmctl.errors import BadInput, LlmctlError

# Piped output keeps whole table cells (a terminal uses its own width); scripts should use --json.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)


class _Mode:
    """Whether the running command was asked for `--json` (so errors are JSON too)."""

    json = False


mode = _Mode()


def _piped_width() -> int:
    """Piped output: COLUMNS when set (e.g. COLUMNS=80 for a log that keeps to 80), else 160."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 40 else 160


def fits_width() -> bool:
    """Whether long lines should wrap at the console's width: on a terminal, or when COLUMNS is set."""
    return sys.stdout.isatty() or bool(os.environ.get("COLUMNS"))


def start(*, json_output: bool = False) -> None:
    """Called first by every command that prints: records the output mode and takes the width of
    the terminal, or COLUMNS for piped output."""
    mode.json = json_output
    if not sys.stdout.isatty():
        console.width = _piped_width()
    if not sys.stderr.isatty():
        err_console.width = _piped_width()


def _finite(value: Any) -> Any:
    """NaN and infinities become null: strict JSON has no literal for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def emit_json(data: Any) -> None:
    """Write one strict JSON document to stdout (stable keys, no Rich markup, no NaN)."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def render_error(error: LlmctlError) -> None:
    """One red line plus the hint on stderr; with `--json` also the error as JSON on stdout."""
    # Messages quote user input (names, paths, flags like `[ms|s]`): never read them as markup.
    err_console.print(f"[bold red]error:[/] {escape(error.message)}", soft_wrap=True)
    for path, problem in getattr(error, "problems", []):
        err_console.print(f"  [red]•[/] [bold]{escape(path)}[/]: {escape(problem)}", soft_wrap=True)
    for what, fix in getattr(error, "fixes", []):
        err_console.print(f"  [red]•[/] {escape(what)}", soft_wrap=True)
        if fix:
            err_console.print(f"    [yellow]fix:[/] {escape(fix)}", soft_wrap=True)
    if error.hint:
        err_console.print(f"[yellow]hint:[/] {escape(error.hint)}", soft_wrap=True)
    if mode.json:
        data: dict[str, Any] = dict(error.to_dict())
        problems = getattr(error, "problems", [])
        if problems:
            data["problems"] = [{"path": p, "message": m} for p, m in problems]
        fixes = getattr(error, "fixes", [])
        if fixes:
            data["missing"] = [{"message": m, "fix": f} for m, f in fixes]
        emit_json(data)


def confirm(question: str, items: list[str], *, yes: bool) -> bool:
    """Ask before a destructive or costly step; refuse to ask when stdin is not a terminal."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise BadInput(
            "confirmation needed but stdin is not a terminal", "re-run with --yes to proceed without asking"
        )
    for item in items:
        err_console.print(f"  • {item}", markup=False)
    return typer.confirm(question, default=False, err=True)
