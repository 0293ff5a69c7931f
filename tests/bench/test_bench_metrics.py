"""Metric arithmetic on recorded event streams with known timestamps: exact results, no server.

Times are binary fractions (multiples of 1/64 s) so that sums and differences are exact in floating
point; where a division is not exact, the expected value is the same expression computed here.
"""

from __future__ import annotations

from typing import Any

from llmctl.serving.client.bench.loadgen import LoadPlan
from llmctl.serving.client.bench.metrics import summarize
from llmctl.serving.client.bench.tokens import ApproxTokenizer

T0 = 1000.0


def test_per_request_definitions(recorded_summary: Any) -> None:
    _, rows = recorded_summary
    first, second, failed = rows
    assert first["ttft_s"] == 0.25 and first["e2e_s"] == 0.5625
    assert first["tpot_s"] == (0.5625 - 0.25) / 2
    assert first["itl_s"] == [0.125, 0.125] and first["itl_weights"] == [1, 1]
    assert first["e2e_per_output_token_s"] == 0.5625 / 3
    assert first["request_output_throughput_tok_s"] == 3 / 0.5625
    assert first["send_delay_s"] == 1 / 1024
    # usage (4) differs from the chunk count (3): tokens per chunk are counted, the ITL divides by them
    assert second["ttft_s"] == 0.25 and second["e2e_s"] == 0.75
    assert second["tpot_s"] == 0.5 / 3
    assert second["itl_weights"] == [2, 1]
    assert second["itl_s"] == [0.125 / 2, 0.25]
    assert second["inter_chunk_gaps_s"] == [0.125, 0.25]
    assert failed["ttft_s"] is None and failed["e2e_s"] is None and failed["tpot_s"] is None


def test_llmperf_per_request_keys_carry_llmperf_meanings(recorded_summary: Any) -> None:
    _, rows = recorded_summary
    first, second, failed = rows
    assert first["error_code"] is None and first["error_msg"] == ""
    assert first["inter_token_latency_s"] == 0.5625 / 3  # e2e / output tokens, TTFT included
    assert first["end_to_end_latency_s"] == 0.5625
    assert first["request_output_throughput_token_per_s"] == 3 / 0.5625
    assert (first["number_input_tokens"], first["number_output_tokens"], first["number_total_tokens"]) == (
        8,
        3,
        11,
    )
    assert second["inter_token_latency_s"] == 0.75 / 4
    assert failed["error_code"] == 503 and failed["error_msg"] == "overloaded"
    assert failed["inter_token_latency_s"] is None


def test_the_window_counts_from_the_first_request_written(recorded_run: Any) -> None:
    # the client's lead-in (from the window's first instant to its first request on the wire) is
    # reported apart and kept out of the duration and every throughput figure
    first, second, _failed = recorded_run.records
    first.written = T0 + 1 / 128
    second.written = T0 + 0.125 + 1 / 128
    summary, _ = summarize(recorded_run, ApproxTokenizer())
    assert recorded_run.window_start == T0 + 1 / 128
    assert summary["duration_s"] == 1 - 1 / 128
    assert summary["load"]["lead_in_s"] == 1 / 128
    assert summary["throughput"]["output_throughput_tok_s"] == 7 / (1 - 1 / 128)


def test_summary_statistics_window_and_llmperf_keys(recorded_summary: Any) -> None:
    summary, _ = recorded_summary
    metrics = summary["metrics"]
    assert summary["duration_s"] == 1.0
    assert summary["load"]["warmup_duration_s"] == 0.5 and summary["load"]["warmup_requests"] == 1
    assert summary["throughput"]["output_throughput_tok_s"] == 7.0
    assert summary["throughput"]["total_throughput_tok_s"] == 23.0
    assert summary["throughput"]["requests_per_minute"] == 120.0
    assert summary["counts"] == {
        "started": 3,
        "completed": 2,
        "failed": 1,
        "errors_by_type": {"http_503": 1},
        "error_codes": {503: 1},
        "rejected_by_status": {"503": 1},
        "error_rate": 1 / 3,
    }
    assert metrics["ttft_s"]["p50"] == 0.25 and metrics["ttft_s"]["count"] == 2
    assert metrics["e2e_s"]["p50"] == (0.5625 + 0.75) / 2
    assert metrics["tpot_s"]["min"] == 0.15625 and metrics["tpot_s"]["max"] == 0.5 / 3
    # ITL: one sample per token, pooled: 0.125, 0.125 (request 0), 0.0625 x 2, 0.25 (request 1)
    assert metrics["itl_s"]["count"] == 5 and metrics["itl_s"]["p50"] == 0.125
    assert metrics["itl_s"]["mean"] == (0.125 + 0.125 + 0.0625 + 0.0625 + 0.25) / 5
    assert summary["load"]["client_cpu_percent"] == 25.0
    assert summary["load"]["client_cpu_seconds_per_1k_tokens"] == 1000 * 0.25 / 7
    # llmperf's names with llmperf's meanings: its inter-token latency is e2e / output tokens
    llmperf_itl = sorted([0.5625 / 3, 0.75 / 4])
    assert summary["results_inter_token_latency_s_quantiles_p50"] == (llmperf_itl[0] + llmperf_itl[1]) / 2
    assert summary["results_inter_token_latency_s_min"] == llmperf_itl[0]
    assert summary["results_inter_token_latency_s_max"] == llmperf_itl[1]
    assert summary["results_ttft_s_mean"] == 0.25
    assert summary["results_end_to_end_latency_s_max"] == 0.75
    assert summary["results_number_output_tokens_mean"] == 3.5
    assert summary["results_number_input_tokens_mean"] == 8.0
    assert summary["results_num_requests_started"] == 3
    assert summary["results_number_errors"] == 1
    assert summary["results_error_rate"] == 1 / 3
    assert summary["results_error_code_frequency"] == "{503: 1}"
    assert summary["results_mean_output_throughput_token_per_s"] == 7.0
    assert summary["results_num_completed_requests_per_min"] == 120.0
    assert summary["num_concurrent_requests"] == 2
    # our TPOT keeps its own name and is not llmperf's number
    assert summary["metrics"]["tpot_s"]["p50"] != summary["results_inter_token_latency_s_quantiles_p50"]


def test_open_loop_rate_and_start_lag_from_the_recorded_schedule(recorded_run: Any) -> None:
    result = recorded_run
    result.plan = LoadPlan(endpoints=["http://x/v1"], model="m", rate=4.0, arrival="constant", requests=3)
    for number, record in enumerate(result.records):
        record.scheduled = T0 + 0.25 * number
    summary, rows = summarize(result, ApproxTokenizer())
    assert [row["scheduled_s"] for row in rows] == [0.0, 0.25, 0.5]
    assert [row["start_lag_s"] for row in rows] == [0.0, -0.125, 0.0625]
    # (started - 1) / (last start - first start)
    assert summary["load"]["achieved_rate_rps"] == 2 / 0.5625
    assert summary["load"]["concurrency"] is None and summary["num_concurrent_requests"] is None
