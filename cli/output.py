"""Presentation helpers shared by every command: consoles, JSON output and error rendering."""

from __future__ import annotations

import json
import math
import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from llmctl.errors import BadInput, LlmctlError

if TYPE_CHECKING:
    from rich.console import Console

    console: Console
    err_console: Console


def __getattr__(name: str) -> Console:
    """`output.console` (stdout) and `output.err_console` (stderr), made on first use: Rich costs
    about 100 ms to import, which `llmctl --help` and the usage errors never pay."""
    if name not in ("console", "err_console"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console  # heavy: kept off the start-up path

    stream = sys.stderr if name == "err_console" else sys.stdout
    # Piped output keeps whole table cells (a terminal uses its own width); scripts should use --json.
    made = Console(
        stderr=stream is sys.stderr, highlight=False, width=None if stream.isatty() else _piped_width()
    )
    globals()[name] = made
    return made


def _made(name: str) -> Console:
    """A console from inside this module (a bare name here does not reach `__getattr__`); one a test
    put in place with monkeypatch is the one used."""
    existing: Console | None = globals().get(name)
    return existing if existing is not None else __getattr__(name)


def _out() -> Console:
    return _made("console")


def _err() -> Console:
    return _made("err_console")


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
    the terminal, or COLUMNS for piped output. A console not made yet takes it when it is made, so
    a run that prints only JSON (`llmctl bench --json`) never imports Rich."""
    mode.json = json_output
    for name, stream in (("console", sys.stdout), ("err_console", sys.stderr)):
        made: Console | None = globals().get(name)
        if made is not None and not stream.isatty():
            made.width = _piped_width()


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
    from rich.markup import escape

    # Messages quote user input (names, paths, flags like `[ms|s]`): never read them as markup.
    err_console = _err()
    err_console.print(f"[bold red]error:[/] {escape(error.message)}", soft_wrap=True)
    lines = getattr(error, "lines", {})
    for path, problem in getattr(error, "problems", []):
        at = f" (line {lines[path]})" if path in lines else ""
        err_console.print(f"  [red]•[/] [bold]{escape(path)}[/]{at}: {escape(problem)}", soft_wrap=True)
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
            data["problems"] = [{"path": p, "message": m, "line": lines.get(p)} for p, m in problems]
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
        _err().print(f"  • {item}", markup=False)
    return typer.confirm(question, default=False, err=True)
