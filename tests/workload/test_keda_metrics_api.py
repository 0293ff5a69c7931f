"""The KEDA metrics-api oracle (keda_metrics_api.py) on a real answer of Triton's port 8003.

The fixture is port 8003's whole answer at the peak of the 2026-11-28 triton-gauge GPU run
(benchmarks/results/gpu-runs/2026-11-28-h200-triton-gauge.peak-scrape.txt: queue_metrics.py serving
the PROMETHEUS_MULTIPROC_DIR that vLLM 0.22.1 wrote in the backend's stub process, 384 requests on
an engine of max_num_seqs 64). KEDA's rules come from kedacore/keda pkg/scalers/metrics_api_scaler.go
at v2.20.2 (getValueFromPrometheusResponse, aggregateMetricsFromMultipleEndpoints).
"""

from __future__ import annotations

from pathlib import Path

import keda_metrics_api as keda
import pytest

SCRAPE = (
    Path(__file__).resolve().parents[2]
    / "benchmarks"
    / "results"
    / "gpu-runs"
    / "2026-11-28-h200-triton-gauge.peak-scrape.txt"
).read_text()


def test_the_queue_gauge_is_read_from_its_own_family() -> None:
    # vllm:num_requests_waiting_by_reason (capacity 320, deferred 0) is another family: KEDA picks the
    # family by its exact name
    assert keda.value_from_prometheus(SCRAPE, "vllm:num_requests_waiting") == 320.0
    assert keda.value_from_prometheus(SCRAPE, 'vllm:num_requests_waiting{engine="0"}') == 320.0
    assert keda.value_from_prometheus(SCRAPE, "vllm:num_requests_running") == 64.0


def test_one_pod_answers_its_first_matching_series_not_a_sum() -> None:
    """request_success_total has five series (stop 0, length 1, ...): KEDA returns the first that the
    selector matches, so without a label the answer is stop's 0, not the sum 1."""
    assert keda.value_from_prometheus(SCRAPE, "vllm:request_success_total") == 0.0
    assert keda.value_from_prometheus(SCRAPE, 'vllm:request_success_total{finished_reason="length"}') == 1.0
    reason = 'vllm:num_requests_waiting_by_reason{reason="deferred"}'
    assert keda.value_from_prometheus(SCRAPE, reason) == 0.0


@pytest.mark.parametrize(
    ("location", "error"),
    [
        ('vllm:num_requests_waiting{engine="1"}', 'value vllm:num_requests_waiting{engine="1"} not found'),
        ("vllm:num_requests_queued", "metric 'vllm:num_requests_queued' not found"),
        # a histogram has no plain value for KEDA (neither untyped, counter nor gauge)
        ("vllm:time_to_first_token_seconds", "value vllm:time_to_first_token_seconds not found"),
    ],
)
def test_what_keda_cannot_read_is_an_error(location: str, error: str) -> None:
    with pytest.raises(keda.KedaError, match="^" + error.replace("{", r"\{").replace("}", r"\}") + "$"):
        keda.value_from_prometheus(SCRAPE, location)


def test_a_family_without_samples_is_not_found() -> None:
    """Port 8003 once answered the gauge's HELP and TYPE lines alone (the run's scrape at 164.9 s,
    before vLLM set a value): no family for KEDA."""
    lines = [
        line for line in SCRAPE.splitlines() if line.startswith("# ") and "num_requests_waiting " in line
    ]
    assert len(lines) == 2
    with pytest.raises(keda.KedaError, match="not found"):
        keda.value_from_prometheus("\n".join(lines), "vllm:num_requests_waiting")


def test_the_endpoints_values_are_summed_and_failures_left_out() -> None:
    peak = keda.value_from_prometheus(SCRAPE, "vllm:num_requests_waiting")
    assert keda.aggregate([peak, peak], "sum") == 640.0
    assert keda.aggregate([peak, None], "sum") == 320.0  # a pod that failed is left out
    assert keda.aggregate([peak, 0.0]) == 160.0  # KEDA's default aggregation is the average
    with pytest.raises(keda.KedaError, match="could not get any metric successfully from the 2"):
        keda.aggregate([None, None], "sum")
    with pytest.raises(keda.KedaError, match="no endpoints URLs"):
        keda.aggregate([], "sum")


def test_a_url_without_a_port_takes_the_schemes() -> None:
    service = {
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"selector": {"app": "a"}, "ports": [{"port": 443, "targetPort": "tls"}]},
    }
    pod = keda.Pod(labels={"app": "a"}, ip="10.0.0.9", ports={"tls": 8443})
    assert keda.endpoint_urls("https://m.ns/metrics", [service], [pod]) == ["https://10.0.0.9/metrics"]
    # the slice carries the resolved targetPort (8443), so a URL naming it keeps it
    assert keda.endpoint_urls("https://m.ns:8443/metrics", [service], [pod]) == [
        "https://10.0.0.9:8443/metrics"
    ]
    not_ready = keda.Pod(labels={"app": "a"}, ip="10.0.0.10", ports={"tls": 8443}, ready=False)
    assert keda.endpoint_urls("https://m.ns:8443/metrics", [service], [not_ready, pod, pod]) == [
        "https://10.0.0.9:8443/metrics"  # not-ready pods skipped, addresses once
    ]
    with pytest.raises(keda.KedaError, match="expected at least 2 elements"):
        keda.endpoint_urls("http://m:8003/metrics", [service], [pod])
