"""What every step of the GPU run shares (device.py runs the steps): the device's folders, the servers'
ports and GPUs, the environment every program starts with (NVLink multicast off), and the results file.

Standard library only, like every module of the harness (the device's own Python runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CARRY = Path(os.environ.get("GPU_CARRY", ".gpu"))
ROOT = Path(os.environ.get("GPU_ROOT", "/root"))
PARTS, WHEELS, RES, LOGS, CACHES = ROOT / "parts", ROOT / "w", ROOT / "res", ROOT / "logs", ROOT / "cc"
SITE, SITE2, SITE22 = ROOT / "site", ROOT / "site2", ROOT / "site22"
# NCCL 2.30.7 (prepare.py's `nccl` set), apart from the machine's own 2.28.9: only the pipeline run on one
# GPU loads it (device_pp.py SHARED_GPU_ENV), for the two ranks on one device that 2.28 refuses
SITE_NCCL = ROOT / "site-nccl"
NCCL_LIB = SITE_NCCL / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
MODEL = WHEELS / "tiny"
RESULTS = RES / "results.jsonl"
# KINDS.md: NVLink multicast stays off in every program started here
# vLLM 0.26's allreduce + RMSNorm fusion (tensor_parallel > 1) picks FlashInfer's "mnnvl" workspace by
# default, and that one calls cuMulticastCreate itself, past the three switches above: the tp 2 start
# of 2026-11-28 did so (vllm/distributed/device_communicators/flashinfer_all_reduce.py
# _resolve_fi_ar_backend; flashinfer/comm/mnnvl.py McastDeviceMemory). "trtllm" allocates through
# PyTorch's symmetric memory, which TORCH_SYMM_MEM_DISABLE_MULTICAST keeps off multicast.
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",
}
# the shape vLLM's kernels serve (head size 64) whose heads split over 1, 2 and 4 GPUs; the 70B
# blueprint's max_context (4096) fits its positions
TINY_ARGS = ["--heads", "8", "--kv-heads", "8", "--head-dim", "64", "--layers", "2", "--max-position", "4096"]
# One engine per GPU at a time: vLLM's memory profiling counts what other processes allocate on its
# GPUs as its own, so engines sharing a GPU failed on 2026-11-28 (no KV cache blocks, cuBLAS errors).
# The blueprint's 0.9 everywhere; Triton's engine and the compile-cache restarts run once GPU 0 is free.
GPU_APP_CACHES = "/tmp/llmctl-compile/vllm"  # serving/ray_vllm/neuron_cache.py GPU_ROOT
UTIL = 0.9  # every engine: the blueprints' gpu_memory_utilization
# vLLM's own ports (ZMQ, torch.distributed's TCPStore) start at VLLM_PORT: one range per engine, so
# engines starting together never race for one (a tp-2 start failed with EADDRINUSE without it)
VLLM_PORTS = {
    "vllm": 31000,
    "vllmw": 31200,
    "vllmc": 31400,
    "triton": 32000,
    "ray1": 33000,
    "ray2": 34000,
    "ray4": 35000,
    "vllm4": 36000,
    "vllm2": 36500,
    "ray4e": 37000,
    "vllm4e": 37500,
    "ray2e": 38000,
    "vllm2e": 38500,
    "ray1d": 33000,  # ray1 again, on the default path (its cluster stopped first)
    # the fast-path plan at tp 2 / routing / tp 4 (docs/gpu-runs.md): outside Ray Serve's direct
    # ingress ranges (HTTP 30000-31000, gRPC 40000-41000 by default) and every range above
    "ray2fe": 55000,
    "vllm2fe": 55500,
    # rayrd and rayrp: none. Their two replicas' engines start at the same moment in one environment;
    # with VLLM_PORT set both would probe the same first port, find it free and take it (vLLM 0.26.0
    # vllm/utils/network_utils.py _get_open_port binds it, closes it and returns it; the process
    # group binds it later), so their engines get the ports the system hands out, as in the pods
    "ray4fe": 57000,
    "vllm4fe": 57500,
    "raypp": 58000,  # pipeline_parallel 2 over two Ray nodes (device_pp.py): one engine, two ranks
    "rayppn": 58000,  # raypp again with NCCL on its network path (its cluster stopped first)
    "raypp1": 58000,  # raypp with both Ray nodes on GPU 0 (a one-GPU machine; never beside raypp)
}

SERVERS = {
    # name: port, GPUs (phase A/C)
    "vllm": (8000, "0"),
    "ray1": (8001, "1"),
    "ray2": (8002, "2,3"),
    "vllmw": (8000, "0"),
    "vllmc": (8000, "0"),
    "ray4": (8004, "0,1,2,3"),
    "vllm4": (8005, "0,1,2,3"),
    "vllm2": (8006, "0,1"),  # plain vLLM at tp 2 beside ray2 (GPUs 2-3) on a four-GPU machine
    # tensor_parallel 4 (2 on a two-GPU machine) in eager mode (no torch.compile, no CUDA graphs) on
    # both sides: the serving path's cost at tp > 1 measured within one lease (a compiled tp 4 start
    # takes 7-8 minutes)
    "ray4e": (8007, "0,1,2,3"),
    "vllm4e": (8008, "0,1,2,3"),
    "ray2e": (8009, "0,1"),
    "vllm2e": (8010, "0,1"),
    # our app at tp 1 on GPU 1 restarted on the default path after its fast-path start was measured
    # (``restart-default``): Ray's fast-path switches are read at `ray start`, so the cluster restarts
    "ray1d": (8001, "1"),
    # the fast-path plan on four GPUs, eager everywhere (docs/gpu-runs.md "tp 2, routing and tp 4"):
    # our app on the fast path at tp 2 beside plain vLLM at tp 2, started together
    "ray2fe": (8011, "0,1"),
    "vllm2fe": (8012, "2,3"),
    # two fast-path clusters of 2 replicas at tp 1 each: the default router (rayrd) and the prefix-aware
    # one (rayrp); "ray" first, as every Ray cluster's name (ready, the engine metrics port and the logs
    # go by it)
    "rayrd": (8013, "0,1"),
    "rayrp": (8014, "2,3"),
    # tp 4: our app on the fast path, then plain vLLM, one after the other
    "ray4fe": (8015, "0,1,2,3"),
    "vllm4fe": (8016, "0,1,2,3"),
    # the 405B blueprint's app at pipeline_parallel 2 over two Ray nodes of one GPU each on one host
    # (device_pp.py): the head on GPU 0, the second raylet on GPU 1
    "raypp": (8017, "0,1"),
    "rayppn": (8017, "0,1"),  # the same with NCCL's P2P and SHM off: its stages talk over Socket (TCP)
    "raypp1": (8017, "0"),  # the same with both raylets given GPU 0 (device_pp.py SHARED_GPU_ENV)
    # routing on one H200 (device_route1.py): one cluster of 2 replicas sharing GPU 0, half of it each,
    # the default router (rayr1d) or the prefix-aware one (rayr1p), one after the other; no VLLM_PORT
    # (two replicas in one environment, as rayrd and rayrp)
    "rayr1d": (8019, "0"),
    "rayr1p": (8019, "0"),
}
RAY_PORTS = {
    "ray1": 6381,
    "ray2": 6382,
    "ray4": 6384,
    "ray4e": 6385,
    "ray2e": 6386,
    "ray1d": 6381,
    "ray2fe": 6387,
    "rayrd": 6388,
    "rayrp": 6389,
    "ray4fe": 6390,
    "raypp": 6391,
    "rayppn": 6391,
    "raypp1": 6391,
    "rayr1d": 6392,
    "rayr1p": 6392,
}
# each Ray cluster's slot: its temp folder /tmp/r<slot> and its ranges of ports
RAY_SLOT = {
    "ray1": 0,
    "ray2": 1,
    "ray4": 2,
    "ray4e": 3,
    "ray2e": 4,
    "ray1d": 0,
    "ray2fe": 5,
    "rayrd": 6,
    "rayrp": 7,
    "ray4fe": 8,
    # raypp's head; its second raylet's ports go by slot 11 (device_pp.NODE2_SLOT), and both nodes'
    # direct ingress range is its own (device_pp.INGRESS_FROM)
    "raypp": 9,
    "rayppn": 9,
    "raypp1": 9,
    "rayr1d": 10,  # one at a time, so one slot (11 is raypp's second raylet's)
    "rayr1p": 10,
}


def worker_ports(slot: int) -> tuple[int, int]:
    """A cluster's worker ports: 5000 a slot up to slot 4 (as the 2026-11-28 runs had them); from slot 5
    1000 a slot from 45000, clear of the agents' ports (52400 + slot) and the direct ingress ranges."""
    if slot < 5:
        return 20000 + 5000 * slot, 24999 + 5000 * slot
    return 45000 + 1000 * (slot - 5), 45999 + 1000 * (slot - 5)


