"""`llmctl catalog instances|models|refresh`: the hardware and model catalogs."""

from __future__ import annotations

import typer

from llmctl.cli import options, output

app = typer.Typer(help="Browse and refresh the hardware and model catalogs.", no_args_is_help=True)


@app.command("instances")
def instances(
    accelerator: str = typer.Option(None, "--accelerator", "-a", help="Only this accelerator family."),
    json: bool = options.JSON,
) -> None:
    """Instance types with accelerators, memory and prices. Columns: dev (accelerator devices), cores
    (NeuronCores), dev GiB (memory of one device), GiB (the instance's memory), $/h (on demand), 3y $/h
    (3-year reserved)."""
    output.start(json_output=json)
    from llmctl.blueprints.hardware import hardware

    catalog = hardware()
    if accelerator:
        catalog.accelerator(accelerator)  # unknown names fail with a did-you-mean
    rows = [r for r in catalog.instances.values() if not accelerator or r.accelerator == accelerator]
    if json:
        output.emit_json({"instances": [r.model_dump() for r in rows]})
        return
    from llmctl.cli.views import narrow_table

    # Fits 80 columns whole: short headers (their meaning in the command's help), no borders
    # between columns, and no cell ever cut (a price is never shown as `0.7…`).
    table = narrow_table()
    for column in ("type", "accelerator", "dev", "cores", "dev GiB", "vCPU", "GiB", "$/h", "3y $/h"):
        table.add_column(
            column,
            justify="left" if column in ("type", "accelerator") else "right",
            no_wrap=True,
            min_width=len(column),
        )
    for r in rows:
        table.add_row(
            r.name,
            r.accelerator_name or r.accelerator,
            str(r.accelerator_count or "-"),
            str(r.neuron_cores or "-"),
            f"{r.accelerator_memory_gib:g}" if r.accelerator_memory_gib else "-",
            str(r.vcpu),
            f"{r.memory_gib:g}",
            f"{r.on_demand_usd:.3f}",
            f"{r.reserved_3y_usd:.3f}" if r.reserved_3y_usd is not None else "-",
        )
    output.console.print(table)


@app.command("models")
def models(json: bool = options.JSON) -> None:
    """Models with their architecture numbers and Hugging Face ids."""
    output.start(json_output=json)
    from llmctl.blueprints.models import catalog_models

    rows = list(catalog_models().values())
    if json:
        output.emit_json({"models": [m.model_dump() for m in rows]})
        return
    from llmctl.cli.views import narrow_table

    # The numbers, then each model's Hugging Face ids: 80 columns hold both, and an id is never cut
    # (the ids wrap between ids, at the comma).
    table = narrow_table()
    for column in ("key", "B params", "layers", "heads/kv", "context", "bf16 GB"):
        table.add_column(column, justify="left" if column == "key" else "right", no_wrap=True)
    ids = narrow_table()
    ids.add_column("key", no_wrap=True)
    ids.add_column("Hugging Face ids", overflow="fold")
    for m in rows:
        table.add_row(
            m.key,
            f"{m.params_b:.2f}",
            str(m.layers),
            f"{m.heads}/{m.kv_heads}",
            str(m.max_context),
            f"{m.weights_gb('bf16'):.1f}",
        )
        ids.add_row(m.key, ", ".join(m.aliases))
    output.console.print(table)
    output.console.print()
    table = ids
    output.console.print(table)


@app.command("refresh")
def refresh(
    region: str = typer.Option("us-east-1", "--region", help="Region whose prices and offerings to load."),
    instance_type: list[str] = typer.Option(
        None, "--instance-type", help=f"Only these types. {options.LIST_HELP}"
    ),
    json: bool = options.JSON,
) -> None:
    """Load live specs (EC2) and prices (Pricing API, spot history) into a local overlay."""
    output.start(json_output=json)
    from dataclasses import asdict

    from llmctl.blueprints.hardware import hardware, load_hardware, overlay_path
    from llmctl.infra.aws.catalog_refresh import refresh_catalog

    result = refresh_catalog(
        hardware(), region=region, out=overlay_path(), instance_types=options.flat_list(instance_type) or None
    )
    load_hardware.cache_clear()
    if json:
        output.emit_json(asdict(result))
        return
    output.console.print(
        f"refreshed {len(result.updated)} and added {len(result.added)} instance type(s) from {region}"
    )
    if result.missing:
        output.console.print(f"[yellow]not offered or not priced in {region}:[/] {', '.join(result.missing)}")
    output.console.print(f"overlay written to {result.path}")


def register(root: typer.Typer) -> None:
    """Add `llmctl catalog` to the root app."""
    root.add_typer(app, name="catalog")
