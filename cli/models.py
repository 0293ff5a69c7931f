"""`llmctl models tiny DIR`: write a small random-weight model for smoke tests without network."""

from __future__ import annotations

import typer

from llmctl.cli import options, output

app = typer.Typer(help="Models for local smoke tests.", no_args_is_help=True)


@app.command("tiny")
def tiny(
    directory: str = typer.Argument(..., help="New or empty directory to write the model into."),
    layers: int = typer.Option(2, "--layers", help="Decoder layers."),
    heads: int = typer.Option(4, "--heads", help="Attention heads."),
    kv_heads: int = typer.Option(2, "--kv-heads", help="Key/value heads (a divisor of --heads)."),
    head_dim: int = typer.Option(
        16, "--head-dim", help="Size of each head; vLLM's GPU kernels need 64, 80, 96, 112, 128 or 256."
    ),
    max_position: int = typer.Option(2048, "--max-position", help="Longest context the model accepts."),
    tensor_parallel: int = typer.Option(
        1, "--tensor-parallel", help="Check that the heads split evenly over this many GPUs."
    ),
    json: bool = options.JSON,
) -> None:
    """Write a tiny random-weight Llama model with a real tokenizer and chat template.

    The defaults suit a CPU; for vLLM on a GPU give a head size it serves, e.g.
    `--heads 8 --kv-heads 8 --head-dim 64 --max-position 4096 --tensor-parallel 4`.
    """
    output.start(json_output=json)
    from llmctl.serving.client.tiny import TinyShape, write_tiny_model

    shape = TinyShape(
        layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim, max_position=max_position
    )
    info = write_tiny_model(directory, shape=shape, tensor_parallel=tensor_parallel)
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
