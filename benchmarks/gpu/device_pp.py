"""Pipeline parallelism over two Ray nodes on one host (issue 55, docs/gpu-runs.md "pipeline_parallel 2
over two Ray nodes"): the multi-node blueprint's Serve application as rendered (``llama31-405b-vllm-gpu``,
carried as ``serve_config_pp.json`` by prepare.py), on the tiny model at tensor_parallel 1 and
pipeline_parallel 2, one stage per Ray node.

- ``start-pp``: every server stopped; ``ray start --head`` on GPU 0 alone and a second raylet joining it
  on GPU 1 alone, each one GPU (``--num-gpus=1``), each in a session of its own; then the fabric probe
  (the product's ``llmctl.serving.fabric.probe``, as the preflight Job runs it: two launchers as two
  "nodes" of one GPU, node 0 on 127.0.0.1) twice, as NCCL picks and with P2P and SHM off (NCCL's
  network path, Socket here: what two nodes without EFA fall back to), both outputs kept raw; then the
  driver deploys the app, vLLM eager, and writes Ray's placement group (each bundle's node id) and
  ``ray.nodes()``, which ``wait`` or ``bench-pp`` records (``ray_view``).
- ``bench-pp``: waits (up to ``--limit``) for the driver's ready file, chat, ``llmctl bench`` at c1
  and c16 (512 in / 128 out), NCCL's transport lines from the cluster's logs (the engine's send and
  receive between the stages: ``via P2P``, ``via SHM``, ``via NET/Socket``), the phase and fast-path
  lines, then stops everything (both raylets through ``ray stop``, and Ray's HAProxy).
- ``start-pp-net`` / ``bench-pp-net``: the same cluster and app again (``rayppn``, no probe) with
  ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`` on both raylets, so that the stages' send and receive take
  NCCL's network path (Socket: TCP), as between two nodes without EFA.

Both raylets get the rendered worker pod's Ray Serve, NCCL and libfabric variables (``pp_env.json``:
the head raylet holds a stage here, as a worker pod does in the RayService) and the head container's
fast path: the 405B renders the fast path, so this run uses it (HAProxy, direct streaming). How the
second raylet joins follows Ray 2.58.0: ``ray start --address`` without ``--temp-dir`` shares the head's
temp folder (``ray/_private/node.py`` ``_init_temp`` takes the head's ``temp_dir`` from the GCS) and
its own socket names, as ``ray/cluster_utils.py`` ``Cluster.add_node`` starts several raylets on one
host (without a second log monitor: ``--include-log-monitor=false``); ``--port``,
``--include-dashboard`` and ``--redis-shard-ports`` are for a head only (``ray/scripts/scripts.py``).

The engine: Ray Serve LLM asks for tp x pp one-GPU bundles (``vllm_models.py`` ``num_devices``) under
the rendered PACK strategy, which two nodes of one GPU each can only meet on both; vLLM 0.26.0's Ray
executor is ``RayExecutorV2`` by default (``VLLM_USE_RAY_V2_EXECUTOR_BACKEND`` "1", ``vllm/envs.py``;
``vllm/v1/executor/abstract.py``), which gives rank r the r-th GPU bundle, the driver's node first
(``ray_utils.py`` ``get_bundles_sorted_by_node``), and whose stages send and receive through vLLM's
own pipeline group (NCCL), not Ray's compiled graph (that one's NCCL channel would need cupy, which is
not carried).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

import device_plan as plan
import device_servers as servers
from device_base import (
    CARRY,
    EAGER,
    LOGS,
    NCCL_LIB,
    RAY_PORTS,
    RAY_SLOT,
    RES,
    SERVERS,
    SITE,
    TINY_ARGS,
    VLLM_PORTS,
    cache_env,
    env,
    export,
    fast_ports,
    record,
    worker_ports,
)
from device_bench import chat_check, llmctl_bench
from device_logs import fast_lines, phases

NAME = "raypp"
NAME_NET = "rayppn"  # the same over NCCL's network path (device_base gives it raypp's ports)
# the same on a one-GPU machine (``start-pp1``): both raylets given GPU 0, so the two stages are two
# processes on one device, which NCCL allows from 2.30 when told (src/init.cc, NVIDIA/nccl b3aeda4a:
# "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1"; 2.28.9, the
# device torch's, refuses them). NCCL 2.30.7 is carried apart (prepare.py's ``nccl`` set) and loaded
# before torch's own by LD_PRELOAD (libtorch_cuda's libnccl.so.2 then resolves to it; vLLM's pynccl
# is pointed at it by VLLM_NCCL_SO_PATH); its "NCCL version" lines in the logs say which one ran
NAME_SHARED = "raypp1"
SHARED_GPU_ENV = {
    "NCCL_MULTI_RANK_GPU_ENABLE": "1",
    "LD_PRELOAD": str(NCCL_LIB),
    "VLLM_NCCL_SO_PATH": str(NCCL_LIB),
}
# two engines' stages on one GPU: a fixed KV cache per stage, which makes vLLM 0.26.0 skip its memory
# profile (v1/worker/gpu_worker.py determine_available_memory; the profile would count the other
# stage's allocations as its own, device_route1.py says more), and a gpu_memory_utilization whose share
# each stage still finds free at init (v1/worker/utils.py request_memory: 0.3 x 141 GiB = 42 GiB, while
# a stage of the tiny model holds well under 10 GiB)
SHARED_KV_BYTES = 4 * 1024**3
SHARED_UTIL = 0.3
NODE2 = "raypp-node2"  # the second raylet (no server of its own: Serve's endpoint is the head's)
HEAD_GPU, NODE2_GPU = "0", "1"
PP = 2
# the second raylet's ports (agent, metrics export, workers, HAProxy's): a slot no cluster of
# device_base RAY_SLOT has (the head's is 9); tests/bench/test_gpu_pp.py checks them against every server
NODE2_SLOT = 11
# Ray 2.58.0 ray/serve/_private/constants.py: a worker node's Serve proxy binds these instead of the
# HTTP and gRPC ports (the head is exempt, proxy.py apply_per_node_port_overrides): two proxies of one
# cluster on one host need two ports (HAProxy runs with -dR, no SO_REUSEPORT, haproxy.py)
NODE2_PROXY_PORTS = {"RAY_SERVE_WORKER_PROXY_HTTP_PORT": 8018, "RAY_SERVE_WORKER_PROXY_GRPC_PORT": 9018}
# the replicas' direct ingress ports (HTTP): the slot's shift (30000 + 100 x slot) lands inside the
# worker port ranges of the clusters of slots 0-4 (20000-44999), so the pp cluster takes a range of its
# own, as wide as rendered; the controller (on the head) hands ports of it to the replicas of both nodes
INGRESS_FROM = 59000
INGRESS = ("RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT", "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT")
# the tiny model's positions (device_base.TINY_ARGS): the 405B renders max_context 32768, which vLLM
# refuses for a model of fewer positions
TINY_CONTEXT = int(TINY_ARGS[TINY_ARGS.index("--max-position") + 1])
PP_LEVELS = ((1, 32), (16, 256))
# the probe as the preflight Job runs it (infra/workload/builders/preflight.py FabricSpec's sizes and
# iterations, the p5.48xlarge's 3200 Gbps from the instance catalog; tests/bench/test_gpu_pp.py holds
# them to it), two launchers of one GPU as its two pods
PROBE_FLAGS: tuple[str, ...] = (
    "--backend",
    "nccl",
    "-b",
    "8388608",
    "-e",
    "2147483648",
    "-w",
    "5",
    "-n",
    "20",
)
PROBE_FLAGS += ("--expect-gbps", "3200", "--timeout", "120")
PROBE_MODES = {
    "nccl-picks": {},  # one host: NCCL finds the peer GPU and picks P2P (or SHM)
    "network": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},  # NCCL's network path: Socket
}
PROBE_PORTS = {"nccl-picks": 29600, "network": 29610}
# seconds for one mode (the Socket sweep to 2 GiB: about 40 s at 2026-11-28's 3.83 GB/s; the probe's
# own --timeout ends a rendezvous or a call that hangs after 120 s)
PROBE_LIMIT = 150.0


def rendered_env() -> dict[str, dict[str, str]]:
    """The render's variables (prepare.py ``pipeline_env``): ``head`` and ``worker``."""
    found: dict[str, dict[str, str]] = json.loads((CARRY / "pp_env.json").read_text())
    return found