# Ray 2.58.0 ray/serve/_private/constants.py: what HAProxy binds (its stats and Prometheus ports) and the
# range each ingress replica's own HTTP server takes a port from; the rendered pods set all four
FAST_PORT_SHIFTS = {
    "RAY_SERVE_HAPROXY_STATS_PORT": (8404, 10),
    "RAY_SERVE_HAPROXY_METRICS_PORT": (9101, 10),
    "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": (30000, 100),
    "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": (31000, 100),
}


def fast_ports(slot: int, rendered: dict[str, str]) -> dict[str, str]:
    """The rendered fast-path ports moved by the cluster's slot, so that two fast-path clusters on
    one machine share none (slot 0 keeps the rendered ones): HAProxy binds its stats and metrics ports
    once per cluster, and each cluster's controller hands out the direct ingress range as if it were
    alone (``ray/serve/_private/node_port_manager.py``). HAProxy's files already sit in a folder per
    node id (``ray/serve/_private/haproxy.py`` ``_per_node``)."""
    return {
        name: str(int(rendered.get(name, default)) + step * slot)
        for name, (default, step) in FAST_PORT_SHIFTS.items()
    }


EAGER = {"enforce_eager": True}  # vLLM's engine argument (``--enforce-eager`` on its command line)
PHASE_MARK = "LLMCTL_PHASE "  # serving/phases.py PHASE_PREFIX


