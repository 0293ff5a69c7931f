"""Result files and terminal tables of ``llmctl bench``.

Files of one level: ``summary.json`` (our keys plus llmperf's flat key names), ``requests.json``
(one row per measured request), ``events.jsonl`` (every request's start, each content chunk with
its arrival time and text, and its end; warm-up requests flagged) and, for tools that glob for
them, copies named like llmperf's (``<model>_<in>_<out>_summary.json`` and
``..._individual_responses.json``). A sweep adds a top-level ``summary.json`` with one entry per
level.
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmctl.serving.client.bench.client import RequestRecord
from llmctl.serving.client.bench.loadgen import LoadResult
from llmctl.serving.client.bench.metrics import DEFINITIONS

if TYPE_CHECKING:
    from rich.console import Console

SUMMARY = "summary.json"


def clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def outcome_data(outcome: Any) -> dict[str, Any]:
    """`llmctl bench --json`: where the results went and the summary (or the sweep), JSON-safe."""
    data: dict[str, Any] = {
        "out_dir": str(outcome.out_dir),
        "interrupted": outcome.interrupted,
        "plots": outcome.plots,
        "plot_note": outcome.plot_note,
    }
    if outcome.sweep is not None:
        data["sweep"] = outcome.sweep
    elif outcome.levels:
        data["summary"] = outcome.levels[0].summary
    return dict(clean(data))


def encode(data: Any, indent: int | None = None) -> str:
    """JSON text of ``data`` with NaN and infinities as null; the walk through every value that
    :func:`clean` does is taken only when the fast, strict encoding finds one."""
    try:
        return (_STRICT if indent is None else _STRICT_INDENTED).encode(data)
    except ValueError:
        return json.dumps(clean(data), indent=indent)


# built once: json.dumps with any non-default argument builds a new encoder on every call
_STRICT = json.JSONEncoder(allow_nan=False)
_STRICT_INDENTED = json.JSONEncoder(allow_nan=False, indent=2)


def dump(path: Path, data: Any) -> None:
    path.write_text(encode(data, indent=2) + "\n")


def dump_rows(paths: list[Path], rows: list[dict[str, Any]]) -> None:
    """A JSON list with one row a line, encoded once and written to each of ``paths``.

    One compact row a line is what the C encoder of the json module writes (an indented file goes
    through its pure-Python encoder: about 0.3 CPU s for 256 requests of 100 tokens).
    """
    text = "[\n" + ",\n".join(encode(row) for row in rows) + "\n]\n" if rows else "[]\n"
    for path in paths:
        path.write_text(text)


def _event_lines(record: RequestRecord, t0: float) -> list[str]:
    """The lines of ``events.jsonl`` for one request: start, connection stamps, each chunk, end.

    A chunk's line is filled into a template with the json module's own string escaping and float
    repr, which is what its encoder writes for such a dict: a c64 run has 25,600 of them, and one
    encoder call per line took about a tenth of the whole CLI's CPU.
    """
    head, tail = _events(record, t0)
    prefix = f'{{"req": {record.index}, "event": "chunk", "t": '
    chunks = [
        f'{prefix}{when - t0!r}, "text": {encode_basestring_ascii(text)}}}\n'
        for when, text in zip(record.chunk_times, record.chunk_texts, strict=True)
    ]
    return [*(encode(event) + "\n" for event in head), *chunks, encode(tail) + "\n"]


def _events(record: RequestRecord, t0: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events of one request other than its chunks: those before them, and its end."""
    events: list[dict[str, Any]] = [
        {"req": record.index, "event": "start", "t": record.start - t0, "warmup": record.warmup}
    ]
    for name in ("connected", "written", "first_byte"):  # the new connection, request out, headers in
        when = getattr(record, name)
        if when is not None:
            events.append({"req": record.index, "event": name, "t": when - t0})
    events.append(
        {
            "req": record.index,
            "event": "end",
            "t": None if record.end is None else record.end - t0,
            "status": record.status,
            "error_type": record.error_type,
            "usage_prompt_tokens": record.usage_prompt_tokens,
            "usage_completion_tokens": record.usage_completion_tokens,
        }
    )
    return events[:-1], events[-1]


def llmperf_stem(model: str, mean_input_tokens: Any, mean_output_tokens: Any) -> str:
    """The stem of llmperf's result file names: ``<model>_<in>_<out>`` where every run of
    characters other than letters, digits, ``_`` and ``-`` became one ``-``, and runs of ``-``
    were squeezed to one (``01-ai/Yi-1.5-34B-Chat`` gives ``01-ai-Yi-1-5-34B-Chat_550_150``)."""
    stem = re.sub(r"[^\w-]+", "-", f"{model}_{mean_input_tokens}_{mean_output_tokens}")
    return re.sub(r"-{2,}", "-", stem)


