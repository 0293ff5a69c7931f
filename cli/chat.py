"""`llmctl chat`: talk to an OpenAI-compatible endpoint or a deployed blueprint."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from llmctl.blueprints.hf_token import api_key_from
from llmctl.cli import options


def chat(
    endpoint: str = typer.Option(
        None, "--endpoint", "-e", help="OpenAI base URL, e.g. http://localhost:8000/v1."
    ),
    blueprint: str | None = options.SOME_DEPLOYED,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    model: str | None = options.MODEL_NAME,
    api_key: str | None = options.API_KEY,
    api_key_file: Path | None = options.API_KEY_FILE,
    system: str = typer.Option(None, "--system", "-s", help="System prompt."),
    prompt: str = typer.Option(
        None,
        "--prompt",
        "-p",
        help="One-shot: send this prompt ('-' reads stdin), print the answer and exit.",
    ),
    max_tokens: int = typer.Option(None, "--max-tokens", min=1, help="Cap on the answer length."),
    temperature: float = typer.Option(None, "--temperature", min=0.0, help="Sampling temperature."),
    timeout: float = typer.Option(300.0, "--timeout", min=0.1, help="Seconds to wait for an answer."),
    json: bool = options.JSON,
) -> None:
    """Chat in the terminal (streaming, history, /reset, /exit), or one-shot with --prompt."""
    from llmctl.cli import output

    output.start(json_output=json)
    from llmctl.errors import BadInput
    from llmctl.serving.client.chat import open_session

    if json and prompt is None:
        raise BadInput("--json needs --prompt (one-shot mode)", "add --prompt TEXT")
    session = open_session(
        endpoint,
        blueprint,
        stack,
        model=model,
        api_key=api_key_from(api_key, api_key_file),
        workload=workload,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
        timeout=timeout,
    )
    try:
        if prompt is not None:
            text = sys.stdin.read() if prompt == "-" else prompt
            _one_shot(session, text, json)
        else:
            _interactive(session)
    finally:
        session.close()


def _one_shot(session: Any, text: str, as_json: bool) -> None:
    from llmctl.cli import output

    if as_json:
        answer = "".join(session.send(text))
        output.emit_json(
            {"model": session.model, "prompt": text, "response": answer, "usage": session.last_usage}
        )
        return
    for piece in session.send(text):
        sys.stdout.write(printable(piece))
        sys.stdout.flush()
    sys.stdout.write("\n")


def _interactive(session: Any) -> None:
    from llmctl.cli import output
    from llmctl.errors import EndpointError, LlmctlError
    from llmctl.serving.client.chat import COMMANDS, parse_command

    console = output.console
    console.print(f"[bold]{session.model}[/] at {session.base_url}  (/help for commands, /exit to leave)")
    while True:
        try:
            line = console.input("[bold green]you>[/] ")
        except (EOFError, KeyboardInterrupt):
            console.print()
            return
        if not line.strip():
            continue
        try:
            command = parse_command(line)
        except LlmctlError as error:
            console.print(f"[red]{error.message}[/]" + (f" ({error.hint})" if error.hint else ""))
            continue
        if command is not None:
            name, arg = command
            if name == "/exit":
                return
            if name == "/reset":
                session.reset()
                console.print("[dim]conversation reset[/]")
            elif name == "/system":
                session.set_system(arg)
                console.print(f"[dim]system prompt {'set' if arg else 'cleared'}; conversation reset[/]")
            elif name == "/model":
                if arg:
                    session.model = arg
                console.print(f"[dim]model: {session.model}[/]")
            elif name == "/history":
                for message in session.messages():
                    console.print(
                        f"[bold]{message['role']}:[/] {message['content']}", markup=True, highlight=False
                    )
            else:
                for key, help_text in COMMANDS.items():
                    console.print(f"  [cyan]{key}[/]  {help_text}")
            continue
        console.print("[bold blue]assistant>[/] ", end="")
        try:
            for piece in session.send(line):
                console.out(printable(piece), end="", highlight=False)
            console.print()
        except KeyboardInterrupt:
            console.print("\n[yellow]answer interrupted (not added to the history)[/]")
        except EndpointError as error:
            console.print(f"\n[red]{error.message}[/]" + (f" ({error.hint})" if error.hint else ""))


def printable(text: str) -> str:
    """A model's text as the terminal should show it: control bytes (escape sequences, bells,
    carriage returns) written as visible escapes such as \\x1b; newlines and tabs kept."""
    return "".join(
        ch if ch in "\n\t" or not (ord(ch) < 32 or 127 <= ord(ch) < 160) else f"\\x{ord(ch):02x}"
        for ch in text
    )


def register(app: typer.Typer) -> None:
    """Add `llmctl chat` to the root app."""
    app.command("chat")(chat)
