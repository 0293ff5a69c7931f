"""Issue 26, item 4: every command's `--help` at 80 columns: whole flag names, no Python type
metavars, an Examples section whose examples use real flags (the generated CLI reference shows the same
examples: test_front_door.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.cli.examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
# What Typer shows for a value when nobody names it: a Python type between angle brackets.
PYTHON_METAVAR = re.compile(r"<(str|bool|int|float|path|list\[|dict|tuple|[a-z0-9.-]+\|)")


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)] if path else []
    for name, sub in (getattr(command, "commands", None) or {}).items():
        found.extend(_commands(sub, (*path, name)))
    return found


COMMANDS = _commands(typer.main.get_command(app))
# Commands that run on their own (a group such as `stacks` only lists its sub-commands).
RUNNABLE = [
    (path, command)
    for path, command in COMMANDS
    if not getattr(command, "commands", None) or getattr(command, "invoke_without_command", False)
]


def test_every_runnable_command_has_examples_and_nothing_else_does() -> None:
    assert sorted(" ".join(path) for path, _ in RUNNABLE) == sorted(EXAMPLES)


@pytest.mark.parametrize("path", [path for path, _ in RUNNABLE], ids=" ".join)
def test_help_at_80_columns(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "…" not in text  # nothing cut off
    assert max(len(line) for line in text.splitlines()) <= 80
    assert not PYTHON_METAVAR.search(text), PYTHON_METAVAR.search(text)
    command = dict(COMMANDS)[path]
    for param in command.params:
        for flag in getattr(param, "opts", []):
            if flag.startswith("--") and not param.hidden:
                assert flag in text, flag
    assert "Examples:" in text
    for example in EXAMPLES[" ".join(path)]:
        assert example in text, example


def test_the_top_level_help_has_no_python_metavars() -> None:
    text = runner.invoke(app, ["--help"], env={"COLUMNS": "80"}).stdout
    assert not PYTHON_METAVAR.search(text) and "…" not in text


def test_choices_are_listed_where_the_value_is_one_of_a_few_words() -> None:
    text = runner.invoke(app, ["size", "--help"], env={"COLUMNS": "80"}).stdout
    assert "One of: bf16, fp16, fp32, int8." in " ".join(text.replace("│", " ").split())
    up = " ".join(
        runner.invoke(app, ["up", "--help"], env={"COLUMNS": "80"}).stdout.replace("│", " ").split()
    )
    assert "TARGET" in up and "eks (an EKS cluster llmctl builds), kubeconfig" in up and "or local" in up


@pytest.mark.parametrize("key", sorted(EXAMPLES))
def test_each_example_uses_flags_its_command_has(key: str) -> None:
    command = dict(COMMANDS)[tuple(key.split())]
    # flags `--help` lists: an example never uses a hidden one (issue 54 item 4: `plan --offline`)
    flags = {flag for param in command.params if not getattr(param, "hidden", False) for flag in param.opts}
    for example in EXAMPLES[key]:
        words = shlex.split(example.split(" > ")[0])
        assert words[: 1 + len(key.split())] == ["llmctl", *key.split()], example
        used = {word.split("=")[0] for word in words if word.startswith("-")}
        assert used <= flags, (example, used - flags)


# ---- tables and plans keep to COLUMNS, piped too -----------------------------------------------------


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_blueprints_list_keeps_every_column_whole_at_80() -> None:
    from llmctl.blueprints.describe import summaries

    result = runner.invoke(app, ["blueprints", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0 and "…" not in result.stdout and _widest(result.stdout) <= 80
    for row in summaries():
        line = next(line for line in result.stdout.splitlines() if line.startswith(row["name"] + " "))
        assert line.split() == [
            row["name"],
            row["runtime"],
            row["instance_type"],
            str(row["tensor_parallel"]),
            f"{row['min_replicas']}-{row['max_replicas']}",
            f"{row['hourly_usd']:.2f}",
        ]


@pytest.mark.parametrize(
    "args", [["plan", "--offline", "-b", "llama2-inf2"], ["catalog", "models"], ["blueprints", "schema"]]
)
def test_piped_output_follows_columns(args: list[str]) -> None:
    narrow = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    assert _widest(narrow.stdout) <= 80 and "…" not in narrow.stdout
    wide = runner.invoke(app, args, env={"COLUMNS": "150"})
    assert _widest(wide.stdout) > 80  # COLUMNS is what decides, not a fixed width


# Groups that only list their sub-commands, and the root: alone, they print their help.
GROUPS = [
    path
    for path, command in COMMANDS
    if getattr(command, "commands", None) and not getattr(command, "invoke_without_command", False)
]


@pytest.mark.parametrize("path", [(), *GROUPS], ids=lambda path: " ".join(("llmctl", *path)))
def test_a_group_alone_prints_its_help_and_exits_0(path: tuple[str, ...]) -> None:
    """Issue 54 item 5: `llmctl` alone (a newcomer's first command) and `llmctl images` alone
    printed "error: Usage: ..." and exited 2 (Click's NoArgsIsHelpError is a usage error)."""
    alone = runner.invoke(app, list(path), env={"COLUMNS": "80"})
    assert alone.exit_code == 0, alone.output
    assert alone.stderr == "" and "error" not in alone.stdout.splitlines()[0]
    assert alone.stdout == runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}).stdout


def test_every_group_is_named_in_the_test_above() -> None:
    assert sorted(" ".join(path) for path in GROUPS) == [
        "blueprints",
        "catalog",
        "images",
        "models",
        "stacks",
    ]