def write_level(
    folder: Path, summary: dict[str, Any], rows: list[dict[str, Any]], result: LoadResult
) -> None:
    """Write one level's files into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    prompts = summary.get("prompts") or {}
    stem = llmperf_stem(
        str(summary["model"]), prompts.get("mean_input_tokens"), prompts.get("mean_output_tokens")
    )
    text = encode(summary, indent=2) + "\n"
    for name in (SUMMARY, f"{stem}_summary.json"):
        (folder / name).write_text(text)
    dump_rows([folder / "requests.json", folder / f"{stem}_individual_responses.json"], rows)
    with (folder / "events.jsonl").open("w") as out:
        for record in [*result.warmup_records, *result.records]:
            out.writelines(_event_lines(record, result.t0))


def sweep_entry(summary: dict[str, Any]) -> dict[str, Any]:
    load, metrics = summary["load"], summary["metrics"]
    return {
        "label": summary.get("label"),
        "concurrency": load["concurrency"],
        "requested_rate_rps": load["requested_rate_rps"],
        "achieved_rate_rps": load["achieved_rate_rps"],
        "completed": summary["counts"]["completed"],
        "error_rate": summary["counts"]["error_rate"],
        "output_throughput_tok_s": summary["throughput"]["output_throughput_tok_s"],
        "total_throughput_tok_s": summary["throughput"]["total_throughput_tok_s"],
        "requests_per_minute": summary["throughput"]["requests_per_minute"],
        "goodput_rps": (summary.get("goodput") or {}).get("goodput_rps"),
        "client_cpu_percent": load["client_cpu_percent"],
        **(
            {"prefix_cache_hit_rate": summary["prefix_cache"].get("hit_rate")}
            if "prefix_cache" in summary
            else {}
        ),
        **{
            f"{name}_{q}": metrics[name][q]
            for name in ("ttft_s", "ttft_answer_s", "tpot_s", "itl_s", "e2e_s")
            for q in ("p50", "p90", "p99")
            if name in metrics
        },
    }


def write_sweep(out_dir: Path, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    sweep = {
        "kind": "sweep",
        "tool": "llmctl bench",
        "model": summaries[0]["model"] if summaries else None,
        "levels": [sweep_entry(s) for s in summaries],
        "definitions": DEFINITIONS,
    }
    dump(out_dir / SUMMARY, sweep)
    return sweep


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _num(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


MIN_REQUESTS_FOR_RATE = 10


def prefix_cache_line(cache: dict[str, Any]) -> str:
    """One line on the server's prefix cache over the level (prefix_cache.py)."""
    if not cache["available"]:
        return f"prefix cache: {cache['note']}"
    rate = cache["hit_rate"]
    shown = "n/a" if rate is None else f"{rate:.1%}"
    return (
        f"prefix cache hit rate {shown} ({cache['hit_tokens']:,} of {cache['queried_tokens']:,} prompt "
        "tokens, the server's counters, warm-up included)"
    )


