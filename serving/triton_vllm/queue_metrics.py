"""vLLM's own queue gauge, served beside Triton so that KEDA can scale on it.

Why not Triton's metrics: Triton's per-model `nv_inference_pending_request_count` drops when a
request starts EXECUTING (triton-inference-server/core `src/infer_request.cc`), and the vLLM
backend's `execute()` hands each request to its async engine and returns at once
(triton-inference-server/vllm_backend `src/model.py`), so requests wait inside vLLM and the gauge
stays near 0 at any load. The backend's own metrics (`src/utils/metrics.py`, behind the model
parameter `REPORT_CUSTOM_METRICS`) are, for vLLM's V1 engine, counters and histograms only: its
`record()` reads the iteration stats and ignores the scheduler stats that carry the queue.

Where the queue is: vLLM's engine always adds its `PrometheusStatLogger`
(vllm-project/vllm `vllm/v1/metrics/loggers.py`, `StatLoggerManager`), whose gauges
`vllm:num_requests_waiting` (requests queued in vLLM's scheduler) and `vllm:num_requests_running`
are declared with `multiprocess_mode="mostrecent"` and set from the scheduler stats of every engine
step. They live in the Python process that runs the engine (Triton's Python backend stub), whose
registry nothing serves over HTTP. With `PROMETHEUS_MULTIPROC_DIR` in its environment,
prometheus_client writes every metric of that process to files in the directory (its multiprocess
mode, the one vLLM's own API server uses); this module serves the directory's merged metrics on
:data:`PORT`. The start module prepares the directory (it must start empty), sets the variable
before Triton starts, and starts this server beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PORT = 8003
DIRECTORY_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client at import time
DEFAULT_DIRECTORY = "/tmp/llmctl-vllm-metrics"
QUEUE_METRIC = "vllm:num_requests_waiting"


def prepare(directory: Path) -> None:
    """An empty directory: files of an earlier process would be merged into the values."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)


def registry(directory: Path) -> Any:
    """A registry holding the merged metrics of every process that wrote to ``directory``."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    collected = CollectorRegistry()
    MultiProcessCollector(collected, path=str(directory))  # type: ignore[no-untyped-call]
    return collected


def serve(port: int, directory: Path, *, host: str = "0.0.0.0") -> Any:
    """Serve ``/metrics`` of the directory on ``port`` (a daemon thread); returns the server (None
    from a prometheus_client older than 0.17)."""
    from prometheus_client import start_http_server

    started = start_http_server(port, addr=host, registry=registry(directory))
    # prometheus_client 0.17 and later return (server, thread); older ones nothing
    return started[0] if isinstance(started, tuple) else started


def spawn(port: int, directory: Path) -> subprocess.Popen[bytes]:
    """Run the server in its own process. It outlives the start module's exec of tritonserver (the
    same process, so the same PID) and ends when that process ends."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            __name__,
            f"--port={port}",
            f"--directory={directory}",
            f"--parent={os.getpid()}",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--directory", type=Path, default=Path(DEFAULT_DIRECTORY))
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--parent", type=int, default=None, help="end when this process ends")
    args = parser.parse_args(argv)
    serve(args.port, args.directory, host=args.host)
    while args.parent is None or os.getppid() == args.parent:
        time.sleep(1)


if __name__ == "__main__":
    main()
