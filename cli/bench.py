"""`llmctl bench` (measure an OpenAI-compatible endpoint) and `llmctl bench compare A B`.

Flag names of llmperf's token_benchmark_ray.py (the seeds' workflow) are accepted as aliases:
--mean-input-tokens, --num-concurrent-requests, --max-num-completed-requests, --results-dir,
--additional-sampling-params, --llm-api openai; OPENAI_API_BASE (';'-separated) and
OPENAI_API_KEY are read when no endpoint or key is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

from llmctl.blueprints.hf_token import api_key_from
from llmctl.cli import options


class _BenchGroup(TyperGroup):
    """`bench` with a sub-command (`compare`): a stray number after a list flag (`-c 1 4`) is named
    as such, with the two ways to give several values, instead of "No such command '4'"."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except UsageError:
            if args and args[0].replace(".", "", 1).isdigit():
                raise UsageError(
                    f"{args[0]!r} is not a command: give several values by repeating the flag "
                    f"(-c 1 -c {args[0]}) or as a comma list (-c 1,{args[0]})",
                    ctx,
                ) from None
            raise


bench_app = typer.Typer(
    cls=_BenchGroup,
    name="bench",
    help="Benchmark an OpenAI-compatible endpoint (TTFT, TPOT, ITL, throughput, goodput).",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode=None,
    # `llmctl bench [OPTIONS]` runs a benchmark; `compare` is the one sub-command, and optional
    subcommand_metavar="[compare A B]",
)


# Help panels: one table each, so no panel's columns crowd out the flag names at 80 columns.
_TARGET = "Endpoint"
_LOAD = "Load"
_WORKLOAD = "Prompts and outputs"
_OUTPUT = "Results"
# llmperf's flag names (token_benchmark_ray.py) work as hidden aliases