def node_nccl(worker: dict[str, str]) -> dict[str, str]:
    """The worker pod's NCCL and libfabric variables (infra/workload/builders/efa.py nccl_env)."""
    return {k: v for k, v in worker.items() if k.startswith(("NCCL_", "FI_"))}


def ingress(rendered: dict[str, str]) -> dict[str, str]:
    """The direct ingress range both nodes get: ``INGRESS_FROM`` on, as wide as the render's."""
    low, high = (int(rendered[name]) for name in INGRESS)
    return {INGRESS[0]: str(INGRESS_FROM), INGRESS[1]: str(INGRESS_FROM + high - low)}


def node2_argv() -> list[str]:
    """``ray start`` for the second raylet: it joins the head's GCS with GPU 1 and ports of its own."""
    low, high = worker_ports(NODE2_SLOT)
    argv = ["ray", "start", f"--address=127.0.0.1:{RAY_PORTS[NAME]}", "--num-gpus=1", "--num-cpus=16"]
    argv += ["--disable-usage-stats", "--include-log-monitor=false"]
    argv += [
        f"--dashboard-agent-listen-port={52400 + NODE2_SLOT}",
        f"--metrics-export-port={8090 + NODE2_SLOT}",
    ]
    return [*argv, f"--min-worker-port={low}", f"--max-worker-port={high}"]