def record(kind: str, **fields: object) -> None:
    RES.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"kind": kind, "t": round(time.time(), 2), **fields}, default=str)
    with RESULTS.open("a") as out:
        out.write(line + "\n")
    print(line[:2000], flush=True)


def export() -> None:
    """Copy the results and a tarball of the logs to $OUT (at most 8 files come back)."""
    out = os.environ.get("OUT")
    if not out:
        return
    if RESULTS.exists():
        shutil.copy(RESULTS, Path(out) / "results.jsonl")
    with tarfile.open(Path(out) / "logs.tgz", "w:gz") as tar:
        for path in sorted(LOGS.glob("*")) if LOGS.exists() else []:
            if path.is_file():
                tar.add(path, arcname=path.name)


def env(gpus: str | None = None, **extra: str) -> dict[str, str]:
    base = dict(os.environ)
    base.update(NO_MULTICAST)
    base["PYTHONPATH"] = f"{SITE2}:{SITE}"
    base["PYTHONUNBUFFERED"] = "1"
    if gpus is not None:
        base["CUDA_VISIBLE_DEVICES"] = gpus
    base.update(extra)
    return base


def cache_env(name: str) -> dict[str, str]:
    """Every compile cache of one server under one folder (what an S3 copy would hold)."""
    root = CACHES / name
    for sub in ("home", "inductor"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(root / "home"),  # ~/.cache/vllm (torch.compile), ~/.triton, ~/.cache/flashinfer
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "VLLM_CACHE_ROOT": str(root / "home" / ".cache" / "vllm"),
    }


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0
