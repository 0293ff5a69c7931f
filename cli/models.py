"""`llmctl models tiny DIR`: write a small random-weight model for smoke tests without network."""

from __future__ import annotations

import typer

from llmctl.cli import options, output

app = typer.Typer(help="Models for local smoke tests.", no_args_is_help=True)


@app.command("tiny")
def tiny(
    directory: str = typer.Argument(..., help="New or empty directory to write the model into."),
    json: bool = options.JSON,
) -> None:
    """Write a tiny random-weight Llama model with a real tokenizer and chat template."""
    output.start(json_output=json)
    from llmctl.serving.client.tiny import write_tiny_model

    info = write_tiny_model(directory)
    if json:
        output.emit_json(info)
        return
    verb = "reusing the tiny Llama model" if info["reused"] else "wrote a tiny Llama model"
    output.console.print(
        f"{verb} ({info['parameters']:,} parameters, vocab {info['vocab_size']}) in {info['path']}",
        markup=False,
    )
    output.console.print(
        f"serve it locally: llmctl up --blueprint tiny-cpu --target local --model {info['path']}"
    )


def register(root: typer.Typer) -> None:
    """Add `llmctl models` to the root app."""
    root.add_typer(app, name="models")