@bench_app.callback(invoke_without_command=True)
def bench(
    ctx: typer.Context,
    endpoint: list[str] = typer.Option(
        None,
        "--endpoint",
        "-e",
        metavar="URL",
        help="OpenAI base URL, e.g. http://localhost:8000/v1; several (repeat or comma list): round-robin.",
        rich_help_panel=_TARGET,
    ),
    blueprint: str | None = options.SOME_DEPLOYED,
    stack: str = options.STACK,
    workload: str | None = options.WORKLOAD,
    model: str | None = options.MODEL_NAME,
    api_key: str | None = options.API_KEY,
    api_key_file: Path | None = options.API_KEY_FILE,
    concurrency: list[str] = typer.Option(
        None,
        "--concurrency",
        "-c",
        metavar="N",
        help="Closed loop: requests in flight; several (-c 1 -c 4 or -c 1,4) are a sweep. Default: 1.",
        rich_help_panel=_LOAD,
    ),
    rate: list[str] = typer.Option(
        None,
        "--rate",
        metavar="R",
        help="Open loop: requests/s; several (repeat or comma list) are a sweep.",
        rich_help_panel=_LOAD,
    ),
    arrival: str = typer.Option(
        "poisson", "--arrival", metavar="KIND", help="poisson or constant (open loop).", rich_help_panel=_LOAD
    ),
    max_concurrency: int = typer.Option(
        None, "--max-concurrency", min=1, metavar="N", help="Cap (open loop).", rich_help_panel=_LOAD
    ),
    requests: int = typer.Option(
        None,
        "--requests",
        "-n",
        min=1,
        metavar="N",
        help="Measured requests per level. Default: max(50, 8 x concurrency).",
        rich_help_panel=_LOAD,
    ),
    duration: float = typer.Option(
        None, "--duration", min=0.1, metavar="S", help="Seconds per level (or -n).", rich_help_panel=_LOAD
    ),
    warmup: int = typer.Option(
        2, "--warmup", min=0, metavar="N", help="Warm-up requests, before the window.", rich_help_panel=_LOAD
    ),
    loops: int = typer.Option(
        None,
        "--loops",
        min=1,
        metavar="N",
        help="Event loops (processes) per closed-loop level. Default: by concurrency.",
        rich_help_panel=_LOAD,
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", min=0.1, metavar="S", help="Per-request timeout.", rich_help_panel=_LOAD
    ),
    mean_input_tokens: int = typer.Option(
        512, "--mean-input-tokens", min=1, metavar="N", help="Prompt length.", rich_help_panel=_WORKLOAD
    ),
    stddev_input_tokens: int = typer.Option(
        20, "--stddev-input-tokens", min=0, metavar="N", help="Its stddev.", rich_help_panel=_WORKLOAD
    ),
    mean_output_tokens: int = typer.Option(
        245, "--mean-output-tokens", min=1, metavar="N", help="max_tokens.", rich_help_panel=_WORKLOAD
    ),
    stddev_output_tokens: int = typer.Option(
        20, "--stddev-output-tokens", min=0, metavar="N", help="Its stddev.", rich_help_panel=_WORKLOAD
    ),
    max_output_tokens: int = typer.Option(
        None,
        "--max-tokens",
        min=1,
        metavar="N",
        help="Cap. Default: the blueprint's.",
        rich_help_panel=_WORKLOAD,
    ),
    shared_prefix: bool = typer.Option(
        False, "--shared-prefix", help="No per-request nonce.", rich_help_panel=_WORKLOAD
    ),
    prefix_tokens: int = typer.Option(
        None, "--prefix-tokens", min=1, metavar="N", help="Shared system prompt.", rich_help_panel=_WORKLOAD
    ),
    prefix_groups: int = typer.Option(
        None, "--prefix-groups", min=1, metavar="G", help="Distinct prompts.", rich_help_panel=_WORKLOAD
    ),
    conversations: int = typer.Option(
        None, "--conversations", min=1, metavar="C", help="Multi-turn chats.", rich_help_panel=_WORKLOAD
    ),
    turns: int = typer.Option(
        None, "--turns", min=1, metavar="T", help="Turns per chat.", rich_help_panel=_WORKLOAD
    ),
    metrics_url: list[str] = typer.Option(
        None, "--metrics-url", metavar="URL", help="vLLM /metrics to read.", rich_help_panel=_OUTPUT
    ),
    no_fixed_output: bool = typer.Option(
        False,
        "--no-fixed-output",
        help="Don't ask for exactly max_tokens (ignore_eos, min_tokens).",
        rich_help_panel=_WORKLOAD,
    ),
    tokenizer: str = typer.Option(
        None, "--tokenizer", metavar="PATH", help="For exact counts.", rich_help_panel=_WORKLOAD
    ),
    extra_body: str = typer.Option(
        None, "--extra-body", metavar="JSON", help="Merged into each body.", rich_help_panel=_WORKLOAD
    ),
    seed: int = typer.Option(
        0, "--seed", metavar="N", help="Prompt and arrival seed.", rich_help_panel=_WORKLOAD
    ),
    slo: str = typer.Option(
        None, "--slo", metavar="LIMITS", help="Goodput, e.g. ttft=500ms,tpot=50ms.", rich_help_panel=_OUTPUT
    ),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        metavar="DIR",
        help="Default: bench-results/<time>.",
        rich_help_panel=_OUTPUT,
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="PNG plots.", rich_help_panel=_OUTPUT),
    explain: bool = typer.Option(
        False, "--explain", help="Also print what each metric means.", rich_help_panel=_OUTPUT
    ),
    json: bool = options.JSON,
    num_concurrent_requests: str = typer.Option(None, "--num-concurrent-requests", hidden=True),
    # the name before issue 26 (chat's is --max-tokens), kept for scripts
    max_output_tokens_alias: int = typer.Option(None, "--max-output-tokens", min=1, hidden=True),
    max_num_completed_requests: int = typer.Option(None, "--max-num-completed-requests", min=1, hidden=True),
    results_dir: Path = typer.Option(None, "--results-dir", hidden=True),
    additional_sampling_params: str = typer.Option(None, "--additional-sampling-params", hidden=True),
    llm_api: str = typer.Option("openai", "--llm-api", hidden=True),
    fixed_output: bool = typer.Option(True, "--fixed-output", hidden=True),
) -> None:
    """Measure an endpoint: llmctl bench -e http://localhost:8000/v1 -c 1,4,16."""
    if ctx.invoked_subcommand is not None:
        return
    from llmctl.cli import output

    output.start(json_output=json)
    from llmctl.serving.client.bench.options import bench_config

    config = bench_config(
        endpoints=options.flat_list(endpoint) or None,
        blueprint=blueprint,
        stack=stack,
        workload=workload,
        concurrency=options.joined_list(concurrency) or num_concurrent_requests,
        rate=options.joined_list(rate),
        arrival=arrival,
        llm_api=llm_api,
        slo=slo,
        extra_body=extra_body or additional_sampling_params,
        model=model,
        max_output_tokens=max_output_tokens or max_output_tokens_alias,
        out=out or results_dir,
        api_key=api_key_from(api_key, api_key_file),
        max_concurrency=max_concurrency,
        requests=requests or max_num_completed_requests,
        duration=duration,
        warmup=warmup,
        loops=loops,
        timeout=timeout,
        mean_input_tokens=mean_input_tokens,
        stddev_input_tokens=stddev_input_tokens,
        mean_output_tokens=mean_output_tokens,
        stddev_output_tokens=stddev_output_tokens,
        shared_prefix=shared_prefix,
        prefix_tokens=prefix_tokens,
        prefix_groups=prefix_groups,
        conversations=conversations,
        turns=turns,
        metrics_urls=options.flat_list(metrics_url) or None,
        fixed_output=fixed_output and not no_fixed_output,
        tokenizer=tokenizer,
        seed=seed,
        plots=plots,
        # local runner or cluster (kubectl); none for --endpoint (with --blueprint too: bench_config
        # then refuses the pair before anything looks for a deployment)
        replicas=None if endpoint else _replica_source(stack, blueprint, workload),
    )
    outcome = _run_with_progress(config, show=not json)
    from llmctl.serving.client.bench import report

    if json:
        output.emit_json(report.outcome_data(outcome))
    else:
        console = output.console
        if outcome.sweep is not None:
            for level in outcome.levels:
                report.render_level(console, level.summary, definitions=False)
            report.render_sweep(console, outcome.sweep)
        elif outcome.levels:
            report.render_level(console, outcome.levels[0].summary, definitions=False)
        if outcome.levels and explain:  # the definitions once, on request (summary.json has them)
            report.render_definitions(console)
        elif outcome.levels:
            console.print("metric definitions: add --explain (or read summary.json)")
        console.print(f"results: {outcome.out_dir}")
        if outcome.plot_note:
            console.print(f"[yellow]{outcome.plot_note}[/]")
    if outcome.interrupted:
        raise typer.Exit(130)


