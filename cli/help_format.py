"""`--help` as plain text, grouped in the same panels the commands declare (`rich_help_panel`).

Rich-rendered help costs Rich's import and layout on every `--help` (about 130 ms of the 250 ms
start-up budget); Click's own formatter costs nothing extra. This module keeps what the panels gave
the reader, sections by purpose, in Click's plain layout: one section per panel, in the order the
panels first appear, arguments and the general options first.
"""

from __future__ import annotations

from typing import Any

ARGUMENTS = "Arguments"
OPTIONS = "Options"
COMMANDS = "Commands"


def _sections(
    default_first: tuple[str, ...], rows: list[tuple[str, tuple[str, str]]]
) -> dict[str, list[tuple[str, str]]]:
    """Rows grouped by section: the default sections first (when they have rows), then the others in
    the order they first appear."""
    grouped: dict[str, list[tuple[str, str]]] = {name: [] for name in default_first}
    for section, row in rows:
        grouped.setdefault(section, []).append(row)
    return {name: items for name, items in grouped.items() if items}


def param_rows(command: Any, ctx: Any) -> dict[str, list[tuple[str, str]]]:
    """A command's arguments and options by section: (flags and value, help) rows."""
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        default = ARGUMENTS if param.param_type_name == "argument" else OPTIONS
        rows.append((getattr(param, "rich_help_panel", None) or default, record))
    return _sections((ARGUMENTS, OPTIONS), rows)


def summary(command: Any) -> str:
    """A sub-command's line in its group's help: its short help, else the first paragraph of its
    help, whole (the definition list wraps it; Click's own would cut it at a width or at "e.g.")."""
    text = command.short_help or command.help or ""
    return " ".join(text.strip().split("\n\n")[0].split())


def command_rows(group: Any, ctx: Any) -> dict[str, list[tuple[str, str]]]:
    """A group's visible sub-commands by section, in registration order: (name, summary) rows."""
    rows = [
        (getattr(sub, "rich_help_panel", None) or COMMANDS, (name, summary(sub)))
        for name in group.list_commands(ctx)
        if (sub := group.get_command(ctx, name)) is not None and not sub.hidden
    ]
    return _sections((COMMANDS,), rows)


def format_sections(command: Any, ctx: Any, formatter: Any) -> None:
    """Click's `format_options` for every llmctl command: options, then sub-commands, by panel."""
    sections = param_rows(command, ctx)
    if getattr(command, "commands", None):
        sections.update(command_rows(command, ctx))
    for title, rows in sections.items():
        with formatter.section(title):
            formatter.write_dl(rows)


def keep_lines(title: str, lines: list[str]) -> str:
    """An epilog section whose lines Click must not re-wrap (the `\\b` marker), e.g. examples."""
    return f"{title}\n\n\b\n" + "\n".join(lines)
