"""The root `llmctl` command: global options, sub-command registration and the error boundary.

Command modules import only Typer at module level; everything heavy (pydantic models, pulumi,
boto3, ray) is imported inside the command function, so `llmctl --help` stays fast.
"""

from __future__ import annotations

import gc
import os
import traceback
from functools import partial
from typing import Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

import llmctl
from llmctl.cli import bench as bench_cmd
from llmctl.cli import blueprints as blueprints_cmd
from llmctl.cli import catalog as catalog_cmd
from llmctl.cli import chat as chat_cmd
from llmctl.cli import doctor as doctor_cmd
from llmctl.cli import help_format, options, output
from llmctl.cli import images as images_cmd
from llmctl.cli import lifecycle as lifecycle_cmd
from llmctl.cli import models as models_cmd
from llmctl.cli import plan as plan_cmd
from llmctl.cli import render as render_cmd
from llmctl.cli import sizing as sizing_cmd
from llmctl.cli import stacks as stacks_cmd
from llmctl.cli import sweep as sweep_cmd
from llmctl.cli import validate as validate_cmd
from llmctl.errors import EXIT_CODES, LlmctlError, UserAbort


def _metavar(param: Any) -> str | None:
    """What `--help` shows for an option's value: the choices, or a word for what it is (never a
    Python type such as <str> or <list[str]>); nothing for an on/off flag."""
    long = max(param.opts, key=len)
    if long in options.CHOICES:
        return options.CHOICES[long]
    kind = param.type_descriptor
    if kind.is_choice:  # a short word; the choices go into the help text, which wraps (_list_choices)
        return "CHOICE"
    name = param.bare_type().removeprefix("list[").removesuffix("]").lower()
    if param.is_flag or name == "bool":
        return ""
    if kind.is_path or name in ("path", "pathlib.path"):
        return "PATH"
    if name == "int":
        return "N"
    if name == "float":
        return "X"
    return options.WORDS.get(long, "TEXT")


def _list_choices(param: Any) -> None:
    """A choice option's help ends with its choices (the metavar column is too narrow for them)."""
    kind = param.type_descriptor
    if not kind.is_choice:
        return
    words = [str(getattr(choice, "value", choice)) for choice in kind.choices or ()]
    if words and not all(word in (param.help or "") for word in words):
        param.help = f"{param.help or ''} One of: {', '.join(words)}.".strip()