def _replica_source(stack: str, blueprint: str | None, workload: str | None) -> Any:
    from llmctl.infra.lifecycle.replicas import bench_source  # only without --endpoint

    return bench_source(stack, blueprint, workload)


def _run_with_progress(config: Any, *, show: bool) -> Any:
    from llmctl.serving.client.bench.runner import run_bench_blocking

    if not show:
        return run_bench_blocking(config)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from llmctl.cli import output

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=output.console,
        refresh_per_second=4,
        transient=False,
    )
    tasks: dict[str, Any] = {}
    current = {"label": ""}

    def on_level(label: str, number: int, count: int) -> None:
        current["label"] = label
        tasks[label] = bar.add_task(f"{label} ({number + 1}/{count})", total=None, counts="starting")

    def on_progress(progress: Any) -> None:
        task = tasks.get(current["label"])
        if task is None:
            return
        counts = f"{progress.phase}: {progress.completed} ok, {progress.failed} failed, {progress.in_flight} in flight"
        done = progress.completed + progress.failed
        bar.update(task, total=progress.total, completed=done, counts=counts)

    with bar:
        return run_bench_blocking(config, on_progress=on_progress, on_level=on_level)


@bench_app.command("compare")
def compare(
    a: Path = typer.Argument(..., help="Results folder A (the baseline)."),
    b: Path = typer.Argument(..., help="Results folder B."),
    json: bool = options.JSON,
) -> None:
    """Compare two result folders (single runs, or sweeps level by level)."""
    from llmctl.cli import output

    output.start(json_output=json)
    from llmctl.serving.client.bench.compare import compare as compare_folders
    from llmctl.serving.client.bench.report import clean

    result = compare_folders(a, b)
    if json:
        output.emit_json(clean(result))
        return
    from rich.table import Table

    for level in result["levels"]:
        table = Table(title=f"{level['level']}: A={a}  B={b}", title_justify="left")
        for column in ("metric", "A", "B", "change"):
            table.add_column(column, justify="left" if column == "metric" else "right")
        for row in level["rows"]:
            change = "-" if row["change"] is None else f"{row['change']:+.1%}"
            if row["better"] == "b":
                change = f"[green]{change}[/]"
            elif row["better"] == "a":
                change = f"[red]{change}[/]"
            table.add_row(
                row["label"],
                "-" if row["a"] is None else f"{row['a']:.2f}",
                "-" if row["b"] is None else f"{row['b']:.2f}",
                change,
            )
        output.console.print(table)


def register(app: typer.Typer) -> None:
    """Add `llmctl bench` (and `llmctl bench compare`) to the root app."""
    app.add_typer(bench_app, name="bench")
