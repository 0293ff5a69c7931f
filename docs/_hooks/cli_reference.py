"""MkDocs hook: the CLI reference page, `cli.md`, made at build time from the Click command tree
that Typer builds for llmctl's app (`typer.main.get_command(app)`): every command, argument and
option with its value, default and help, the examples `--help` shows, and the exit codes of
`llmctl.errors.EXIT_CODES`. Nothing of it is written by hand or kept on disk, so it cannot drift
from the code; `make docs` builds the site with it (`mkdocs build --strict`).

`python docs/_hooks/cli_reference.py` prints the page (what the site shows at /cli/).
"""

from __future__ import annotations

from typing import Any

PAGE = "cli.md"


def _text(text: str) -> str:
    """Help text as Markdown: `<` and `>` outside code spans as entities (`<stack>.<name>` is not
    an HTML tag)."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return _text(" ".join(text.split())).replace("|", "\\|")


def _default(param: Any) -> str:
    """What the option is when not given, as `--help` would say it (nothing when it has none)."""
    default = param.default
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return "off" if not default else "on"
    if default is None or default == () or default == [] or callable(default):
        return ""
    if isinstance(default, (list, tuple)):
        return _cell(", ".join(str(item) for item in default))
    return f"`{_cell(str(getattr(default, 'value', default)))}`"


def _option_row(param: Any) -> str:
    flags = ", ".join(f"`{flag}`" for flag in [*param.opts, *param.secondary_opts])
    value = f"`{param.metavar}`" if param.metavar else ""
    help_text = _cell(param.help or "")
    if getattr(param, "envvar", None):
        help_text += f" Environment variable: `{param.envvar}`."
    if param.required:
        help_text = "**Required.** " + help_text
    return f"| {flags} | {value} | {_default(param)} | {help_text} |"


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command below `command`, depth first in the order `--help` lists them."""
    found = []
    for name, sub in (getattr(command, "commands", None) or {}).items():
        if getattr(sub, "hidden", False):
            continue
        found.append(((*path, name), sub))
        found.extend(_commands(sub, (*path, name)))
    return found


def _anchor(path: tuple[str, ...]) -> str:
    return "llmctl-" + "-".join(path)


def _section(path: tuple[str, ...], command: Any, examples: dict[str, tuple[str, ...]]) -> list[str]:
    from typer.core import TyperArgument, TyperOption

    name = " ".join(("llmctl", *path))
    lines = [f"## `{name}` {{#{_anchor(path)}}}", ""]
    lines += [_text((command.help or "").strip()), ""]
    subs = [(sub_name, sub) for sub_name, sub in (getattr(command, "commands", None) or {}).items()]
    if subs:
        lines += ["| sub-command | what |", "|---|---|"]
        for sub_name, sub in subs:
            summary = _cell((sub.short_help or sub.help or "").strip().split("\n\n")[0])
            lines.append(f"| [`{name} {sub_name}`](#{_anchor((*path, sub_name))}) | {summary} |")
        lines.append("")
    arguments = [p for p in command.params if isinstance(p, TyperArgument)]
    if arguments:
        lines += ["| argument | required | what |", "|---|---|---|"]
        for param in arguments:
            word = (param.metavar or param.name or "").upper()
            lines.append(f"| `{word}` | {'yes' if param.required else 'no'} | {_cell(param.help or '')} |")
        lines.append("")
    options = [p for p in command.params if isinstance(p, TyperOption) and not p.hidden]
    if options:
        lines += ["| option | value | default | what |", "|---|---|---|---|"]
        lines += [_option_row(param) for param in options]
        lines.append("")
    if examples.get(" ".join(path)):
        lines += ["Examples:", "", "```bash", *examples[" ".join(path)], "```", ""]
    return lines


def render() -> str:
    """The whole page, from the app as it is now."""
    import typer

    from llmctl.cli.app import app
    from llmctl.cli.examples import EXAMPLES
    from llmctl.errors import EXIT_CODES

    root = typer.main.get_command(app)
    lines = [
        "# CLI reference",
        "",
        "Generated from the code at each docs build (`docs/_hooks/cli_reference.py` reads the command",
        "tree Typer builds for llmctl's app): what `llmctl COMMAND --help` prints, on one page.",
        "",
        "## Exit codes {#exit-codes}",
        "",
        "One code per meaning, the same for every command (`llmctl --help` prints this table too).",
        "",
        "| code | meaning |",
        "|---|---|",
        *(f"| {code} | {_cell(meaning)} |" for code, meaning in EXIT_CODES.items()),
        "",
        "## `llmctl` {#llmctl}",
        "",
        _text((root.help or "").strip()),
        "",
        "| option | value | default | what |",
        "|---|---|---|---|",
        *(_option_row(p) for p in root.params if not getattr(p, "hidden", False)),
        "",
        "| command | what |",
        "|---|---|",
    ]
    commands: dict[str, Any] = getattr(root, "commands", {})
    for name, sub in commands.items():
        summary = _cell((sub.short_help or sub.help or "").strip().split("\n\n")[0])
        lines.append(f"| [`llmctl {name}`](#{_anchor((name,))}) | {summary} |")
    lines.append("")
    for path, command in _commands(root):
        lines += _section(path, command, EXAMPLES)
    return "\n".join(lines).rstrip() + "\n"


def on_files(files: Any, config: Any) -> Any:
    """MkDocs event: add the generated page to the site's files."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    print(render(), end="")