def _quiet_help_option(command: Any) -> None:
    """`--help` is an on/off flag too: no <bool> beside it (the option is made when help runs)."""
    make = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = make(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option


def tidy_help(command: Any, path: str = "") -> None:
    """Every command below `command`: metavars in words and choices (`_metavar`), options and
    sub-commands by panel in plain text (`help_format`), and the Examples section of
    `cli/examples.py` as its epilog."""
    from typer.core import TyperArgument, TyperOption

    from llmctl.cli.examples import examples_epilog

    for param in command.params:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = _metavar(param)
            _list_choices(param)
        elif isinstance(param, TyperArgument):  # its name says what it is: no <str> beside it
            setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010 (an instance's method)
    if path:
        command.epilog = examples_epilog(path) or command.epilog
    _quiet_help_option(command)
    command.format_options = partial(help_format.format_sections, command)
    for name, sub in (getattr(command, "commands", None) or {}).items():
        tidy_help(sub, f"{path} {name}".strip())


class LlmctlGroup(TyperGroup):
    """The one error boundary: an LlmctlError becomes a red line, a hint and a non-zero exit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tidy_help(self)

    def get_params(self, ctx: Any) -> list[Any]:
        """The root's own options, the shell-completion ones Typer adds included, without <bool>."""
        from typer.core import TyperOption

        params = list(super().get_params(ctx))
        for param in params:
            if isinstance(param, TyperOption) and param.metavar is None:
                param.metavar = _metavar(param)
        return params

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        """A bad root flag (`llmctl --bogus`) is a usage error in the same one-line shape."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except NoArgsIsHelpError as error:
            show_help(error)
        except UsageError as error:
            show_usage_error(error, options.JSON_FLAG in args)
            raise typer.Exit(UsageError.exit_code) from None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """`--debug` is a root flag that works anywhere on the line (`llmctl up ... --debug` too)."""
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[1:end]:
            rest = [arg for arg in args[:end] if arg != "--debug"]
            args = ["--debug", *rest, *args[end:]]
        return list(super().parse_args(ctx, args))

    def invoke(self, ctx: Any) -> Any:
        output.mode.json = False
        debug = bool(ctx.params.get("debug")) or os.environ.get("LLMCTL_DEBUG") == "1"
        words = [*getattr(ctx, "_protected_args", []), *ctx.args]  # emptied by Click's invoke below
        wants_json = options.JSON_FLAG in words
        try:
            return super().invoke(ctx)
        except LlmctlError as error:
            if error.exit_code == 0:  # a declined confirmation: said plainly, not an error
                output.err_console.print(error.message, markup=False)
                raise typer.Exit(0) from None
            if debug:
                output.err_console.print(traceback.format_exc(), markup=False)
            output.render_error(error)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            output.render_error(UserAbort("interrupted", interrupted_hint(words)))
            raise typer.Exit(UserAbort.exit_code) from None
        except NoArgsIsHelpError as error:
            show_help(error)
        except UsageError as error:
            # Bad flags: one line and a hint, like every other error (exit 2, bad input); a --json
            # caller gets the same as JSON on stdout too.
            show_usage_error(error, wants_json, words[0] if words and words[0] in self.commands else None)
            raise typer.Exit(UsageError.exit_code) from None


# The commands that change something (a stack, a server, a file, an image): interrupted, they are
# run again to finish what they began. Every other command only reads.
CHANGING = frozenset({"up", "down", "sweep", "stacks gc", "images build", "catalog refresh", "models tiny"})


def interrupted_hint(words: list[str]) -> str:
    """What to do after Ctrl-C: run a changing command again to resume; a reading one changed nothing."""
    command = " ".join(word for word in words[:2] if not word.startswith("-"))
    changing = command in CHANGING or command.split(" ")[0] in CHANGING
    return "run the command again to resume" if changing else "nothing was changed"


def show_help(asked: NoArgsIsHelpError) -> NoReturn:
    """`llmctl` alone, or a group alone (`llmctl images`): its help on stdout and exit 0. Click
    raises NoArgsIsHelpError for `no_args_is_help`, a usage error (exit 2), which greeted a
    newcomer's first command with "error: Usage: ..." (issue 54 item 5)."""
    typer.echo(asked.ctx.get_help() if asked.ctx else asked.format_message())
    raise typer.Exit(0)


def show_usage_error(error: UsageError, wants_json: bool, command_name: str | None = None) -> None:
    """A usage error (unknown flag, missing or bad value) as one line plus a hint on stderr, in the
    shape of every other error (not Click's usage block); plain text: no Rich on this path.
    `command_name`: the sub-command the line named, for an error Click raised without its context."""
    import click

    command = error.ctx.command_path if error.ctx else "llmctl"
    if command == "llmctl" and command_name:
        command = f"llmctl {command_name}"
    message, hint = error.format_message(), f"run `{command} --help` to see its arguments and flags"
    if wants_json:
        output.emit_json({"error": "UsageError", "message": message, "hint": hint})
    click.echo(f"error: {message}", err=True)
    click.echo(f"hint: {hint}", err=True)


def _exit_codes_epilog() -> str:
    """`llmctl --help`'s last section: the exit-code table (one paragraph a code, so it stays a list)."""
    rows = [f"{code:>3}  {meaning}" for code, meaning in EXIT_CODES.items()]
    return help_format.keep_lines("Exit codes (every command):", rows)


app = typer.Typer(
    cls=LlmctlGroup,
    epilog=_exit_codes_epilog(),
    name="llmctl",
    help="Put an LLM behind an endpoint on EKS (Inferentia2, Trainium, NVIDIA GPUs or CPUs).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain Click help by panel (cli/help_format.py): no Rich on start-up
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"llmctl {llmctl.__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """llmctl: typed stacks for LLM serving on EKS, replacing install.sh / cleanup.sh."""


# Registration order is the order in `llmctl --help`, within each panel below.
lifecycle_cmd.register(app)
doctor_cmd.register(app)
sweep_cmd.register(app)
stacks_cmd.register(app)
app.add_typer(blueprints_cmd.app, name="blueprints")
sizing_cmd.register(app)
plan_cmd.register(app)
render_cmd.register(app)
validate_cmd.register(app)
catalog_cmd.register(app)
chat_cmd.register(app)
bench_cmd.register(app)
models_cmd.register(app)
images_cmd.register(app)

PANELS = {
    "Deploy and operate": (
        "up",
        "down",
        "preview",
        "status",
        "endpoint",
        "connect",
        "doctor",
        "sweep",
        "stacks",
    ),
    "Plan and check (offline)": ("blueprints", "size", "cost", "plan", "render", "validate", "catalog"),
    "Use an endpoint": ("chat", "bench"),
    "Build": ("models", "images"),
}


def _assign_panels() -> None:
    panel_of = {name: panel for panel, names in PANELS.items() for name in names}
    for command in app.registered_commands:
        name = command.name or (command.callback.__name__ if command.callback else "")
        command.rich_help_panel = panel_of.get(name, command.rich_help_panel)
    for group in app.registered_groups:
        group.rich_help_panel = panel_of.get(group.name or "", group.rich_help_panel)


_assign_panels()


def main() -> None:
    """Console-script entry point."""
    # What the process holds now (its modules, mostly) lives until it exits: frozen, the garbage
    # collector's full collections and the interpreter's collection at exit never walk it again;
    # and once the command is done, what it imported and made is frozen too, as the process ends
    # (together 0.2-0.3 of the 2 CPU s of `llmctl bench -c 64 -n 256`, issue 29). Only in the
    # CLI's own process: a test that imports the app keeps its collector as it was.
    gc.freeze()
    try:
        app(prog_name="llmctl")
    finally:
        gc.freeze()