def node2_env(worker: dict[str, str], gpu: str = NODE2_GPU) -> dict[str, str]:
    """The second raylet's environment: GPU 1 (``gpu``), the head's caches and VLLM_PORT, the rendered
    worker pod's variables, its own HAProxy and proxy ports."""
    extra = cache_env(NAME)
    extra.update(NCCL_DEBUG="INFO", VLLM_PORT=str(VLLM_PORTS[NAME]))
    environ = env(gpu, **extra)
    environ["PATH"] = f"{SITE}/bin:{environ['PATH']}"
    environ.update(worker)
    environ.update(fast_ports(NODE2_SLOT, worker))
    environ.update({k: str(v) for k, v in NODE2_PROXY_PORTS.items()})
    environ.update(ingress(worker))
    return environ


def probe_argv(rank: int, mode: str) -> list[str]:
    """One launcher of the product's probe (node rank ``rank`` of two, one GPU each)."""
    argv = [sys.executable, "-m", "llmctl.serving.fabric.probe", "--nodes", "2", "--gpus-per-node", "1"]
    argv += ["--master", "127.0.0.1", "--port", str(PROBE_PORTS[mode]), "--node-rank", str(rank)]
    return [*argv, *PROBE_FLAGS, "--work-dir", f"/tmp/llmctl-fabric-{mode}-{rank}"]