def render_level(console: Console, summary: dict[str, Any], *, definitions: bool = True) -> None:
    """The summary table of one level, then throughput, errors and how tokens were counted."""
    from rich.table import Table  # Rich only for the tables: `llmctl bench --json` never imports it

    metrics = summary["metrics"]
    load = summary["load"]
    what = (
        f"concurrency {load['concurrency']}"
        if load["mode"] == "closed"
        else f"rate {load['requested_rate_rps']:g}/s"
    )
    table = Table(title=f"{summary['model']} - {what}", title_justify="left")
    table.add_column("metric")
    for column in ("mean", "p50", "p90", "p99", "max"):
        table.add_column(column, justify="right")
    rows = [
        ("ttft_s", "TTFT (ms)"),
        ("tpot_s", "TPOT (ms)"),
        ("itl_s", "ITL (ms)"),
        ("e2e_s", "E2E latency (ms)"),
    ]
    if _answer_differs(metrics):
        # a reasoning model: its answer starts after the reasoning tokens
        rows.insert(1, ("ttft_answer_s", "first answer token (ms)"))
    for key, label in rows:
        stats = metrics[key]
        table.add_row(label, *(_ms(stats[c]) for c in ("mean", "p50", "p90", "p99", "max")))
    stats = metrics["request_output_throughput_tok_s"]
    table.add_row("tokens/s per request", *(_num(stats[c]) for c in ("mean", "p50", "p90", "p99", "max")))
    console.print(table)
    counts, thr = summary["counts"], summary["throughput"]
    console.print(
        f"completed {counts['completed']}/{counts['started']} in a {summary['duration_s']:.2f} s window "
        f"(after a {load.get('warmup_duration_s') or 0.0:.2f} s warm-up)  "
        f"output {thr['output_throughput_tok_s']:.1f} tok/s  total {thr['total_throughput_tok_s']:.1f} tok/s  "
        f"{thr['requests_per_minute']:.1f} req/min"
    )
    if (cache := summary.get("prefix_cache")) is not None:
        console.print(prefix_cache_line(cache))
    if counts["errors_by_type"]:
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(counts["errors_by_type"].items()))
        console.print(f"[red]errors[/] {errors} (error rate {counts['error_rate']:.1%})")
    if counts.get("rejected_by_status"):
        codes = ", ".join(f"HTTP {k}: {v}" for k, v in counts["rejected_by_status"].items())
        console.print(f"[yellow]rejected[/] {codes}")
    goodput = summary.get("goodput")
    if goodput:
        slo = ", ".join(f"{k}<={v * 1000:g}ms" for k, v in goodput["slo_s"].items())
        console.print(
            f"goodput {goodput['goodput_rps']:.2f} req/s ({goodput['requests_meeting_slo']} requests met {slo})"
        )
    # a rate over a handful of requests measures the scheduler, not the load: not shown
    rate = (
        f"achieved {_num(load['achieved_rate_rps'], 2)} req/s"
        if counts["started"] >= MIN_REQUESTS_FOR_RATE
        else f"achieved rate not shown ({counts['started']} requests, fewer than {MIN_REQUESTS_FOR_RATE})"
    )
    if load["requested_rate_rps"]:
        rate += f" of {load['requested_rate_rps']:g} requested"
        lag = load.get("start_lag_s") or {}
        if lag.get("p99") is not None:
            rate += f", start lag p99 {lag['p99'] * 1000:.1f} ms"
    loop_lag = load["loop_lag_s"].get("p99")
    loops = load.get("loops") or 1
    console.print(
        f"load generator: {rate}; CPU {load['client_cpu_percent']:.0f}%; "
        f"event-loop lag p99 {_ms(loop_lag)} ms" + (f"; {loops} event loops (processes)" if loops > 1 else "")
    )
    tokens = summary["tokens"]
    sources = ", ".join(f"{k}: {v}" for k, v in tokens["output_source"].items()) or "-"
    console.print(f"output token counts from {sources}; counter {tokens['counter']}")
    # the counter's note, said of the counts it made (none when the server's usage gave them all)
    counted = [
        what
        for what, by in (("output", tokens["output_source"]), ("input", tokens.get("input_source") or {}))
        if by.get("tokenizer")
    ]
    if tokens.get("note") and counted:
        console.print(f"[yellow]note ({' and '.join(counted)} counts):[/] {tokens['note']}")
    if load["interrupted"]:
        console.print("[yellow]stopped early (Ctrl-C): the numbers cover what was measured[/]")
    if definitions:
        render_definitions(console)


def _answer_differs(metrics: dict[str, Any]) -> bool:
    """Whether the time to the first answer token differs from TTFT (reasoning, or no answer)."""
    answer = metrics.get("ttft_answer_s")
    return answer is not None and (answer["count"], answer["mean"]) != (
        metrics["ttft_s"]["count"],
        metrics["ttft_s"]["mean"],
    )


def render_definitions(console: Console) -> None:
    console.print("[bold]definitions[/]")
    for key in (
        "ttft_s",
        "ttft_answer_s",
        "tpot_s",
        "itl_s",
        "e2e_s",
        "request_output_throughput_tok_s",
        "output_throughput_tok_s",
        "goodput_rps",
        "output_tokens",
    ):
        console.print(f"  [cyan]{key}[/]: {DEFINITIONS[key]}", soft_wrap=True)


def render_sweep(console: Console, sweep: dict[str, Any]) -> None:
    from rich.table import Table  # as in render_level

    table = Table(title=f"{sweep['model']} - sweep", title_justify="left")
    for column in (
        "level",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p50",
        "E2E p50",
        "out tok/s",
        "req/min",
        "errors",
        "client CPU",
    ):
        table.add_column(column, justify="right")
    for level in sweep["levels"]:
        table.add_row(
            str(level["label"]),
            _ms(level["ttft_s_p50"]),
            _ms(level["ttft_s_p99"]),
            _ms(level["tpot_s_p50"]),
            _ms(level["itl_s_p50"]),
            _ms(level["e2e_s_p50"]),
            _num(level["output_throughput_tok_s"]),
            _num(level["requests_per_minute"]),
            f"{level['error_rate']:.1%}",
            f"{level['client_cpu_percent']:.0f}%",
        )
    console.print(table)
    console.print("latencies in ms")
