"""The Triton runtime's queue signal: vLLM's `vllm:num_requests_waiting` gauge, written by the
process that runs vLLM's engine in prometheus_client's multiprocess mode and served beside Triton
(serving/triton_vllm/queue_metrics.py says why Triton's own gauge cannot be used).

The engine's process is stood in for by a child Python process that declares the gauge exactly as
vLLM's `PrometheusStatLogger` does (vllm-project/vllm `vllm/v1/metrics/loggers.py`: name,
labels `model_name` and `engine`, `multiprocess_mode="mostrecent"`) and sets it as a scheduler
step would, with `PROMETHEUS_MULTIPROC_DIR` inherited as Triton's processes inherit it from the
start module. The server and KEDA's read of it are the real code paths: the HTTP response is parsed
the way KEDA's metrics-api scaler parses `format: prometheus` (the text exposition format, the
series named by `valueLocation`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmctl.blueprints.runtimes import runtime
from llmctl.serving.triton_vllm import queue_metrics

ENGINE_STEP = """
import sys
from prometheus_client import Gauge
waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                labelnames=["model_name", "engine"], multiprocess_mode="mostrecent")
running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                labelnames=["model_name", "engine"], multiprocess_mode="mostrecent")
waiting.labels("meta-llama/Llama-2-7b-chat-hf", "0").set(float(sys.argv[1]))
running.labels("meta-llama/Llama-2-7b-chat-hf", "0").set(float(sys.argv[2]))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _engine_step(directory: Path, waiting: int, running: int) -> None:
    env = {**os.environ, queue_metrics.DIRECTORY_ENV: str(directory)}
    subprocess.run([sys.executable, "-c", ENGINE_STEP, str(waiting), str(running)], env=env, check=True)


def _read(port: int, name: str) -> float:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    samples = [s for family in text_string_to_metric_families(body) for s in family.samples if s.name == name]
    assert len(samples) == 1, body  # one series, as KEDA's metrics-api scaler needs
    return float(samples[0].value)


def test_the_queue_gauge_of_the_engine_process_is_served_and_follows_the_load(tmp_path: Path) -> None:
    directory = tmp_path / "metrics"
    (directory / "stale").mkdir(parents=True)
    queue_metrics.prepare(directory)
    assert list(directory.iterdir()) == []  # an earlier run's files would be merged in
    port = _free_port()
    server = queue_metrics.serve(port, directory, host="127.0.0.1")
    try:
        _engine_step(directory, waiting=0, running=2)
        assert _read(port, queue_metrics.QUEUE_METRIC) == 0
        _engine_step(directory, waiting=17, running=8)  # under load: requests queue inside vLLM
        assert _read(port, queue_metrics.QUEUE_METRIC) == 17
        _engine_step(directory, waiting=0, running=3)  # and drain again
        assert _read(port, queue_metrics.QUEUE_METRIC) == 0
        assert _read(port, "vllm:num_requests_running") == 3
    finally:
        server.shutdown()


def test_the_runtime_scales_on_the_gauge_this_server_serves() -> None:
    assert runtime("triton-vllm").queue_metric == queue_metrics.QUEUE_METRIC


def test_the_engine_logs_its_stats() -> None:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.serving.triton_vllm.repository import engine_args

    assert engine_args(load_blueprint("llama2-triton-vllm-gpu"))["disable_log_stats"] is False


def test_the_start_module_prepares_the_directory_and_starts_the_server_before_triton(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`start.main` up to its exec of tritonserver (replaced here: no Triton on this machine): the
    directory Triton's processes inherit is set and emptied, and the server process answers."""
    import time

    from llmctl.serving.triton_vllm import start

    directory, port = tmp_path / "vllm-metrics", _free_port()
    monkeypatch.setenv("LLMCTL_BLUEPRINT", "llama2-triton-vllm-gpu")
    monkeypatch.setenv(start.REPOSITORY_ENV, str(tmp_path / "repository"))
    monkeypatch.setenv(queue_metrics.DIRECTORY_ENV, str(directory))
    monkeypatch.delenv("LLMCTL_MODEL_URI", raising=False)
    monkeypatch.setattr(queue_metrics, "PORT", port)
    spawned: list[subprocess.Popen[bytes]] = []
    real_spawn = queue_metrics.spawn
    monkeypatch.setattr(queue_metrics, "spawn", lambda *a: spawned.append(real_spawn(*a)) or spawned[-1])
    execs: list[list[str]] = []
    monkeypatch.setattr(os, "execvp", lambda file, args: execs.append(args))
    start.main()
    try:
        assert execs and execs[0][0] == "tritonserver"
        assert os.environ[queue_metrics.DIRECTORY_ENV] == str(directory) and directory.is_dir()
        _engine_step(directory, waiting=4, running=1)
        deadline = time.monotonic() + 30
        while True:
            try:
                assert _read(port, queue_metrics.QUEUE_METRIC) == 4
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the queue gauge's server did not start"
                time.sleep(0.1)
    finally:
        for process in spawned:
            process.terminate()
            process.wait(timeout=10)
