"""Errors, stalls and Ctrl-C: counted by type, never dropped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from llmctl.serving.client.bench.loadgen import LoadPlan
from llmctl.serving.client.bench.metrics import summarize
from llmctl.serving.client.bench.runner import BenchConfig, run_bench
from llmctl.serving.client.bench.tokens import ApproxTokenizer


def test_http_errors_are_counted_by_type(fake: Any, run_plan: Any) -> None:
    url = fake(ttft=0.005, tpot=0.001, error_every=4, error_status=503)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=2, requests=20)
    summary, rows = summarize(run_plan(plan), ApproxTokenizer())
    counts = summary["counts"]
    assert counts["started"] == 20
    assert counts["errors_by_type"] == {"http_503": 5}
    assert counts["rejected_by_status"] == {"503": 5}
    assert counts["completed"] == 15
    assert counts["error_rate"] == 0.25
    assert summary["metrics"]["ttft_s"]["count"] == 15
    assert summary["results_number_errors"] == 5
    failed = [r for r in rows if r["status"] == "error"]
    assert all(r["http_status"] == 503 and r["e2e_s"] is None for r in failed)


def test_stalled_requests_time_out_and_keep_their_partial_output(fake: Any, run_plan: Any) -> None:
    url = fake(ttft=0.005, tpot=0.002, stall_every=3, stall_after=4, stall_seconds=30)
    # 1 s: the other requests end in about 50 ms, far inside it even on a busy machine
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=3, requests=9, timeout=1.0)
    result = run_plan(plan)
    summary, rows = summarize(result, ApproxTokenizer())
    assert summary["counts"]["started"] == 9
    assert summary["counts"]["errors_by_type"] == {"timeout": 3}
    assert summary["counts"]["rejected_by_status"] == {}  # timed out after a 200: not a rejection
    timed_out = [r for r in rows if r["error_type"] == "timeout"]
    assert all(r["chunks"] == 4 and r["ttft_s"] is not None for r in timed_out)
    # the timeout counts from the moment the client began the request; it cannot fire early (a
    # timer may be 1 ms early), and 2 s is the generous bound of a busy machine (test_bench_timing)
    assert all(0.999 <= r["end_s"] - r["start_s"] + r["send_delay_s"] < 1.0 + 2.0 for r in timed_out)


def test_midstream_error_events_are_stream_errors(fake: Any, run_plan: Any) -> None:
    url = fake(ttft=0.005, tpot=0.001, midstream_error_every=2, stall_after=3)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=1, requests=4)
    summary, _ = summarize(run_plan(plan), ApproxTokenizer())
    assert summary["counts"]["errors_by_type"] == {"stream_error": 2}


def test_connection_refused_is_a_connect_error(run_plan: Any) -> None:
    plan = LoadPlan(endpoints=["http://127.0.0.1:9/v1"], model="m", concurrency=1, requests=2, timeout=5)
    summary, _ = summarize(run_plan(plan), ApproxTokenizer())
    assert summary["counts"]["errors_by_type"] == {"connect_error": 2}


def test_stop_cancels_in_flight_requests_and_keeps_them(fake: Any, run_plan: Any) -> None:
    # every second request stalls after 2 tokens, so each slot soon holds a stalled request and
    # keeps it: when the stop comes, 3 s later (ample for the few short requests before, even on a
    # busy machine), exactly the four slots are in flight, whatever the timing
    url = fake(ttft=0.001, tpot=0.001, stall_every=2, stall_after=2, stall_seconds=3600)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=4, requests=1000)
    result = run_plan(plan, stop_after=3.0)
    assert result.interrupted
    statuses = {r.status for r in result.records}
    assert statuses == {"ok", "error"}
    cancelled = [r for r in result.records if r.error_type == "cancelled"]
    assert len(cancelled) == 4
    assert all(len(r.chunk_times) == 2 for r in cancelled)  # what arrived before the stop is kept
    assert len(result.records) < 100


def test_stopped_sweep_still_writes_results(fake: Any, tmp_path: Path) -> None:
    # as above: both slots of the first level end up holding stalled requests, so the stop (after
    # 3 s) finds them in flight and the second level never starts
    url = fake(ttft=0.001, tpot=0.001, stall_every=2, stall_after=2, stall_seconds=3600)
    config = BenchConfig(
        endpoints=[url],
        out_dir=tmp_path / "out",
        concurrency=[2, 4],
        requests=1000,
        mean_input_tokens=32,
        mean_output_tokens=10,
        stddev_output_tokens=0,
        plots=False,
    )

    async def main() -> Any:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(3.0, stop.set)
        return await run_bench(config, stop=stop)

    outcome = asyncio.run(main())
    assert outcome.interrupted
    assert len(outcome.levels) == 1  # the second level never started
    summary = outcome.levels[0].summary
    assert summary["load"]["interrupted"] is True
    assert summary["counts"]["errors_by_type"].get("cancelled") == 2
    assert (tmp_path / "out" / "c2" / "summary.json").exists()
    assert (tmp_path / "out" / "c2" / "events.jsonl").stat().st_size > 0
