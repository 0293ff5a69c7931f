"""The GPU run's steps on the device machine (docs/gpu-runs.md): ``python3 benchmarks/gpu/device.py STEP ...``.

Runs with the device's own Python 3.12 (torch 2.11.0+cu130 there), standard library only at the top
level: the carried packages are installed by ``setup``. Each step appends JSON lines to
``/root/res/results.jsonl`` and copies that file, with the logs so far, to ``$OUT`` before it ends,
so a step cut short by the call's limit still returns what it measured.

The steps live in modules of one subject each, beside this file: device_base.py (the folders, the
servers' ports and GPUs, the environment, the results file), device_install.py (``recv``, ``setup``),
device_servers.py (starting, waiting for and stopping servers), device_bench.py (the loads and the
servers' own histograms) and device_logs.py (what the servers' logs say). This file parses the command
line and runs the steps in order.

Phases (one engine per GPU; ``--gpus`` adapts the assignment to two GPUs):

- ``start-a``: cold starts side by side: plain ``vllm serve`` (GPU 0), our Ray Serve LLM app at
  tensor_parallel 1 (GPU 1) and, on four GPUs, at 2 (GPUs 2-3).
- ``bench-b``: one load at a time: chat on each, the serving path's cost (our Ray Serve app against
  plain vLLM at c1/c16/c64), ``llmctl bench`` against ``vllm bench serve`` with the server's own
  histograms, the metric names under load.
- ``bench-b2`` / ``bench-b3``: plain vLLM stopped, Triton's engine on GPU 0 while our app redeploys
  with stream batching off, then that variant at c1/c16/c64.
- ``start-tp2`` / ``wait`` / ``bench-c --names ray2``: tensor_parallel 2 on two GPUs.
- ``restart``: the compile cache (plain vLLM restarted on its own cache, then on an empty one).
- ``start-tp4`` / ``bench-c``: tensor_parallel 4 (our Ray Serve app and plain vLLM on all four GPUs).
- ``start-pair`` / ``start-route`` / ``start-fast4`` / ``start-plain4`` / ``bench-route`` / ``stop-all``:
  the fast-path plan on four GPUs (tp 2 pair, routing, tp 4; device_plan.py), eager with ``--eager``.
- ``start-pp`` / ``bench-pp``: the multi-node 405B blueprint's app at pipeline_parallel 2 over two Ray
  nodes of one GPU each on this host, the fabric probe across them first (device_pp.py);
  ``start-pp-net`` / ``bench-pp-net``: the same with NCCL's P2P and SHM off (its network path);
  ``start-pp1`` / ``bench-pp1``: the same on a one-GPU machine, both Ray nodes given GPU 0.
- ``start-route1 --router R`` / ``bench-route1``: routing on ONE GPU, two replicas sharing it, the
  8B shape with dummy weights, one router after the other (device_route1.py).
- ``triton-gauge``: Triton's pod processes (start.py, queue_metrics.py's port 8003, the backend's stub
  running vLLM 0.22.1) under a burst, port 8003 read as KEDA reads it (benchmarks/gpu/triton_gauge.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# the step modules sit beside this file: importable when it runs as a script (its folder is first on
# sys.path then) and when a test loads it from its path
sys.path.insert(0, str(Path(__file__).resolve().parent))

import device_base as base
import device_bench as bench
import device_install as install
import device_plan as plan
import device_pp as pp
import device_route1 as route1
import device_servers as servers


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", nargs="+")
    parser.add_argument("--names", default="vllm,ray1,ray2,triton")
    parser.add_argument("--limit", type=float, default=500)
    parser.add_argument("--gpus", type=int, default=None, help="Default: what nvidia-smi lists")
    parser.add_argument("--fast-path", action="store_true", help="Ray starts with .gpu/fast_path_env.json")
    parser.add_argument("--rounds", type=int, default=2, help="bench-f: rounds of every level")
    parser.add_argument("--first-round", type=int, default=1, help="bench-f: the first round's number")
    parser.add_argument("--no-chat", action="store_true", help="bench-f: no chat check first")
    parser.add_argument(
        "--eager", action="store_true", help="start-pair/-route/-fast4/-plain4: vLLM eager mode"
    )
    parser.add_argument(
        "--routers", default="default,prefix_aware", help="start-route: rayrd's and rayrp's request router"
    )
    parser.add_argument(
        "--router",
        default="default",
        help="start-route1: the cluster's request router (default | prefix_aware)",
    )
    args = parser.parse_args()
    servers.FAST_PATH = args.fast_path
    if args.gpus is None:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
        args.gpus = max(1, sum(1 for line in listed.splitlines() if line.startswith("GPU ")))
    steps = {
        "recv": install.recv,
        "setup": install.setup,
        "start-a": servers.start_a,
        "wait": servers.wait,
        "bench-b": bench.bench_b,
        "bench-b2": servers.bench_b2,
        "bench-b3": bench.bench_b3,
        "start-tp2": servers.start_tp2,
        "bench-c": bench.bench_c,
        "triton": servers.triton_engine,
        "triton-gauge": servers.triton_gauge,
        "start-tp4": servers.start_tp4,
        "start-vllm4": servers.start_vllm4,
        "eager": bench.eager,
        "restart": servers.restart,
        "bench-f": bench.bench_f,
        "restart-default": servers.restart_default,
        "export": lambda _a: base.export(),
        "start-pair": plan.start_pair,
        "start-route": plan.start_route,
        "start-fast4": plan.start_fast4,
        "start-plain4": plan.start_plain4,
        "stop-all": plan.stop_all,
        "bench-route": plan.bench_route,
        "start-route1": route1.start_route1,
        "bench-route1": route1.bench_route1,
        "start-pp": pp.start_pp,
        "bench-pp": pp.bench_pp,
        "start-pp-net": lambda a: pp.start_pp(a, network=True),
        "bench-pp-net": lambda a: pp.bench_pp(a, network=True),
        "start-pp1": lambda a: pp.start_pp(a, shared=True),
        "bench-pp1": lambda a: pp.bench_pp(a, shared=True),
    }
    for step in args.steps:
        try:
            steps[step](args)
        except Exception as error:  # a failed step is a result too
            base.record("step_failed", step=step, error=repr(error)[-2000:])
            base.export()
            if step in ("setup",):
                raise


if __name__ == "__main__":
    main()
