"""Issue 55 on the GPU machine, checked on the CPU: the multi-node blueprint's app at pipeline_parallel 2
over two Ray nodes of one host (benchmarks/gpu/device_pp.py).

- prepare.py carries the 405B's rendered serveConfigV2 and its pods' variables;
- ray_driver.py keeps pipeline_parallel as rendered (or forces it) and says so, and the app it builds
  asks vLLM for two stages on a PACK placement group of one-GPU bundles;
- ``start-pp`` starts two raylets of one GPU each, the probe across them in both NCCL modes, then the
  driver, each with the environment and ports the device needs; ``bench-pp`` loads it and stops it.

collect.py's row and a real two-raylet cluster: test_gpu_pp_run.py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpu_support import ROOT, load
from test_gpu_plan import RENDERED, ports_of

from llmctl.infra.workload.manifests import build_manifests

sys.path.insert(0, str(ROOT / "tests" / "workload"))
from workload_helpers import TOKEN, config_for, find

PP_BLUEPRINT = "llama31-405b-vllm-gpu"


def rendered_service(name: str = PP_BLUEPRINT) -> dict[str, Any]:
    found: dict[str, Any] = find(build_manifests(config_for(name), hf_token=TOKEN), "RayService")
    return found


def rendered_app(name: str = PP_BLUEPRINT) -> dict[str, Any]:
    app: dict[str, Any] = yaml.safe_load(rendered_service(name)["spec"]["serveConfigV2"])["applications"][0]
    return app


def test_prepare_carries_the_405b_app_and_its_pods_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve_config_pp.json`` is the render's serveConfigV2 (pp 2 x tp 8); ``pp_env.json`` holds the
    head container's fast path and the worker pod's NCCL/libfabric variables, never a secret."""
    prepare = load("prepare")
    service = rendered_service()
    rendered: list[str] = []

    def render(blueprint: str, _: Path) -> dict[str, Any]:
        rendered.append(blueprint)
        return service

    monkeypatch.setattr(prepare, "rendered_service", render)
    prepare.pipeline_config(tmp_path)
    assert rendered == [PP_BLUEPRINT]
    config = json.loads((tmp_path / "serve_config_pp.json").read_text())
    compute = config["applications"][0]["args"]["blueprint"]["compute"]
    assert (compute["pipeline_parallel"], compute["tensor_parallel"]) == (2, 8)
    variables = json.loads((tmp_path / "pp_env.json").read_text())
    assert variables["head"]["RAY_SERVE_ENABLE_HA_PROXY"] == "1"  # the 405B renders the fast path
    assert variables["head"] == prepare.fast_path_env(service)
    worker = variables["worker"]
    assert worker["FI_PROVIDER"] == "efa" and worker["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert worker["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1"
    assert not any(name.startswith(("HF_", "AWS_", "LLMCTL_")) for name in worker)


def driver_args(**flags: Any) -> argparse.Namespace:
    return argparse.Namespace(
        **{"tp": 1, "model": "/tiny", "util": 0.9, "replicas": 1, "router": None, **flags}
    )


def test_the_driver_keeps_pipeline_parallel_and_the_app_asks_vllm_for_two_stages() -> None:
    from llmctl.serving.common.ingress import parse_args
    from llmctl.serving.ray_vllm.app import ARGS, llm_config

    driver = load("ray_driver")
    app_args, changes = driver.device_args(rendered_app(), driver_args(pp=None, max_context=4096))
    assert changes["compute.pipeline_parallel"] == [2, 2]
    assert changes["compute.tensor_parallel"] == [8, 1]
    assert changes["model.max_context"] == [32768, 4096]
    blueprint, options = parse_args(app_args, ARGS)
    config = llm_config(blueprint, options)
    engine = config["engine_kwargs"]
    assert (engine["pipeline_parallel_size"], engine["tensor_parallel_size"]) == (2, 1)
    assert engine["max_model_len"] == 4096
    assert config["placement_group_config"] == {"bundle_per_worker": {"GPU": 1}, "strategy": "PACK"}
    # forced to one stage, and the 70B (no pipeline): recorded either way
    _, forced = driver.device_args(rendered_app(), driver_args(pp=1, max_context=None))
    assert forced["compute.pipeline_parallel"] == [2, 1] and "model.max_context" not in forced
    _, single = driver.device_args(rendered_app("llama2-70b-vllm-gpu"), driver_args())
    assert single["compute.pipeline_parallel"] == [1, 1]


def test_the_drivers_node_list_marks_the_head_and_the_gpus() -> None:
    driver = load("ray_driver")
    listed = [
        {"NodeID": "a", "NodeManagerAddress": "10.0.0.1", "Alive": True,
         "Resources": {"GPU": 1.0, "node:__internal_head__": 1.0}},
        {"NodeID": "b", "NodeManagerAddress": "127.0.0.1", "Alive": True, "Resources": {"GPU": 1.0}},
    ]  # fmt: skip
    assert driver.nodes(listed) == [
        {"node_id": "a", "address": "10.0.0.1", "head": True, "gpus": 1.0, "alive": True},
        {"node_id": "b", "address": "127.0.0.1", "head": False, "gpus": 1.0, "alive": True},
    ]


def carried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, dict[str, str]]]:
    """The device harness over tmp_path, with the render's pp_env.json carried."""
    monkeypatch.setenv("GPU_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv("GPU_CARRY", str(tmp_path / "carry"))
    prepare = load("prepare")
    variables = prepare.pipeline_env(rendered_service())
    device = load("device")
    device.base.CARRY.mkdir()
    (device.base.CARRY / "pp_env.json").write_text(json.dumps(variables))
    return device, variables


def test_start_pp_starts_two_raylets_then_the_probe_twice_then_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device, variables = carried(tmp_path, monkeypatch)
    pp = device.pp
    events: list[tuple[str, list[str], dict[str, str]]] = []

    def ray_start(argv: list[str], env: dict[str, str], **_: object) -> subprocess.CompletedProcess[str]:
        events.append(("ray", argv, env))
        return subprocess.CompletedProcess(argv, 0, "Local node IP: 127.0.0.1", "")

    class Launcher:
        pid = 0

        def __init__(self, argv: list[str], env: dict[str, str], **_: object) -> None:
            events.append(("probe", argv, env))

        def wait(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(device.servers.subprocess, "run", ray_start)
    monkeypatch.setattr(pp.subprocess, "Popen", Launcher)
    monkeypatch.setattr(
        pp.servers, "spawn", lambda name, argv, env, **kw: events.append(("driver", argv, env))
    )
    pp.start_pp(argparse.Namespace(limit=1))

    assert [kind for kind, _, _ in events] == ["ray", "ray", "probe", "probe", "probe", "probe", "driver"]
    (_, head, head_env), (_, node2, node2_env) = events[:2]
    assert "--head" in head and "--port=6391" in head and "--num-gpus=1" in head
    assert head_env["CUDA_VISIBLE_DEVICES"] == "0" and node2_env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "--address=127.0.0.1:6391" in node2 and "--num-gpus=1" in node2
    # a joining raylet: none of the head-only flags (Ray 2.58.0 scripts.py), the head's temp folder
    assert not any(
        flag.startswith(("--head", "--port", "--include-dashboard", "--temp-dir")) for flag in node2
    )
    assert "--include-log-monitor=false" in node2
    for environ in (head_env, node2_env):  # the worker pods' NCCL settings, the fast path, no multicast
        assert environ["FI_PROVIDER"] == "efa" and environ["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
        assert environ["RAY_SERVE_ENABLE_HA_PROXY"] == "1" and environ["NCCL_NVLS_ENABLE"] == "0"
    assert node2_env["RAY_SERVE_WORKER_PROXY_HTTP_PORT"] == "8018"
    assert node2_env["RAY_SERVE_HAPROXY_STATS_PORT"] != head_env["RAY_SERVE_HAPROXY_STATS_PORT"]

    probes = [(argv, env) for kind, argv, env in events if kind == "probe"]
    for (argv, env), (rank, gpu) in zip(probes, [(0, "0"), (1, "1")] * 2, strict=True):
        assert argv[1:3] == ["-m", "llmctl.serving.fabric.probe"]
        flags = dict(zip(argv[3::2], argv[4::2], strict=False))
        assert (
            flags["--nodes"] == "2" and flags["--gpus-per-node"] == "1" and flags["--master"] == "127.0.0.1"
        )
        assert flags["--node-rank"] == str(rank) and env["CUDA_VISIBLE_DEVICES"] == gpu
        assert env["FI_PROVIDER"] == "efa"
    assert all("NCCL_P2P_DISABLE" not in env for _, env in probes[:2])
    assert all(env["NCCL_P2P_DISABLE"] == env["NCCL_SHM_DISABLE"] == "1" for _, env in probes[2:])

    _, driver, driver_env = events[-1]
    flags = dict(zip(driver[2::2], driver[3::2], strict=False))
    assert flags["--tp"] == "1" and flags["--pp"] == "2" and flags["--max-context"] == "4096"
    assert json.loads(flags["--engine-extra"]) == {"enforce_eager": True}
    assert flags["--config"].endswith("serve_config_pp.json") and flags["--port"] == "8017"
    assert driver_env["CUDA_VISIBLE_DEVICES"] == "0" and driver_env["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
    records = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()]
    assert [r["mode"] for r in records if r["kind"] == "pp_probe"] == ["nccl-picks", "network"]
    assert [r["name"] for r in records if r["kind"] == "ray_start"] == ["raypp", "raypp-node2"]
    assert variables["worker"]["NCCL_DEBUG"] == "INFO"


def test_start_pp_net_starts_the_app_again_with_nccls_network_path_and_no_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``start-pp-net`` (device.py's step): both raylets with NCCL's P2P and SHM off, so that the stages
    talk over Socket; the fabric was probed by ``start-pp`` already; the app as ``rayppn``."""
    device, _ = carried(tmp_path, monkeypatch)
    pp = device.pp
    raylets: list[dict[str, str]] = []
    spawned: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(pp.servers, "ray_start", lambda name, argv, env, **_: raylets.append(env) or 0)
    monkeypatch.setattr(pp.subprocess, "Popen", lambda *a, **k: pytest.fail("no probe"))
    monkeypatch.setattr(pp.servers, "spawn", lambda name, argv, env, **kw: spawned.append((name, argv)))
    monkeypatch.setattr(sys, "argv", ["device.py", "start-pp-net", "--gpus", "2"])
    device.main()
    assert len(raylets) == 2
    for environ in raylets:
        assert environ["NCCL_P2P_DISABLE"] == environ["NCCL_SHM_DISABLE"] == "1"
        assert environ["FI_PROVIDER"] == "efa"
    ((name, argv),) = spawned
    assert name == "rayppn" and argv[argv.index("--ready") + 1].endswith("rayppn.ready")
    assert argv[argv.index("--pp") + 1] == "2"
    records = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()]
    (start,) = [r for r in records if r["kind"] == "start_pp"]
    assert start["servers"] == ["rayppn"] and start["nccl_env"]["NCCL_SHM_DISABLE"] == "1"
    assert not [r for r in records if r["kind"] in ("pp_probe", "step_failed")]


def test_start_pp1_gives_both_raylets_gpu_0_and_nccl_230s_multi_rank_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``start-pp1`` (a one-GPU machine): both raylets and both probe launchers on GPU 0, each with
    NCCL 2.30.7 preloaded and its multi-rank switch on; the driver with a fixed KV cache per stage and
    a utilization both stages find free; the app as ``raypp1`` on raypp's ports."""
    device, _ = carried(tmp_path, monkeypatch)
    pp = device.pp
    raylets: list[tuple[list[str], dict[str, str]]] = []
    probes: list[dict[str, str]] = []
    spawned: list[tuple[str, list[str]]] = []

    class Launcher:
        pid = 0

        def __init__(self, argv: list[str], env: dict[str, str], **_: object) -> None:
            probes.append(env)

        def wait(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(
        pp.servers, "ray_start", lambda name, argv, env, **_: raylets.append((argv, env)) or 0
    )
    monkeypatch.setattr(pp.subprocess, "Popen", Launcher)
    monkeypatch.setattr(pp.servers, "spawn", lambda name, argv, env, **kw: spawned.append((name, argv)))
    monkeypatch.setattr(sys, "argv", ["device.py", "start-pp1", "--gpus", "1"])
    device.main()
    lib = str(device.base.ROOT / "site-nccl" / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    assert len(raylets) == 2 and len(probes) == 4
    for environ in [env for _, env in raylets] + probes:
        assert environ["CUDA_VISIBLE_DEVICES"] == "0"
        assert environ["NCCL_MULTI_RANK_GPU_ENABLE"] == "1"
        assert environ["LD_PRELOAD"] == environ["VLLM_NCCL_SO_PATH"] == lib
        assert environ["FI_PROVIDER"] == "efa"
    assert all("--num-gpus=1" in argv for argv, _ in raylets)
    ((name, argv),) = spawned
    assert name == "raypp1" and argv[argv.index("--port") + 1] == "8017"
    assert argv[argv.index("--util") + 1] == "0.3" and argv[argv.index("--pp") + 1] == "2"
    assert json.loads(argv[argv.index("--engine-extra") + 1]) == {
        "enforce_eager": True,
        "kv_cache_memory_bytes": 4 * 1024**3,
    }
    records = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()]
    (start,) = [r for r in records if r["kind"] == "start_pp"]
    assert start["gpus"] == {"raypp1": "0", "raypp-node2": "0"} and start["gpu_memory_utilization"] == 0.3
    assert [r["mode"] for r in records if r["kind"] == "pp_probe"] == ["nccl-picks", "network"]


def test_prepare_carries_nccl_230_only_when_asked(tmp_path: Path) -> None:
    """The ``nccl`` set's wheel travels with ``--sets v26,nccl`` and with no other choice of sets."""
    prepare = load("prepare")
    wheel = tmp_path / "nccl" / "nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_x86_64.whl"
    assert prepare.carried(wheel, ["v26", "nccl"])
    assert not prepare.carried(wheel, ["v26"]) and not prepare.carried(wheel, ["triton"])
    assert prepare.pinned(prepare.SETS["nccl"]) == ["nvidia-nccl-cu13==2.30.7"]


def test_the_probe_runs_as_the_preflight_job_runs_it() -> None:
    """The sizes, iterations and expected bandwidth the preflight Job gives a p5.48xlarge replica."""
    from llmctl.blueprints.hardware import load_hardware
    from llmctl.infra.workload.builders import preflight

    pp = load("device").pp
    p5 = load_hardware().instance("p5.48xlarge")
    spec = preflight.fabric_spec(
        config_for(PP_BLUEPRINT), nodes=2, efa_interfaces=p5.efa_interfaces, expected_gbps=p5.network_gbps
    )
    job = preflight.probe_command(spec)
    wanted = {
        flag: job[job.index(flag) + 1] for flag in ("--backend", "-b", "-e", "-w", "-n", "--expect-gbps")
    }
    given = dict(zip(pp.PROBE_FLAGS[::2], pp.PROBE_FLAGS[1::2], strict=True))
    assert {flag: given[flag] for flag in wanted} == wanted


def test_the_two_ray_nodes_take_ports_no_other_server_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every port and range of both raylets (GCS, agents, metrics, workers, Serve's proxies, HAProxy,
    the replicas' direct ingress, vLLM's) against every other server's of device_base, and the
    probe's rendezvous ports: none shared."""
    device, variables = carried(tmp_path, monkeypatch)
    pp, base = device.pp, device.base
    head_env = {**base.fast_ports(base.RAY_SLOT["raypp"], variables["head"]), **pp.ingress(variables["head"])}
    head = ports_of(base, "raypp", fast=False)  # its HAProxy and direct ingress ports: below
    head |= {int(head_env[k]) for k in ("RAY_SERVE_HAPROXY_STATS_PORT", "RAY_SERVE_HAPROXY_METRICS_PORT")}
    head |= set(range(int(head_env[pp.INGRESS[0]]), int(head_env[pp.INGRESS[1]]) + 1))
    node2_env = pp.node2_env(variables["worker"])
    flags = dict(flag.removeprefix("--").split("=", 1) for flag in pp.node2_argv()[2:] if "=" in flag)
    low, high = int(flags["min-worker-port"]), int(flags["max-worker-port"])
    node2 = {
        int(flags["dashboard-agent-listen-port"]),
        int(flags["metrics-export-port"]),
        *range(low, high + 1),
    }
    node2 |= {
        int(node2_env[k])
        for k in (*pp.NODE2_PROXY_PORTS, "RAY_SERVE_HAPROXY_STATS_PORT", "RAY_SERVE_HAPROXY_METRICS_PORT")
    }
    assert not head & node2
    assert node2_env[pp.INGRESS[0]] == head_env[pp.INGRESS[0]] == "59000"  # the controller's, on the head
    # the 405B's ports as rendered are the 70B's, which ports_of moves by each other cluster's slot
    assert {k: variables["head"][k] for k in RENDERED} == RENDERED
    for name in base.SERVERS:
        if name not in ("raypp", "rayppn", "raypp1"):  # raypp again, never beside it
            assert not (head | node2) & ports_of(base, name, fast=True), name
    assert not set(pp.PROBE_PORTS.values()) & (head | node2)


def test_bench_pp_waits_loads_reads_nccl_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ready (waited for), chat, c1 and c16, the transport lines, then everything stopped; a start that
    never got ready is not loaded but still read and stopped."""
    device, _ = carried(tmp_path, monkeypatch)
    pp = device.pp
    calls: list[tuple[Any, ...]] = []

    def wait(ns: argparse.Namespace) -> None:
        calls.append(("wait", ns.names, ns.limit))
        (device.base.RES / "raypp.ready").write_text("1")

    monkeypatch.setattr(pp.servers, "wait", wait)
    monkeypatch.setattr(pp, "chat_check", lambda label, port: calls.append(("chat", label, port)))
    monkeypatch.setattr(pp, "llmctl_bench", lambda label, port, c, n: calls.append(("bench", label, c, n)))
    for step in ("transport_lines", "phases", "fast_lines"):
        monkeypatch.setattr(pp, step, lambda *a, _s=step: calls.append((_s,)))
    monkeypatch.setattr(pp.plan, "stop_all", lambda _a: calls.append(("stop_all",)))
    device.base.RES.mkdir(parents=True)
    pp.bench_pp(argparse.Namespace(limit=420))
    assert calls == [
        ("wait", "raypp", 420),
        ("chat", "raypp", 8017),
        ("bench", "raypp-c1", 1, 32),
        ("bench", "raypp-c16", 16, 256),
        ("transport_lines",),
        ("phases",),
        ("fast_lines",),
        ("stop_all",),
    ]
    calls.clear()
    (device.base.RES / "raypp.ready").unlink()
    monkeypatch.setattr(pp.servers, "wait", lambda ns: calls.append(("wait",)))
    pp.bench_pp(argparse.Namespace(limit=5))
    assert [c[0] for c in calls] == ["wait", "transport_lines", "phases", "fast_lines", "stop_all"]


def test_the_transport_lines_are_read_from_both_nodes_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device, _ = carried(tmp_path, monkeypatch)
    pp = device.pp
    logs = tmp_path / "session" / "logs"
    logs.mkdir(parents=True)
    (logs / "worker-aa-01000-123.out").write_text(
        "vm:123:123 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        "vm:123:123 [0] NCCL INFO cudaDriverVersion 13000\n"
    )
    (logs / "worker-bb-01000-456.out").write_text(
        "vm:456:456 [0] NCCL INFO Channel 00/1 : 1[1] -> 0[0] via P2P/CUMEM/read\n"
    )
    (logs / "raylet.out").write_text("nothing of NCCL\n")
    (logs / "worker-cc-01000-789.out").write_text("vm:789:789 [0] NCCL INFO NCCL version 2.30.7+cuda13.0\n")
    monkeypatch.setattr(pp.glob, "glob", lambda pattern, recursive: [str(p) for p in sorted(logs.iterdir())])
    pp.transport_lines("raypp")
    (found,) = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()]
    assert found["kind"] == "pp_nccl" and sorted(found["files"]) == [
        "worker-aa-01000-123.out",
        "worker-bb-01000-456.out",
    ]
    assert found["files"]["worker-aa-01000-123.out"] == [
        "vm:123:123 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM/read"
    ]
    assert found["nccl_versions"] == ["2.30.7+cuda13.0"]  # the version line counts apart, not as transport
