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

from llmctl.cli import options

bench_app = typer.Typer(
    name="bench",
    help="Benchmark an OpenAI-compatible endpoint (TTFT, TPOT, ITL, throughput, goodput).",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode="rich",
)


@bench_app.callback(invoke_without_command=True)
def bench(
    ctx: typer.Context,
    endpoint: list[str] = typer.Option(
        None,
        "--endpoint",
        "-e",
        help="OpenAI base URL, e.g. http://localhost:8000/v1 (repeat for round-robin).",
    ),
    blueprint: str | None = options.SOME_DEPLOYED,
    stack: str = options.STACK,
    model: str | None = options.MODEL_NAME,
    api_key: str | None = options.API_KEY,
    concurrency: str = typer.Option(
        None,
        "--concurrency",
        "-c",
        "--num-concurrent-requests",
        help="Closed loop: requests in flight; a list (1,2,4,8,16) runs a sweep. Default 1.",
    ),
    rate: str = typer.Option(
        None, "--rate", help="Open loop: requests per second (a list runs a sweep) instead of --concurrency."
    ),
    arrival: str = typer.Option("poisson", "--arrival", help="Open-loop arrivals: poisson or constant."),
    max_concurrency: int = typer.Option(
        None, "--max-concurrency", min=1, help="Cap on requests in flight (open loop)."
    ),
    requests: int = typer.Option(
        None,
        "--requests",
        "-n",
        "--max-num-completed-requests",
        min=1,
        help="Measured requests per level (default: max(50, 8 x concurrency) unless --duration is set).",
    ),
    duration: float = typer.Option(
        None, "--duration", min=0.1, help="Seconds per level (with --requests: whichever ends first)."
    ),
    warmup: int = typer.Option(
        2, "--warmup", min=0, help="Warm-up requests per level, excluded from the results."
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", min=0.1, help="Per-request timeout in seconds (counted as incomplete)."
    ),
    mean_input_tokens: int = typer.Option(
        512, "--mean-input-tokens", min=1, help="Mean prompt length in tokens."
    ),
    stddev_input_tokens: int = typer.Option(
        20, "--stddev-input-tokens", min=0, help="Stddev of the prompt length."
    ),
    mean_output_tokens: int = typer.Option(
        245, "--mean-output-tokens", min=1, help="Mean output length (max_tokens)."
    ),
    stddev_output_tokens: int = typer.Option(
        20, "--stddev-output-tokens", min=0, help="Stddev of the output length."
    ),
    max_output_tokens: int = typer.Option(
        None,
        "--max-output-tokens",
        min=1,
        help="Cap on requested output tokens (default with --blueprint: its serving.max_new_tokens).",
    ),
    shared_prefix: bool = typer.Option(
        False,
        "--shared-prefix",
        help="Let prompts share a prefix (no per-request nonce), so prefix caching can hit.",
    ),
    fixed_output: bool = typer.Option(
        True, "--fixed-output/--no-fixed-output", help="Ask for exactly max_tokens (ignore_eos, min_tokens)."
    ),
    tokenizer: str = typer.Option(
        None, "--tokenizer", help="Tokenizer path or Hugging Face id for exact counts (needs transformers)."
    ),
    slo: str = typer.Option(None, "--slo", help="Goodput limits, e.g. ttft=500ms,tpot=50ms,e2e=20s."),
    extra_body: str = typer.Option(
        None, "--extra-body", "--additional-sampling-params", help="JSON merged into every request body."
    ),
    llm_api: str = typer.Option(
        "openai", "--llm-api", hidden=True, help="Accepted for llmperf compatibility."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for prompt lengths, excerpts and arrivals."),
    out: Path = typer.Option(
        None, "--out", "-o", "--results-dir", help="Results folder (default: bench-results/<timestamp>)."
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write PNG plots (needs matplotlib)."),
    json: bool = options.JSON,
) -> None:
    """Measure an endpoint: [bold]llmctl bench -e http://localhost:8000/v1 -c 1,4,16[/]."""
    if ctx.invoked_subcommand is not None:
        return
    from llmctl.cli import output

    output.start(json_output=json)
    from llmctl.serving.bench.options import bench_config

    config = bench_config(
        endpoints=endpoint,
        blueprint=blueprint,
        stack=stack,
        concurrency=concurrency,
        rate=rate,
        arrival=arrival,
        llm_api=llm_api,
        slo=slo,
        extra_body=extra_body,
        model=model,
        max_output_tokens=max_output_tokens,
        out=out,
        api_key=api_key,
        max_concurrency=max_concurrency,
        requests=requests,
        duration=duration,
        warmup=warmup,
        timeout=timeout,
        mean_input_tokens=mean_input_tokens,
        stddev_input_tokens=stddev_input_tokens,
        mean_output_tokens=mean_output_tokens,
        stddev_output_tokens=stddev_output_tokens,
        shared_prefix=shared_prefix,
        fixed_output=fixed_output,
        tokenizer=tokenizer,
        seed=seed,
        plots=plots,
    )
    outcome = _run_with_progress(config, show=not json)
    from llmctl.serving.bench import report

    if json:
        output.emit_json(report.outcome_data(outcome))
    else:
        console = output.console
        if outcome.sweep is not None:
            for level in outcome.levels:
                report.render_level(console, level.summary, definitions=False)
            report.render_sweep(console, outcome.sweep)
            report.render_definitions(console)
        elif outcome.levels:
            report.render_level(console, outcome.levels[0].summary)
        console.print(f"results: {outcome.out_dir}")
        if outcome.plot_note:
            console.print(f"[yellow]{outcome.plot_note}[/]")
    if outcome.interrupted:
        raise typer.Exit(130)


def _run_with_progress(config: Any, *, show: bool) -> Any:
    from llmctl.serving.bench.runner import run_bench_blocking

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
    from llmctl.serving.bench.compare import compare as compare_folders
    from llmctl.serving.bench.report import clean

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
