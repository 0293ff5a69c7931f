"""`llmctl size` and `llmctl cost`."""

from __future__ import annotations

from enum import Enum

import typer

from llmctl.cli import options, output


class AcceleratorChoice(str, Enum):
    inferentia2 = "inferentia2"
    trainium = "trainium"
    trainium2 = "trainium2"
    nvidia = "nvidia"
    cpu = "cpu"


class DtypeChoice(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"
    int8 = "int8"


class PricingChoice(str, Enum):
    on_demand = "on-demand"
    reserved_3y = "reserved-3y"
    spot = "spot"


def size(
    model: str = typer.Argument(
        ..., help="Catalog key, Hugging Face id, or a local model directory / config.json."
    ),
    accelerator: AcceleratorChoice = typer.Option(
        AcceleratorChoice.inferentia2, "--accelerator", "-a", help="Accelerator family."
    ),
    dtype: DtypeChoice = typer.Option(DtypeChoice.fp16, "--dtype", help="Weight precision."),
    context: int = typer.Option(
        None,
        "--context",
        min=1,
        max=1_048_576,
        help="Tokens per sequence (default: the model's maximum).",
    ),
    batch: int = typer.Option(
        1, "--batch", min=1, max=4096, help="Sequences whose KV cache must fit at once."
    ),
    transformers_neuronx: bool = typer.Option(
        False,
        "--transformers-neuronx",
        help="Allow tp degrees only transformers-neuronx accepts (12 on inf2).",
    ),
    json: bool = options.JSON,
) -> None:
    """Memory a model needs and which instances can serve it."""
    output.start(json_output=json)
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.models import lookup_model
    from llmctl.blueprints.sizing import size_model

    arch = lookup_model(model)
    report = size_model(
        arch,
        hardware(),
        accelerator=accelerator.value,
        dtype=dtype.value,
        context=context or arch.max_context,
        batch=batch,
        transformers_neuronx=transformers_neuronx,
    )
    if json:
        output.emit_json(report.to_dict())
        return
    from llmctl.cli.views import print_size_report

    print_size_report(report)


def cost(
    blueprint: str = options.BLUEPRINT,
    throughput: list[str] = typer.Option(
        None,
        "--throughput",
        "-t",
        metavar="TOK/S",
        help=f"Output tokens/s of the deployment. {options.LIST_HELP}",
    ),
    pricing: PricingChoice = typer.Option(
        PricingChoice.on_demand, "--pricing", help="Price model for the serving nodes."
    ),
    node_price: float = typer.Option(
        None,
        "--node-price",
        min=0,
        max=10_000,
        help="Override the hourly price of one serving node (USD).",
    ),
    json: bool = options.JSON,
) -> None:
    """Hourly cost of a blueprint and dollars per 1,000 output tokens."""
    output.start(json_output=json)
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.pricing import blueprint_cost

    # off the start-up path: the saving at zero and the last recorded cold start
    from llmctl.infra.lifecycle.cold_start import at_zero

    catalog = hardware()
    bp = load_blueprint(blueprint, catalog)
    report = blueprint_cost(
        bp,
        catalog,
        pricing=pricing.value,
        node_price=node_price,
        throughputs=options.number_list(throughput, "--throughput", 0.001, 10_000_000),
    )
    zero = at_zero(bp, report)
    if json:
        output.emit_json({**report.to_dict(), "at_zero": zero})
        return
    from llmctl.cli.views import print_cost_report

    print_cost_report(report, zero)


def register(app: typer.Typer) -> None:
    """Add the sizing commands to the root app."""
    app.command("size")(size)
    app.command("cost")(cost)
