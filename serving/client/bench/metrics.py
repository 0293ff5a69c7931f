"""Metric definitions and the statistics of a run, derived from the raw per-chunk records.

Every number in a report is defined in :data:`DEFINITIONS` (printed with the report and stored in
``summary.json``). Latency statistics cover completed requests only; failed, timed-out and
cancelled requests are counted by type and in the error rate, never silently dropped.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from typing import Any

from llmctl.errors import BadInput, did_you_mean
from llmctl.serving.client.bench.client import RequestRecord
from llmctl.serving.client.bench.loadgen import LoadResult
from llmctl.serving.client.bench.tokens import APPROX_NOTE, Tokenizer

DEFINITIONS: dict[str, str] = {
    "ttft_s": "time to first token: from the moment the request was written to the socket (its last "
    "byte) to the arrival of the first token event, whatever its channel: answer content, reasoning "
    "(reasoning / reasoning_content), tool calls, or an empty delta after the role chunk (a token that "
    "is an incomplete UTF-8 sequence); the role-only chunk does not count. This is what vLLM's own "
    "time_to_first_token histogram and `vllm bench serve` measure; a new connection's connect time is "
    "connect_s, the client's preparation send_delay_s",
    "ttft_answer_s": "time to first answer token: from the same moment to the arrival of the first "
    "non-empty answer content (after a reasoning model's reasoning); equals ttft_s for a model that "
    "does not reason, none when the answer had no content",
    "tpot_s": "time per output token, one value per request: (e2e - ttft) / (output_tokens - 1); "
    "requests with fewer than 2 output tokens have none",
    "itl_s": "inter-token latency: each gap between consecutive token-event chunks (any channel) "
    "divided by the number of tokens in the later chunk, one sample per token, pooled over all requests",
    "inter_chunk_gap_s": "raw gap between consecutive token-event chunks, pooled over all requests",
    "e2e_s": "end-to-end latency: from the moment the request was written to the end of its stream ([DONE])",
    "request_output_throughput_tok_s": "output tokens / e2e, one value per request",
    "e2e_per_output_token_s": "e2e / output tokens per request, TTFT included: what llmperf calls "
    "inter_token_latency_s (the summary's results_inter_token_latency_s_* are its statistics)",
    "output_throughput_tok_s": "output tokens of all completed requests / measured duration",
    "total_throughput_tok_s": "input + output tokens of all completed requests / measured duration",
    "requests_per_minute": "completed requests / measured duration x 60",
    "goodput_rps": "completed requests that meet every --slo limit / measured duration",
    "duration_s": "the measured window: from the first request's last byte written to the socket (its "
    "requests start every slot at once in a closed loop, at the schedule's first instant in an open "
    "loop) to the end of its last request; the warm-up phase has ended before it opens",
    "lead_in_s": "the client's own time from the window's first instant to its first request written "
    "(building and handing a burst of requests to the HTTP client); not part of duration_s",
    "warmup_duration_s": "wall time of the warm-up phase (one connection opened per slot, then the "
    "warm-up requests, all ended before the window opens)",
    "achieved_rate_rps": "(requests started - 1) / (last start - first start): the rate at which the "
    "load generator really sent requests (compare with the requested rate)",
    "start_lag_s": "open loop: actual start - scheduled start of each request",
    "send_delay_s": "client-side time from beginning a request to its last byte written to the socket, "
    "connect time included (latencies count from that write; a large value means the load generator "
    "is the bottleneck)",
    "connect_s": "TCP connect time of the requests that opened a new connection (the others reuse one "
    "of the connections opened before the window)",
    "error_rate": "failed requests (HTTP errors, stream errors, timeouts, cancelled) / started requests",
    "rejected_by_status": "failed requests answered with an HTTP error status, by status code (413 too "
    "large, 429 shed by a full queue, 503 draining or unavailable)",
    "client_cpu_percent": "CPU time of the load generator (every loop's process) in the window / "
    "measured duration",
    "loop_lag_s": "how late the load generator's 10 ms timer fires (samples of every loop); large "
    "values mean the client itself is saturated and its latency figures are inflated",
    "loops": "event loops the level ran on: one, or worker processes each with its share of the slots "
    "(--loops, else chosen by concurrency); worker_peak_rss_mib is each worker's peak RSS",
    "output_tokens": "the server's usage.completion_tokens when sent (stream_options.include_usage; "
    "it counts reasoning tokens), otherwise counted with the tokenizer over the answer and the "
    "reasoning text; tokens.output_source says which",
}

QUANTILES = (25, 50, 75, 90, 95, 99)
SLO_KEYS = ("ttft", "tpot", "e2e")
_SLO_ITEM = re.compile(r"^\s*([a-z0-9_]+)\s*=\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$")


def _rejected_by_status(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Failed requests the server answered with an HTTP error status, by code."""
    codes = Counter(
        str(r["http_status"]) for r in rows if r["status"] != "ok" and (r["http_status"] or 0) >= 400
    )
    return dict(sorted(codes.items()))


