"""Live runs against the fake server: the phases and the plumbing, with bounds that hold when busy.

The test machine has 2 cores shared by many processes. While these tests were written, eight test
suites ran beside them, and p50 TTFT came out up to 0.4 s late at concurrency 64 in a bad second:
neither the client nor the server gets the CPU when its timer fires. So these tests assert

* exact facts (counts, token sources, the order of phases) that no delay can change;
* lower bounds that follow from causality: the client stamps a request's start before the server
  reads it, and the server never sends a chunk earlier than its schedule minus its timer lead (at
  most 1 ms, see testserver._INITIAL_LEAD), so a measured TTFT or e2e is never below the schedule
  minus 1 ms; LOWER_SLACK keeps another millisecond for clock reads;
* upper bounds of 2 s above the schedule (UPPER_SLACK), five times the worst delay seen, which
  only a systematic error can cross.

The arithmetic of the metrics is tested exactly on recorded streams (test_bench_metrics.py), and
the accuracy figures (TTFT within milliseconds, throughput within 3 %) are measured by
``make bench`` (benchmarks/bench_accuracy.py), never asserted here.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from llmctl.serving.client.bench.loadgen import LoadPlan, run_blocking, run_load
from llmctl.serving.client.bench.metrics import summarize
from llmctl.serving.client.bench.tokens import ApproxTokenizer

TTFT = 0.040
TPOT = 0.010
LOWER_SLACK = 0.002
# How late a stream may end against the server's schedule and still pass: a bound that holds on a
# busy 2-core machine (one `make test` saw a c64 stream end 2.0 s late while the lifecycle tests ran
# beside it); it catches a hang, not a slow client. The tight figures live in benchmarks/bench_accuracy.py.
UPPER_SLACK = 10.0


@pytest.mark.parametrize(("concurrency", "requests"), [(1, 6), (16, 32), (64, 128)])
def test_latencies_are_bounded_by_the_server_schedule(
    fake: Any, run_plan: Any, make_prompts: Any, concurrency: int, requests: int
) -> None:
    url = fake(ttft=TTFT, tpot=TPOT)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=concurrency, requests=requests, warmup=2)
    result = run_plan(plan, make_prompts(mean_out=24, std_out=8))
    summary, rows = summarize(result, ApproxTokenizer())
    assert summary["counts"]["completed"] == requests
    assert summary["tokens"]["output_source"] == {"usage": requests}
    for row in rows:
        # usage-based counts are exact: the server streams exactly max_tokens tokens, one per chunk
        assert row["output_token_source"] == "usage"
        assert row["output_tokens"] == row["max_tokens"] == row["chunks"]
        schedule_e2e = TTFT + (row["output_tokens"] - 1) * TPOT
        assert TTFT - LOWER_SLACK <= row["ttft_s"] <= row["e2e_s"]
        assert schedule_e2e - LOWER_SLACK <= row["e2e_s"] <= schedule_e2e + UPPER_SLACK
    assert summary["metrics"]["ttft_s"]["p50"] <= TTFT + UPPER_SLACK
    # llmperf's inter-token latency is e2e / output tokens (TTFT included), beside our own TPOT
    for row in rows:
        assert row["inter_token_latency_s"] == row["e2e_s"] / row["output_tokens"]


@pytest.mark.parametrize("concurrency", [4, 16])
def test_warmup_ends_before_a_window_that_starts_with_every_slot_filled(
    fake: Any, run_plan: Any, make_prompts: Any, concurrency: int
) -> None:
    url = fake(ttft=0.01, tpot=0.002)
    plan = LoadPlan(
        endpoints=[url], model="fake-model", concurrency=concurrency, requests=2 * concurrency, warmup=3
    )
    result = run_plan(plan, make_prompts(mean_out=10, std_out=3))
    assert len(result.warmup_records) == 3 and all(r.warmup for r in result.warmup_records)
    assert all(r.ok for r in [*result.warmup_records, *result.records])
    # the warm-up phase is over before the window opens ...
    assert max(r.end for r in result.warmup_records) <= result.t0
    # ... every slot's first request starts before any request of the window ends ...
    issued = sorted(r.issued for r in result.records)
    first_end = min(r.end for r in result.records)
    assert result.t0 <= issued[0] and issued[concurrency - 1] < first_end
    # ... and the window closes with its last request
    assert result.t_end == max(r.end for r in result.records)
    # ... and its duration counts from the first request written, the client's lead-in apart
    summary, _ = summarize(result, ApproxTokenizer())
    first_written = min(r.written for r in result.records)  # type: ignore[type-var]
    assert result.window_start == first_written >= result.t0
    assert summary["duration_s"] == result.t_end - first_written
    assert summary["load"]["lead_in_s"] == first_written - result.t0
    assert summary["load"]["warmup_duration_s"] > 0


def test_chunks_holding_several_tokens(fake: Any, run_plan: Any, make_prompts: Any) -> None:
    url = fake(ttft=0.03, tpot=0.005, tokens_per_chunk=3)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=2, requests=8, warmup=2)
    result = run_plan(plan, make_prompts(mean_out=19, std_out=0))
    summary, rows = summarize(result, ApproxTokenizer())
    # 19 tokens in chunks of 3: 7 chunks, the last holding one; each gap is split over its tokens
    for row in rows:
        assert row["output_tokens"] == 19 and row["chunks"] == 7
        assert row["itl_weights"] == [3, 3, 3, 3, 3, 1]
        assert row["itl_s"] == [
            gap / n for gap, n in zip(row["inter_chunk_gaps_s"], row["itl_weights"], strict=True)
        ]
        assert row["ttft_s"] >= 0.03 - LOWER_SLACK
        # the last chunk is due 6 x 15 ms after the first, which is due at 30 ms
        assert 0.12 - LOWER_SLACK <= row["e2e_s"] <= 0.12 + UPPER_SLACK
    # one ITL sample per token after the first chunk: 16 per request
    assert summary["metrics"]["itl_s"]["count"] == 8 * 16


def test_input_tokens_from_usage_match_the_prompt_sizing(fake: Any, run_plan: Any, make_prompts: Any) -> None:
    url = fake()
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=4, requests=12)
    result = run_plan(plan, make_prompts(mean_in=100))
    for record in result.records:
        assert record.usage_prompt_tokens == record.input_tokens_sent
    sizes = [r.input_tokens_sent for r in result.records]
    assert 80 < sum(sizes) / len(sizes) < 120


def test_open_loop_keeps_the_schedule_and_reports_the_achieved_rate(fake: Any, run_plan: Any) -> None:
    url = fake(ttft=0.01, tpot=0.002)
    plan = LoadPlan(endpoints=[url], model="fake-model", rate=40.0, arrival="constant", requests=20, warmup=2)
    result = run_plan(plan)
    summary, rows = summarize(result, ApproxTokenizer())
    load = summary["load"]
    assert load["mode"] == "open" and load["requested_rate_rps"] == 40.0
    assert summary["counts"]["completed"] == 20
    assert max(r.end for r in result.warmup_records) <= result.t0
    # the schedule itself is exact: the window's first request at its first instant, then 25 ms apart
    scheduled = [row["scheduled_s"] for row in rows]
    assert scheduled[0] == 0.0
    assert all(abs(b - a - 0.025) < 1e-9 for a, b in itertools.pairwise(scheduled))
    starts = sorted(row["start_s"] for row in rows)
    assert load["achieved_rate_rps"] == pytest.approx((len(starts) - 1) / (starts[-1] - starts[0]))
    # a request never starts before its time (uvloop's timers end up to a millisecond and more early:
    # the scheduler sleeps again for what is left), and does not hang
    lags = [row["start_lag_s"] for row in rows]
    assert min(lags) >= 0 and max(lags) <= UPPER_SLACK


def test_each_request_is_stamped_in_causal_order_and_never_measured_below_the_servers_own_time(
    fake: Any, run_plan: Any, make_prompts: Any
) -> None:
    from llmctl.serving.client.bench.testserver import timeline

    url = fake(ttft=TTFT, tpot=TPOT)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=8, requests=24, warmup=2)
    result = run_plan(plan, make_prompts(mean_out=12, std_out=0))
    for record in result.records:
        assert record.ok and not record.raw  # parsed after the window, the bytes let go
        assert record.written is not None and record.first_byte is not None
        assert record.issued <= record.start <= record.written == record.sent <= record.first_byte
        assert record.first_byte <= record.chunk_times[0] <= record.end  # type: ignore[operator]
        # every slot's connection was opened before the window: no request pays a connect
        assert record.connected is None and record.connect_s is None
    # the server pairs each stream with its request (the index in the prompt's tag): exactly the
    # window's requests, each read once
    served = {s[4]: s for s in timeline(url) if s[0] >= result.t0}
    assert sorted(served) == sorted(r.index for r in result.records)
    for record in result.records:
        read, first, _end, tokens, _index = served[record.index]
        assert tokens == len(record.chunk_times) == record.usage_completion_tokens
        # the server reads a request only after the client wrote it, and the client sees a chunk
        # only after the server wrote it: the tool's TTFT is never below the server's own
        assert read >= record.sent
        assert record.chunk_times[0] >= first
        assert record.chunk_times[0] - record.sent >= first - read - 1e-9
    _summary, rows = summarize(result, ApproxTokenizer())
    assert all(row["connect_s"] is None and row["written_s"] is not None for row in rows)


def test_the_window_gate_is_passed_after_the_warmup_and_before_any_measured_request(
    fake: Any, make_prompts: Any
) -> None:
    url = fake(ttft=0.01, tpot=0.002)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=4, requests=8, warmup=2)
    passed: list[float] = []

    async def gate() -> None:
        passed.append(time.perf_counter())

    result = run_blocking(lambda: run_load(plan, make_prompts(), window_gate=gate))
    assert len(passed) == 1
    assert max(r.end for r in result.warmup_records) <= passed[0] <= result.t0  # type: ignore[operator]
    assert passed[0] <= min(r.issued for r in result.records)
    assert len(result.records) == 8 and all(r.ok for r in result.records)


def test_chunks_are_stamped_when_their_bytes_came_off_the_socket(
    fake: Any, run_plan: Any, make_prompts: Any
) -> None:
    # (each read's stamp: tests/bench/test_bench_wire.py) a run stamps in causal order, each
    # stream's chunks in arrival order
    url = fake(ttft=0.02, tpot=0.002)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=16, requests=32, warmup=2)
    result = run_plan(plan, make_prompts(mean_out=20, std_out=0))
    for record in result.records:
        assert record.ok and record.first_byte is not None
        assert record.sent <= record.first_byte <= record.chunk_times[0] <= record.end  # type: ignore[operator]
        assert record.chunk_times == sorted(record.chunk_times)


def test_the_recording_server_stamps_a_request_when_its_bytes_reached_the_kernel() -> None:
    """The truth's read stamp is the kernel's receive time of the request's bytes, peeked when the
    server's ``select()`` returns (testserver._StampingSelector): a server loop busy with other
    streams reads later, and that wait is not the client's. Nothing is consumed by the peek."""
    import selectors
    import socket

    from llmctl.serving.client.bench.testserver import _StampingSelector

    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server_side, _address = listener.accept()
        with client, server_side:
            fd = server_side.fileno()
            selector = _StampingSelector()
            selector.register(server_side, selectors.EVENT_READ)
            selector.watch(fd)
            # a first packet: the kernel may switch receive timestamps on for the host a moment
            # after the first socket asks for them
            client.sendall(b"x")
            time.sleep(0.05)
            assert selector.select(0) and server_side.recv(10) == b"x"
            sent = time.monotonic()
            client.sendall(b"GET /v1/models HTTP/1.1\r\n\r\n")
            time.sleep(0.2)  # the server's loop is busy elsewhere
            looked = time.monotonic()
            assert selector.select(0)
            arrived = selector.arrived[fd]
            assert sent <= arrived <= looked < selector.ready_at
            assert selector.ready_at - arrived > 0.1  # the kernel's moment, not the loop's
            assert server_side.recv(100) == b"GET /v1/models HTTP/1.1\r\n\r\n"
            assert selector.stamps["kernel"] >= 1
            selector.forget(fd)
            assert fd not in selector.arrived
            assert server_side.fileno() == fd  # the descriptor stays the connection's
            # a connection it does not watch gets the moment select() returned
            client.sendall(b"x")
            time.sleep(0.01)
            assert selector.select(0) and fd not in selector.arrived
            selector.close()
