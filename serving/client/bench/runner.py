"""A whole ``llmctl bench`` run: probe the endpoints, run every load level, write the results.

One level per value of ``--concurrency`` (closed loop) or ``--rate`` (open loop). With a single
level the results go straight into the output folder; a sweep writes one sub-folder per level
(``c8`` or ``r2.5``) plus a sweep ``summary.json`` and the plots against the load axis.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmctl import __version__
from llmctl.errors import BadInput, EndpointError
from llmctl.serving.client.bench import report, wire
from llmctl.serving.client.bench.client import probe, request_headers
from llmctl.serving.client.bench.loadgen import (
    LoadPlan,
    Progress,
    install_stop_on_sigint,
    run_blocking,
)
from llmctl.serving.client.bench.loops import loops_for, run_level
from llmctl.serving.client.bench.metrics import summarize
from llmctl.serving.client.bench.prefix_cache import level_hit_rate, metrics_urls, scrape
from llmctl.serving.client.bench.prompts import PromptFactory
from llmctl.serving.client.bench.replicas import ReplicaSource, sample_until
from llmctl.serving.client.bench.tokens import load_tokenizer
from llmctl.serving.client.bench.workloads import prompt_factory


@dataclass
class BenchConfig:
    """Everything ``llmctl bench`` was asked to do (URLs already resolved and normalized)."""

    endpoints: list[str]
    out_dir: Path
    model: str | None = None
    api_key: str | None = None
    concurrency: list[int] = field(default_factory=lambda: [1])
    rates: list[float] | None = None
    arrival: str = "poisson"
    max_concurrency: int | None = None
    requests: int | None = None
    duration: float | None = None
    warmup: int = 0
    timeout: float = 120.0
    mean_input_tokens: int = 512
    stddev_input_tokens: int = 20
    mean_output_tokens: int = 245
    stddev_output_tokens: int = 20
    max_output_tokens: int | None = None
    shared_prefix: bool = False
    fixed_output: bool = True
    tokenizer: str | None = None
    slo: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    plots: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    replicas: ReplicaSource | None = None  # sampled during each level (serving/bench/replicas.py)
    loops: int | None = None  # event loops per closed-loop level (--loops); None: chosen by concurrency
    # prefix-cache workloads (workloads.py) and where the server's prefix cache counters are read
    prefix_tokens: int | None = None
    prefix_groups: int | None = None
    conversations: int | None = None
    turns: int | None = None
    metrics_urls: list[str] | None = None

    def reads_prefix_cache(self) -> bool:
        """Whether each level reports the server's prefix cache hit rate."""
        return bool(self.prefix_tokens or self.conversations or self.metrics_urls)


@dataclass
class LevelResult:
    label: str
    folder: Path
    summary: dict[str, Any]


@dataclass
class BenchOutcome:
    out_dir: Path
    levels: list[LevelResult]
    sweep: dict[str, Any] | None
    interrupted: bool
    plots: list[str]
    plot_note: str | None


LevelCallback = Callable[[str, int, int], None]


def default_out_dir(root: Path | None = None) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return (root or Path("bench-results")) / stamp


async def resolve_model(config: BenchConfig) -> str:
    """Probe every endpoint (EndpointError when one is unreachable) and pick the model."""
    pool = wire.Pool()
    try:
        listed = [await probe(pool, url, config.api_key) for url in config.endpoints]
    finally:
        pool.close()
    if config.model:
        return config.model
    if listed[0]:
        return listed[0][0]
    raise EndpointError(
        f"{config.endpoints[0]} does not list its models, so the model name is unknown",
        "pass --model NAME",
    )