def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolation quantile (q in 0..100) of already sorted values."""
    if not sorted_values:
        return math.nan
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def describe(values: list[float]) -> dict[str, float | int | None]:
    """count, mean, stddev (sample), min, max and the quantiles p25..p99; None when empty."""
    data = sorted(v for v in values if v is not None and not math.isnan(v))
    if not data:
        empty: dict[str, float | int | None] = {
            "count": 0,
            "mean": None,
            "stddev": None,
            "min": None,
            "max": None,
        }
        empty.update({f"p{q}": None for q in QUANTILES})
        return empty
    mean = math.fsum(data) / len(data)
    var = math.fsum((v - mean) ** 2 for v in data) / (len(data) - 1) if len(data) > 1 else 0.0
    stats: dict[str, float | int | None] = {
        "count": len(data),
        "mean": mean,
        "stddev": math.sqrt(var),
        "min": data[0],
        "max": data[-1],
    }
    for q in QUANTILES:
        stats[f"p{q}"] = quantile(data, q)
    return stats


def parse_slo(text: str | None) -> dict[str, float]:
    """``ttft=500ms,tpot=50ms,e2e=20s`` -> seconds per metric (a bare number means seconds)."""
    if not text:
        return {}
    slo: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        match = _SLO_ITEM.match(item.lower())
        if not match:
            raise BadInput(
                f"bad --slo item {item.strip()!r}",
                "write it as name=value[ms|s], e.g. --slo ttft=500ms,tpot=50ms",
            )
        name, value, unit = match.groups()
        if name not in SLO_KEYS:
            hint = did_you_mean(name, SLO_KEYS) or f"choose from {', '.join(SLO_KEYS)}"
            raise BadInput(f"unknown --slo metric {name!r}", hint)
        seconds = float(value) / 1000.0 if unit == "ms" else float(value)
        if seconds <= 0:
            raise BadInput(f"--slo {name} must be positive", "e.g. --slo ttft=500ms")
        slo[name] = seconds
    return slo


def _chunk_token_counts(record: RequestRecord, total: int, tokenizer: Tokenizer) -> list[int]:
    """Tokens per token-event chunk: one each when the total equals the chunk count, else counted."""
    if total == len(record.chunk_texts):
        return [1] * total
    return [max(1, tokenizer.count(text)) for text in record.chunk_texts]


def request_metrics(
    record: RequestRecord, tokenizer: Tokenizer, t0: float, slo: dict[str, float] | None = None
) -> dict[str, Any]:
    """The per-request row: timings relative to ``t0``, token counts with their source, SLO result."""
    text = "".join(record.chunk_texts)
    if record.usage_completion_tokens is not None:
        out_tokens, out_source = int(record.usage_completion_tokens), "usage"
    else:
        out_tokens, out_source = tokenizer.count(text), "tokenizer"
    if record.usage_prompt_tokens is not None:
        in_tokens, in_source = int(record.usage_prompt_tokens), "usage"
    else:
        in_tokens, in_source = record.input_tokens_sent, "tokenizer"
    sent = record.sent
    ttft = record.chunk_times[0] - sent if record.chunk_times else None
    ttft_answer = None if record.first_answer is None else record.first_answer - sent
    e2e = record.end - sent if record.ok and record.end is not None else None
    tpot = (
        (e2e - ttft) / (out_tokens - 1) if e2e is not None and ttft is not None and out_tokens > 1 else None
    )
    gaps = [b - a for a, b in itertools.pairwise(record.chunk_times)]
    counts = _chunk_token_counts(record, out_tokens, tokenizer)[1:]
    itl = [gap / n for gap, n in zip(gaps, counts, strict=True)]
    row: dict[str, Any] = {
        "index": record.index,
        "endpoint": record.endpoint,
        "warmup": record.warmup,
        "status": record.status,
        "error_type": record.error_type,
        "error": record.error,
        "http_status": record.http_status,
        "finish_reason": record.finish_reason,
        "scheduled_s": None if record.scheduled is None else record.scheduled - t0,
        "start_s": record.start - t0,
        "end_s": None if record.end is None else record.end - t0,
        "start_lag_s": None if record.scheduled is None else record.start - record.scheduled,
        "send_delay_s": sent - record.issued,
        "connect_s": record.connect_s,
        "written_s": None if record.written is None else record.written - t0,
        "first_byte_s": None if record.first_byte is None else record.first_byte - t0,
        "ttft_s": ttft,
        "ttft_answer_s": ttft_answer,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "input_tokens": in_tokens,
        "input_token_source": in_source,
        "output_tokens": out_tokens,
        "output_token_source": out_source,
        "max_tokens": record.max_tokens,
        "chunks": len(record.chunk_times),
        "request_output_throughput_tok_s": out_tokens / e2e if e2e else None,
        "e2e_per_output_token_s": e2e / out_tokens if e2e and out_tokens else None,
        "itl_s": itl,
        "inter_chunk_gaps_s": gaps,
        "itl_weights": counts,
    }
    row.update(llmperf_request_keys(row))
    if slo:
        row["meets_slo"] = bool(
            record.ok
            and all(
                row[f"{name}_s"] is not None and row[f"{name}_s"] <= limit
                for name, limit in slo.items()
                if name != "tpot" or out_tokens > 1
            )
        )
    return row


def summarize(
    result: LoadResult,
    tokenizer: Tokenizer,
    *,
    slo: dict[str, float] | None = None,
    prompt_settings: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary of one run (stable keys, llmperf keys included) and the per-request rows."""
    plan = result.plan
    rows = [request_metrics(r, tokenizer, result.t0, slo) for r in result.records]
    done = [row for row in rows if row["status"] == "ok"]
    duration = max(result.t_end - result.window_start, 1e-9)
    errors = Counter(str(row["error_type"]) for row in rows if row["status"] != "ok")
    started = len(rows)
    out_total = sum(row["output_tokens"] for row in done)
    in_total = sum(row["input_tokens"] for row in done)

    itl: list[float] = []
    for row in done:
        for value, weight in zip(row["itl_s"], row["itl_weights"], strict=True):
            itl.extend([value] * weight)
    gaps = [gap for row in done for gap in row["inter_chunk_gaps_s"]]

    def col(name: str) -> list[float]:
        return [row[name] for row in done if row[name] is not None]

    metrics = {
        "ttft_s": describe(col("ttft_s")),
        "ttft_answer_s": describe(col("ttft_answer_s")),
        "tpot_s": describe(col("tpot_s")),
        "itl_s": describe(itl),
        "inter_chunk_gap_s": describe(gaps),
        "e2e_s": describe(col("e2e_s")),
        "request_output_throughput_tok_s": describe(col("request_output_throughput_tok_s")),
        "e2e_per_output_token_s": describe(col("e2e_per_output_token_s")),
        "send_delay_s": describe([row["send_delay_s"] for row in rows]),
        "connect_s": describe([row["connect_s"] for row in rows if row["connect_s"] is not None]),
        "input_tokens": describe([float(row["input_tokens"]) for row in done]),
        "output_tokens": describe([float(row["output_tokens"]) for row in done]),
    }
    lags = [row["start_lag_s"] for row in rows if row["start_lag_s"] is not None]
    load: dict[str, Any] = {
        "mode": plan.mode,
        "concurrency": plan.concurrency if plan.mode == "closed" else None,
        "requested_rate_rps": plan.rate,
        "arrival": plan.arrival if plan.mode == "open" else None,
        "max_concurrency": plan.max_concurrency,
        "request_limit": plan.request_limit(),
        "duration_limit_s": plan.duration,
        "warmup_requests": len(result.warmup_records),
        "warmup_duration_s": result.warmup_seconds,
        "lead_in_s": result.window_start - result.t0,
        "timeout_s": plan.timeout,
        "achieved_rate_rps": _start_rate(rows),
        "start_lag_s": describe(lags) if lags else None,
        "client_cpu_seconds": result.cpu_seconds,
        "client_cpu_percent": 100.0 * result.cpu_seconds / duration,
        "client_cpu_seconds_per_1k_tokens": 1000.0 * result.cpu_seconds / out_total if out_total else None,
        "loop_lag_s": describe(result.loop_lag),
        "loops": result.loops,
        "worker_peak_rss_mib": result.worker_peak_rss_mib,
        "interrupted": result.interrupted,
    }
    sources_out = Counter(row["output_token_source"] for row in rows)
    sources_in = Counter(row["input_token_source"] for row in rows)
    tokens: dict[str, Any] = {
        "counter": tokenizer.name,
        "exact": tokenizer.exact,
        "note": None if tokenizer.exact else APPROX_NOTE,
        "output_source": dict(sources_out),
        "input_source": dict(sources_in),
    }
    goodput: dict[str, Any] | None = None
    if slo:
        good = sum(1 for row in done if row.get("meets_slo"))
        goodput = {
            "slo_s": slo,
            "requests_meeting_slo": good,
            "fraction_of_started": good / started if started else None,
            "goodput_rps": good / duration,
        }
    summary: dict[str, Any] = {
        "tool": "llmctl bench",
        "model": plan.model,
        "endpoints": plan.endpoints,
        "load": load,
        "prompts": prompt_settings or {},
        "tokens": tokens,
        "counts": {
            "started": started,
            "completed": len(done),
            "failed": started - len(done),
            "errors_by_type": dict(errors),
            "error_codes": dict(Counter(row["error_code"] for row in rows if row["status"] != "ok")),
            "error_rate": (started - len(done)) / started if started else 0.0,
            "rejected_by_status": _rejected_by_status(rows),
        },
        "duration_s": duration,
        "throughput": {
            "output_throughput_tok_s": out_total / duration,
            "total_throughput_tok_s": (in_total + out_total) / duration,
            "requests_per_s": len(done) / duration,
            "requests_per_minute": 60.0 * len(done) / duration,
        },
        "goodput": goodput,
        "metrics": metrics,
        "definitions": DEFINITIONS,
    }
    summary.update(llmperf_keys(summary))
    return summary, rows


