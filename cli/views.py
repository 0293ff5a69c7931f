"""Rich renderings of reports shared by several commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from llmctl.cli.output import console

if TYPE_CHECKING:
    from llmctl.blueprints.pricing import CostReport
    from llmctl.blueprints.sizing import SizeReport


def narrow_table() -> Table:
    """A table for catalog listings that keeps to 80 columns: a rule under the header and no
    borders (two spaces between columns, none at the edges)."""
    from rich import box

    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True)


def print_size_report(report: SizeReport) -> None:
    """The `llmctl size` table."""
    console.print(
        f"[bold]{report.model}[/] {report.dtype}, context {report.context}, batch {report.batch}: "
        f"weights {report.weights_gb:.1f} GB + KV cache {report.kv_cache_gb:.2f} GB = {report.total_gb:.1f} GB"
    )
    if report.neuron_cores is not None:
        console.print(
            f"minimum: {report.neuron_cores} NeuronCore(s) on {report.neuron_devices} Neuron device(s)"
        )
    if report.gpus is not None:
        console.print(f"minimum: {report.gpus} GPU(s)")
    table = Table(title_justify="left")
    for column in ("instance", "tp", "fits", "needs GB", "has GB", "$/h", "why not"):
        table.add_column(column, justify="right" if column in ("tp", "needs GB", "has GB", "$/h") else "left")
    for option in report.options:
        mark = "[green]yes[/]" if option.fits else "[red]no[/]"
        table.add_row(
            option.instance_type,
            str(option.tp_degree) + (f" x{option.pipeline_parallel}" if option.pipeline_parallel > 1 else ""),
            mark,
            f"{option.needed_gb:.1f}",
            f"{option.available_gb:.1f}",
            f"{option.hourly_usd:.3f}",
            option.reason,
        )
    console.print(table)
    if report.recommended:
        rec = report.recommended
        nodes = rec.pipeline_parallel
        across = f" x pipeline_parallel {nodes} ({nodes} nodes, over EFA)" if nodes > 1 else ""
        console.print(
            f"recommended: [bold]{rec.instance_type}[/] at tp {rec.tp_degree}{across} (${rec.hourly_usd:.3f}/h)"
        )
    else:
        console.print(
            "[red]no instance of this accelerator fits[/]; try --dtype int8, a shorter --context or another --accelerator"
        )


def _per_node(report: CostReport) -> str:
    if report.nodes_per_replica > 1:
        return f"{report.nodes_per_replica} nodes per replica"
    return f"{report.replicas_per_node} per node"


def print_cost_report(report: CostReport, zero: dict[str, Any] | None = None) -> None:
    """The `llmctl cost` summary (and, for a blueprint that scales to zero, the saving there and
    the cold start it costs)."""
    console.print(
        f"[bold]{report.blueprint}[/]: {report.nodes} x {report.instance_type} "
        f"({report.replicas} replica(s), {_per_node(report)}) at ${report.node_hourly_usd:.3f}/h "
        f"[dim]({report.price_source})[/]"
    )
    console.print(
        f"serving nodes: ${report.serving_hourly_usd:.2f}/h (up to ${report.serving_hourly_max_usd:.2f}/h at {report.nodes_max} node(s))"
    )
    console.print(f"platform (control plane, NAT, core nodes): ${report.platform_hourly_usd:.2f}/h")
    console.print(f"total: [bold]${report.total_hourly_usd:.2f}/h[/]")
    if zero is not None:
        from llmctl.infra.lifecycle.cold_start import render_at_zero  # off the start-up path

        console.print(render_at_zero(zero), markup=False)
    if report.per_1k_tokens:
        table = Table(title_justify="left")
        table.add_column("output tokens/s", justify="right")
        table.add_column("$ / 1k tokens (serving)", justify="right")
        table.add_column("$ / 1k tokens (with platform)", justify="right")
        for row in report.per_1k_tokens:
            table.add_row(
                f"{row.throughput_tokens_per_s:g}",
                f"{row.usd_per_1k_output_tokens:.3f}",
                f"{row.usd_per_1k_output_tokens_with_platform:.3f}",
            )
        console.print(table)