async def run_bench(
    config: BenchConfig,
    *,
    stop: asyncio.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_level: LevelCallback | None = None,
) -> BenchOutcome:
    """Run every level, writing each one's results as soon as it ends (also when stopped)."""
    stop = stop or asyncio.Event()
    model = await resolve_model(config)
    tokenizer = load_tokenizer(config.tokenizer)
    prompts = prompt_factory(
        tokenizer,
        prefix_tokens=config.prefix_tokens,
        prefix_groups=config.prefix_groups,
        conversations=config.conversations,
        turns=config.turns,
        mean_input_tokens=config.mean_input_tokens,
        stddev_input_tokens=config.stddev_input_tokens,
        mean_output_tokens=config.mean_output_tokens,
        stddev_output_tokens=config.stddev_output_tokens,
        max_output_tokens=config.max_output_tokens,
        seed=config.seed,
        shared_prefix=config.shared_prefix,
    )
    prompt_settings = {
        "mean_input_tokens": config.mean_input_tokens,
        "stddev_input_tokens": config.stddev_input_tokens,
        "mean_output_tokens": config.mean_output_tokens,
        "stddev_output_tokens": config.stddev_output_tokens,
        "max_output_tokens": config.max_output_tokens,
        "shared_prefix": config.shared_prefix,
        "nonce": None if config.shared_prefix else prompts.nonce,
        "fixed_output": config.fixed_output,
        "seed": config.seed,
        **workload_settings(config),
    }
    plans: list[tuple[str, LoadPlan]] = []
    base = LoadPlan(
        endpoints=config.endpoints,
        model=model,
        api_key=config.api_key,
        requests=config.requests,
        duration=config.duration,
        warmup=config.warmup,
        timeout=config.timeout,
        fixed_output=config.fixed_output,
        extra_body=config.extra_body,
        seed=config.seed,
    )
    if config.rates:
        for rate in config.rates:
            plan = dataclasses.replace(
                base, rate=rate, arrival=config.arrival, max_concurrency=config.max_concurrency
            )
            plans.append((f"r{rate:g}", plan))
    else:
        for concurrency in config.concurrency:
            plans.append((f"c{concurrency}", dataclasses.replace(base, concurrency=concurrency)))
    sweep = len(plans) > 1
    try:
        config.out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(
            f"cannot write results to {config.out_dir}: "
            + ("it is a file" if config.out_dir.is_file() else str(exc.strerror or exc)),
            "pass --out with a folder you can write to",
        ) from None
    levels: list[LevelResult] = []
    next_index = 0
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for number, (label, plan) in enumerate(plans):
        if stop.is_set():
            break
        if on_level is not None:
            on_level(label, number, len(plans))
        urls = metrics_urls(config.endpoints, config.metrics_urls) if config.reads_prefix_cache() else []
        headers = request_headers(config.api_key, stream=False)
        before = await scrape(urls, headers) if urls else None
        result, replica_samples = await _load_with_replicas(
            config, plan, prompts, stop, on_progress, next_index
        )
        after = await scrape(urls, headers) if urls else None
        # past every index used (several loops with --duration leave gaps in the range)
        next_index = max((r.index + 1 for r in (*result.records, *result.warmup_records)), default=next_index)
        summary, rows = summarize(result, tokenizer, slo=config.slo, prompt_settings=prompt_settings)
        summary["label"] = label
        if replica_samples is not None:
            summary["replicas"] = replica_samples
        if urls:
            summary["prefix_cache"] = level_hit_rate(before, after, urls)
        summary["started_at"] = started_at
        summary["llmctl_version"] = __version__
        folder = config.out_dir / label if sweep else config.out_dir
        report.write_level(folder, summary, rows, result)
        levels.append(LevelResult(label, folder, summary))
    sweep_summary = report.write_sweep(config.out_dir, [lv.summary for lv in levels]) if sweep else None
    plots: list[str] = []
    note: str | None = None
    if config.plots and levels:
        from llmctl.serving.client.bench import plots as plotting

        plots, note = plotting.plot_all(config.out_dir, levels_data(levels))
    if levels and not stop.is_set() and not any(lv.summary["counts"]["completed"] for lv in levels):
        _raise_all_failed(config, levels)
    return BenchOutcome(config.out_dir, levels, sweep_summary, stop.is_set(), plots, note)


async def _load_with_replicas(
    config: BenchConfig,
    plan: LoadPlan,
    prompts: PromptFactory,
    stop: asyncio.Event,
    on_progress: Callable[[Progress], None] | None,
    first_index: int,
) -> tuple[Any, list[dict[str, Any]] | None]:
    """One level's load, with the replicas sampled beside it when the endpoint has a source (the
    samples' clock starts with the level, like the requests' `start_s`)."""
    loops = loops_for(plan, config.loops)
    if config.replicas is None:
        return await run_level(
            plan, prompts, loops, stop=stop, on_progress=on_progress, first_index=first_index
        ), None
    done = asyncio.Event()
    sampler = asyncio.create_task(sample_until(config.replicas, done, time.monotonic()))
    try:
        result = await run_level(
            plan, prompts, loops, stop=stop, on_progress=on_progress, first_index=first_index
        )
    finally:
        done.set()
    return result, await sampler


def workload_settings(config: BenchConfig) -> dict[str, Any]:
    """What the summary's ``prompts`` says about a prefix-cache workload (nothing for plain prompts)."""
    if config.prefix_tokens:
        return {
            "workload": "shared-prefix",
            "prefix_tokens": config.prefix_tokens,
            "prefix_groups": config.prefix_groups or 1,
        }
    if config.conversations:
        return {
            "workload": "conversations",
            "conversations": config.conversations,
            "turns": config.turns or 1,
        }
    return {}


def _raise_all_failed(config: BenchConfig, levels: list[LevelResult]) -> None:
    """No request completed at any level: the numbers mean nothing, so say why and exit non-zero."""
    errors: dict[str, int] = {}
    for level in levels:
        for kind, count in level.summary["counts"]["errors_by_type"].items():
            errors[kind] = errors.get(kind, 0) + int(count)
    raise EndpointError(
        f"every request failed ({', '.join(f'{count} x {kind}' for kind, count in errors.items())})",
        f"the error text of each request is in {config.out_dir} (requests.json); check --model, that "
        "--mean-output-tokens fits the server's limit, and the server logs",
    )


def levels_data(levels: list[LevelResult]) -> list[tuple[dict[str, Any], Path]]:
    return [(lv.summary, lv.folder) for lv in levels]


def run_bench_blocking(
    config: BenchConfig,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    on_level: LevelCallback | None = None,
) -> BenchOutcome:
    """Run in a fresh event loop; the first Ctrl-C stops cleanly and keeps what was measured."""

    async def main() -> BenchOutcome:
        stop = asyncio.Event()
        remove = install_stop_on_sigint(stop)
        try:
            return await run_bench(config, stop=stop, on_progress=on_progress, on_level=on_level)
        finally:
            remove()

    return run_blocking(main)