def _start_rate(rows: list[dict[str, Any]]) -> float | None:
    starts: list[float] = sorted(float(row["start_s"]) for row in rows)
    if len(starts) < 2 or starts[-1] <= starts[0]:
        return None
    return (len(starts) - 1) / (starts[-1] - starts[0])


def llmperf_request_keys(row: dict[str, Any]) -> dict[str, Any]:
    """llmperf's per-request keys, with llmperf's meanings, from one of our rows.

    ``error_code``: null when the request completed, the HTTP status of an HTTP error, else -1 (no
    status: timeout, connection or stream error); ``error_msg``: "" or the error text;
    ``inter_token_latency_s``: e2e / output tokens (TTFT included); ``number_total_tokens``: input
    + output tokens. Latencies of a failed request are null (llmperf writes 0).
    """
    ok = row["status"] == "ok"
    code: int | None = None
    if not ok:
        code = int(row["http_status"]) if str(row["error_type"]).startswith("http_") else -1
    return {
        "error_code": code,
        "error_msg": "" if ok else str(row["error"] or row["error_type"]),
        "inter_token_latency_s": row["e2e_per_output_token_s"],
        "end_to_end_latency_s": row["e2e_s"],
        "request_output_throughput_token_per_s": row["request_output_throughput_tok_s"],
        "number_total_tokens": row["input_tokens"] + row["output_tokens"],
        "number_output_tokens": row["output_tokens"],
        "number_input_tokens": row["input_tokens"],
    }