def probe(mode: str, nccl: dict[str, str], gpus: tuple[str, str] = (HEAD_GPU, NODE2_GPU)) -> None:
    """Both launchers of one mode, each on its raylet's GPU (``gpus``); node 0's output raw (rows, NCCL's
    transport lines, the ``LLMCTL-FABRIC`` line), node 1's tail, both exit codes (3: the probe judged
    the fabric fallen back against the p5's EFA, which a Socket run on one host is)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    began = time.time()
    launched = []
    for rank, gpu in enumerate(gpus):
        log = LOGS / f"probe-{mode}-{rank}.log"
        process = subprocess.Popen(
            probe_argv(rank, mode),
            env=env(gpu, **nccl, **PROBE_MODES[mode]),
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        launched.append((process, log))
    codes: list[int | None] = []
    for process, _ in launched:
        try:
            codes.append(process.wait(timeout=max(1.0, began + PROBE_LIMIT - time.time())))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            codes.append(None)
    out = [log.read_text(errors="replace") for _, log in launched]
    record(
        "pp_probe",
        mode=mode,
        env=PROBE_MODES[mode],
        nccl_env=nccl,
        argv=probe_argv(0, mode)[1:],
        rc=codes,
        seconds=round(time.time() - began, 1),
        output=out[0][-20000:],
        node2_tail=out[1][-3000:],
    )
    export()


def start_pp(args: argparse.Namespace, network: bool = False, shared: bool = False) -> None:
    """Two Ray nodes of one GPU, the probe across them, then the 405B app at tp 1 x pp 2 (eager);
    ``network``: the app again as ``rayppn`` with NCCL's P2P and SHM off on both nodes, no probe;
    ``shared``: as ``raypp1``, both nodes given GPU 0 (``SHARED_GPU_ENV``), for a one-GPU machine."""
    plan.stop_all(args)
    name = NAME_NET if network else NAME_SHARED if shared else NAME
    node2_gpu = HEAD_GPU if shared else NODE2_GPU
    rendered = rendered_env()
    nccl = {**node_nccl(rendered["worker"]), **(PROBE_MODES["network"] if network else {})}
    nccl.update(SHARED_GPU_ENV if shared else {})
    environ, _ = servers.ray_head(
        name, 1, gpus=HEAD_GPU, rendered=rendered["head"], extra_env={**nccl, **ingress(rendered["head"])}
    )
    node2 = {**node2_env(rendered["worker"], node2_gpu), **nccl}
    servers.ray_start(
        NODE2,
        node2_argv(),
        node2,
        fast_path=True,
        ports={k: node2[k] for k in (*NODE2_PROXY_PORTS, "RAY_SERVE_HAPROXY_STATS_PORT")},
    )
    export()  # the two raylets' starts, before the probes take their minute or two
    probe_env = {**node_nccl(rendered["worker"]), **(SHARED_GPU_ENV if shared else {})}
    for mode in () if network else PROBE_MODES:
        probe(mode, probe_env, (HEAD_GPU, node2_gpu))
    engine_extra = {**EAGER, "kv_cache_memory_bytes": SHARED_KV_BYTES} if shared else EAGER
    driver = ("--pp", str(PP), "--max-context", str(TINY_CONTEXT), "--engine-extra", json.dumps(engine_extra))
    argv = servers.driver_argv(
        name,
        RAY_PORTS[name],
        SERVERS[name][0],
        1,
        *driver,
        config="serve_config_pp.json",
        **({"util": SHARED_UTIL} if shared else {}),
    )
    servers.spawn(name, argv, environ)  # ready counts from the driver's start, after the probes
    record(
        "start_pp",
        servers=[name],
        blueprint="llama31-405b-vllm-gpu",
        tensor_parallel=1,
        pipeline_parallel=PP,
        max_context=TINY_CONTEXT,
        engine_extra=engine_extra,
        gpus={name: HEAD_GPU, NODE2: node2_gpu},
        gpu_memory_utilization=SHARED_UTIL if shared else None,
        fast_path=True,
        nccl_env=nccl,
    )
    export()


# NCCL's lines that say how two ranks were connected (NVIDIA/nccl src/transport/p2p.cc "via P2P/...",
# shm.cc "via SHM/...", net.cc "via NET/<network>/...") and which network it loaded ("Using network");
# p2p.cc logs its line as INFO(NCCL_INIT|NCCL_P2P, ...), so the rendered NCCL_DEBUG_SUBSYS=INIT,NET keeps it
TRANSPORT_MARKS = (" via ", "Using network", "NET/Socket : Using")
VERSION_MARK = "NCCL version"  # init.cc's first INFO line: which NCCL the process loaded


def transport_lines(name: str) -> None:
    """NCCL's transport lines from every log of the cluster's session (both raylets write into the
    head's temp folder), by log file: the stage workers' send and receive between the two nodes."""
    temp = f"/tmp/r{RAY_SLOT[name]}/session_latest/logs"
    found: dict[str, list[str]] = {}
    versions: set[str] = set()
    for path in sorted(glob.glob(f"{temp}/**/*", recursive=True)):
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as log:
            lines = [
                line.strip()[-300:]
                for line in log
                if "NCCL INFO" in line and any(mark in line for mark in (*TRANSPORT_MARKS, VERSION_MARK))
            ]
        if transport := [line for line in lines if VERSION_MARK not in line]:
            found[os.path.basename(path)] = list(dict.fromkeys(transport))[:40]
        versions.update(line.rpartition(VERSION_MARK)[2].strip() for line in lines if VERSION_MARK in line)
    record("pp_nccl", name=name, files=found, nccl_versions=sorted(versions))


def bench_pp(args: argparse.Namespace, network: bool = False, shared: bool = False) -> None:
    """Once the app is ready (waited for up to ``--limit``): chat, c1 and c16, NCCL's transport lines;
    then everything stopped. A start that never got ready still gets its lines read and is stopped."""
    name = NAME_NET if network else NAME_SHARED if shared else NAME
    if not (RES / f"{name}.ready").exists():
        servers.wait(argparse.Namespace(names=name, limit=args.limit))
    if (RES / f"{name}.ready").exists():
        port = SERVERS[name][0]
        chat_check(name, port)
        for c, n in PP_LEVELS:
            llmctl_bench(f"{name}-c{c}", port, c, n)
            export()
    transport_lines(name)
    phases([name])
    fast_lines(name)
    export()
    plan.stop_all(args)
    export()