# llmperf's summary statistics: its name -> our metric with the same meaning
_LLMPERF_METRICS = {
    "ttft_s": "ttft_s",
    "inter_token_latency_s": "e2e_per_output_token_s",
    "end_to_end_latency_s": "e2e_s",
    "request_output_throughput_token_per_s": "request_output_throughput_tok_s",
    "number_input_tokens": "input_tokens",
    "number_output_tokens": "output_tokens",
}


def llmperf_keys(summary: dict[str, Any]) -> dict[str, Any]:
    """llmperf's flat summary keys, each with llmperf's meaning, so its dashboards keep working.

    ``results_<metric>_quantiles_p<q>`` / ``_mean`` / ``_min`` / ``_max`` / ``_stddev`` over the
    completed requests, for ttft_s, inter_token_latency_s (e2e / output tokens),
    end_to_end_latency_s, request_output_throughput_token_per_s, number_input_tokens and
    number_output_tokens; counts, error rate, the error-code frequency and throughput beside them.
    """
    keys: dict[str, Any] = {}
    for theirs, ours in _LLMPERF_METRICS.items():
        stats = summary["metrics"][ours]
        for q in QUANTILES:
            keys[f"results_{theirs}_quantiles_p{q}"] = stats[f"p{q}"]
        for stat in ("mean", "min", "max", "stddev"):
            keys[f"results_{theirs}_{stat}"] = stats[stat]
    counts, throughput = summary["counts"], summary["throughput"]
    prompts = summary.get("prompts") or {}
    keys.update(
        {
            "results_num_requests_started": counts["started"],
            "results_error_rate": counts["error_rate"],
            "results_number_errors": counts["failed"],
            "results_error_code_frequency": str(counts["error_codes"]),
            "results_mean_output_throughput_token_per_s": throughput["output_throughput_tok_s"],
            "results_num_completed_requests": counts["completed"],
            "results_num_completed_requests_per_min": throughput["requests_per_minute"],
            "mean_output_throughput_token_per_s": throughput["output_throughput_tok_s"],
            "num_completed_requests": counts["completed"],
            "num_completed_requests_per_min": throughput["requests_per_minute"],
            "num_concurrent_requests": summary["load"]["concurrency"],
            "mean_input_tokens": prompts.get("mean_input_tokens"),
            "stddev_input_tokens": prompts.get("stddev_input_tokens"),
            "mean_output_tokens": prompts.get("mean_output_tokens"),
            "stddev_output_tokens": prompts.get("stddev_output_tokens"),
        }
    )
    return keys
