"""The four-GPU fast-path plan of the GPU harness (benchmarks/gpu/device_plan.py, docs/gpu-runs.md
"tp 2, routing and tp 4 on the fast path"), checked on the CPU: what each start is given, that the
servers which run together share no GPU and no port, how ``bench-route`` pairs its loads with the
engines' windows, and what ray_driver.py forces for the routing clusters."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gpu_support import documented_calls, load

RENDERED = {  # the 70B blueprint's rendered fast-path variables (test_gpu_harness checks the rendering)
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_HAPROXY_STATS_PORT": "8404",
    "RAY_SERVE_HAPROXY_METRICS_PORT": "9101",
    "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": "30000",
    "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": "30008",
}


def device_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    monkeypatch.setenv("GPU_CARRY", str(tmp_path / "carry"))
    device = load("device")
    device.base.RES.mkdir(parents=True)
    return device


def test_phase_a_starts_both_tp2_paths_together_eager_on_their_own_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = device_in(tmp_path, monkeypatch)
    calls: list[tuple[str, str, dict[str, object]]] = []
    monkeypatch.setattr(device.servers, "ray_vllm", lambda name, **kw: calls.append(("ray", name, kw)))
    monkeypatch.setattr(device.servers, "plain_vllm", lambda name, **kw: calls.append(("plain", name, kw)))
    monkeypatch.setattr(device.servers, "FAST_PATH", True)
    device.plan.start_pair(argparse.Namespace(eager=True))
    assert calls == [
        (
            "ray",
            "ray2fe",
            {"tp": 2, "gpus_total": 2, "driver": ("--engine-extra", '{"enforce_eager": true}')},
        ),
        ("plain", "vllm2fe", {"tp": 2, "flags": ("--enforce-eager",)}),
    ]
    (line,) = device.base.RESULTS.read_text().splitlines()
    assert json.loads(line) | {"t": 0} == {
        "kind": "start_pair",
        "t": 0,
        "servers": ["ray2fe", "vllm2fe"],
        "fast_path": True,
        "eager": True,
        "tensor_parallel": 2,
    }
    calls.clear()
    device.plan.start_pair(argparse.Namespace(eager=False))  # compiled: no switch on either side
    assert [c[2].get("driver", c[2].get("flags")) for c in calls] == [(), ()]


def test_phase_b_gives_each_cluster_two_replicas_and_the_router_named_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = device_in(tmp_path, monkeypatch)
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(device.servers, "ray_vllm", lambda name, **kw: calls.append(("ray", name, kw)))
    monkeypatch.setattr(device.servers, "stop", lambda names: calls.append(("stop", *names)))
    (device.base.RES / "ray2fe.pid").write_text("1")
    (device.base.RES / "vllm2fe.pid").write_text("2")
    device.plan.start_route(argparse.Namespace(eager=True, routers="pow2,cache_first"))
    eager = ("--engine-extra", '{"enforce_eager": true}')
    assert calls == [
        ("stop", "ray2fe", "vllm2fe"),  # phase A's servers first
        (
            "ray",
            "rayrd",
            {
                "tp": 1,
                "gpus_total": 2,
                "driver": ("--replicas", "2", "--router", "pow2", *eager),
                "router": "pow2",
            },
        ),
        (
            "ray",
            "rayrp",
            {
                "tp": 1,
                "gpus_total": 2,
                "driver": ("--replicas", "2", "--router", "cache_first", *eager),
                "router": "cache_first",
            },
        ),
    ]
    assert not (device.base.RES / "ray2fe.pid").exists() and (device.base.RES / "ray2fe.stopped").exists()
    started = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()][-1]
    assert started["routers"] == {"rayrd": "pow2", "rayrp": "cache_first"} and started["replicas"] == 2
    with pytest.raises(ValueError, match="two values"):
        device.plan.start_route(argparse.Namespace(eager=True, routers="prefix_aware"))


def test_stop_all_stops_what_was_started_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = device_in(tmp_path, monkeypatch)
    stopped: list[list[str]] = []
    monkeypatch.setattr(device.servers, "stop", lambda names: stopped.append(list(names)))
    (device.base.RES / "ray4fe.pid").write_text("1")
    device.plan.stop_all(argparse.Namespace())
    device.plan.stop_all(argparse.Namespace())  # nothing left: the old pid is not signalled again
    assert stopped == [["ray4fe"]]


def ports_of(base: Any, name: str, fast: bool) -> set[int]:
    """Every port (and port range) a server of the plan binds: its Serve or vLLM port, vLLM's own
    range, and for a Ray cluster its GCS, client, agent, metrics export, worker range and, on the
    fast path, HAProxy's ports and the direct ingress range."""
    ports = {base.SERVERS[name][0]}
    if name in base.VLLM_PORTS:
        ports |= set(range(base.VLLM_PORTS[name], base.VLLM_PORTS[name] + 100))
    if name in base.RAY_SLOT:
        slot = base.RAY_SLOT[name]
        low, high = base.worker_ports(slot)
        ports |= {base.RAY_PORTS[name], 10100 + slot, 52400 + slot, 8090 + slot, *range(low, high + 1)}
        if fast:
            moved = base.fast_ports(slot, RENDERED)
            ports |= {
                int(moved["RAY_SERVE_HAPROXY_STATS_PORT"]),
                int(moved["RAY_SERVE_HAPROXY_METRICS_PORT"]),
            }
            ports |= set(
                range(
                    int(moved["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"]),
                    int(moved["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]) + 1,
                )
            )
    return ports


@pytest.mark.parametrize("pair", [("ray2fe", "vllm2fe"), ("rayrd", "rayrp")])
def test_servers_started_together_share_no_gpu_and_no_port(
    pair: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two fast-path clusters on one machine: Ray 2.58's HAProxy binds a stats and a metrics port
    (8404, 9101 as rendered) and each cluster hands out the same direct ingress range unless moved."""
    base = device_in(tmp_path, monkeypatch).base
    # a Ray cluster is known by its name's "ray" (its readiness by the driver's file, its engine's
    # metrics through Ray's export port, its logs under /tmp/r<slot>)
    assert all(name.startswith("ray") for name in base.RAY_SLOT)
    first, second = pair
    assert not set(base.SERVERS[first][1].split(",")) & set(base.SERVERS[second][1].split(","))
    assert not ports_of(base, first, fast=True) & ports_of(base, second, fast=True)
    assert base.fast_ports(0, RENDERED) == {k: v for k, v in RENDERED.items() if k in base.FAST_PORT_SHIFTS}


def test_a_fast_path_cluster_starts_on_its_own_ports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    device = device_in(tmp_path, monkeypatch)
    device.base.CARRY.mkdir()
    (device.base.CARRY / "fast_path_env.json").write_text(json.dumps(RENDERED))
    seen: dict[str, Any] = {}

    def started(argv: list[str], env: dict[str, str], **_: object) -> subprocess.CompletedProcess[str]:
        seen.update(argv=argv, env=env)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(device.servers.subprocess, "run", started)
    monkeypatch.setattr(device.servers, "spawn", lambda *a, **kw: None)
    monkeypatch.setattr(device.servers, "FAST_PATH", True)
    device.servers.ray_vllm("rayrp", tp=1, gpus_total=2)
    slot = device.base.RAY_SLOT["rayrp"]
    assert seen["env"]["RAY_SERVE_HAPROXY_STATS_PORT"] == str(8404 + 10 * slot)
    assert seen["env"]["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"] == str(30000 + 100 * slot)
    assert seen["env"]["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"] == str(30008 + 100 * slot)
    assert seen["env"]["RAY_SERVE_ENABLE_HA_PROXY"] == "1" and seen["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"
    low, high = device.base.worker_ports(slot)
    assert f"--min-worker-port={low}" in seen["argv"] and f"--max-worker-port={high}" in seen["argv"]
    # two replicas in one environment: no VLLM_PORT, or both engines would take the same first port
    assert "VLLM_PORT" not in seen["env"]
    device.servers.ray_vllm("ray2fe", tp=2, gpus_total=2)  # one engine a cluster: a range of its own
    assert seen["env"]["VLLM_PORT"] == str(device.base.VLLM_PORTS["ray2fe"])


def test_the_routing_workloads_fit_the_context_and_are_valid_bench_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each workload's longest prompt plus its 128 output tokens within max_model_len 4096, and the flag
    set one `llmctl bench` accepts (--prefix-tokens and --conversations exclude each other)."""
    from llmctl.serving.client.bench.options import check_workload

    plan = device_in(tmp_path, monkeypatch).plan
    for name, shape in plan.WORKLOADS.items():
        for c in plan.ROUTE_LEVELS:
            extra, requests = shape(c)
            flags = dict(zip(extra[::2], extra[1::2], strict=True))
            settings = {key.strip("-").replace("-", "_"): int(value) for key, value in flags.items()}
            check_workload(settings)  # raises BadInput on a combination the bench refuses
            question = settings["mean_input_tokens"]
            if name == "prefix":
                longest = settings["prefix_tokens"] + question
            else:  # turn T-1: every question so far and T-1 stand-in answers of 128 tokens
                longest = settings["turns"] * question + (settings["turns"] - 1) * 128
                assert settings["conversations"] == c and requests >= c * settings["turns"]
            assert longest + 128 <= 4096 and requests >= 2 * c


def metrics(queries: float, hits: float, done: tuple[float, float]) -> str:
    """Ray's export of our engines' counters: one label set per replica (WorkerId)."""
    lines = [
        f'ray_vllm_prefix_cache_queries_total{{engine="0",WorkerId="a"}} {queries}',
        f'ray_vllm_prefix_cache_hits_total{{engine="0",WorkerId="a"}} {hits}',
    ]
    for worker, count in zip("ab", done, strict=True):
        lines.append(
            f'ray_vllm_request_success_total{{WorkerId="{worker}",finished_reason="length"}} {count}'
        )
    return "\n".join(lines) + "\n"


def test_bench_route_alternates_the_clusters_and_reads_each_window_after_ray_exported_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = device_in(tmp_path, monkeypatch)
    plan = device.plan
    clock = {"now": 1000.0}
    events: list[tuple[str, object]] = []

    class Clock:
        @staticmethod
        def time() -> float:
            return clock["now"]

        @staticmethod
        def sleep(seconds: float) -> None:
            events.append(("sleep", round(seconds, 1)))
            clock["now"] += seconds

    loads = {"rayrd": 0, "rayrp": 0}

    def bench(label: str, port: int, c: int, n: int, extra: tuple[str, ...] = ()) -> None:
        events.append(("bench", label))
        loads[label.split("-")[0]] += 1
        clock["now"] += 20

    def scrape(url: str) -> str:
        events.append(("scrape", url))
        done = loads["rayrd"] if url.endswith(str(8090 + device.base.RAY_SLOT["rayrd"]) + "/metrics") else 0
        return metrics(100.0 * done, 60.0 * done, (10.0 * done, 30.0 * done))

    monkeypatch.setattr(plan, "time", Clock)
    monkeypatch.setattr(plan, "llmctl_bench", bench)
    monkeypatch.setattr(plan, "scrape", scrape)
    monkeypatch.setattr(plan, "chat_check", lambda name, port: events.append(("chat", name)))
    monkeypatch.setattr(plan, "fast_lines", lambda name: events.append(("lines", name)))
    for name in ("rayrd", "rayrp"):
        (device.base.RES / f"{name}.ready").write_text("1")
    plan.bench_route(argparse.Namespace(names="rayrd,rayrp", rounds=2, limit=1, first_round=1))
    benches = [label for kind, label in events if kind == "bench"]
    assert benches == [
        f"{name}-{workload}-c{c}-r{r}"
        for r in (1, 2)
        for c in (16, 64)
        for workload in ("prefix", "turns")
        for name in ("rayrd", "rayrp")
    ]
    # one scrape before each load (it closes that cluster's previous window, 20 s after it ended),
    # one final scrape per cluster; the only waits are the final ones, until 12 s after each last load
    assert sum(1 for kind, _ in events if kind == "scrape") == len(benches) + 2
    sleeps = [seconds for kind, seconds in events if kind == "sleep"]
    assert len(sleeps) == len(benches) and set(sleeps[:-1]) == {0.0} and sleeps[-1] == 12.0
    windows = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()]
    windows = [w for w in windows if w["kind"] == "route_window"]
    assert sorted(w["label"] for w in windows) == sorted(benches)
    first = next(w for w in windows if w["label"] == "rayrd-prefix-c16-r1")
    assert first["series"]["ray_vllm_prefix_cache_hits_total"] == {"WorkerId=a,engine=0": 60.0}
    assert first["series"]["ray_vllm_request_success_total"] == {"WorkerId=a": 10.0, "WorkerId=b": 30.0}
    assert events[-2:] == [("lines", "rayrd"), ("lines", "rayrp")]


def test_the_documented_calls_run_steps_that_exist_with_flags_that_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator runs the page's commands literally: every step exists, every flag parses, every
    name is a server of the harness, and the starts get the fast path and eager mode where written."""
    device = device_in(tmp_path, monkeypatch)
    calls = documented_calls("### tp 2, routing and tp 4 on the fast path")
    assert list(calls) == ["parts 00-13", "A (part 14)", "B", "C", "D", "E", "F"]
    ran: list[tuple[str, str, bool, bool]] = []

    def step(name: str) -> Any:
        return lambda args: ran.append((name, args.names, device.servers.FAST_PATH, args.eager))

    for module, names in (
        (device.install, ("recv", "setup")),
        (device.servers, ("wait",)),
        (device.bench, ("bench_f",)),
        (
            device.plan,
            ("start_pair", "start_route", "start_fast4", "start_plain4", "stop_all", "bench_route"),
        ),
    ):
        for name in names:
            monkeypatch.setattr(module, name, step(name.replace("_", "-")))
    listed = "".join(f"GPU {i}: NVIDIA H200\n" for i in range(4))
    monkeypatch.setattr(
        device.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(argv, 0, listed, "")
    )
    steps = {}
    for call, argv in calls.items():
        ran.clear()
        monkeypatch.setattr(device.sys, "argv", ["device.py", *argv])
        device.main()
        steps[call] = [name for name, *_ in ran]
        for _, names, fast, eager in ran:
            if "--names" in argv:
                assert set(names.split(",")) <= set(device.base.SERVERS)
            assert fast == ("--fast-path" in argv) and eager == ("--eager" in argv)
        assert not device.base.RESULTS.exists() or "step_failed" not in device.base.RESULTS.read_text()
    assert steps == {
        "parts 00-13": ["recv"],
        "A (part 14)": ["recv", "setup", "start-pair", "wait"],
        "B": ["bench-f", "stop-all", "start-route"],
        "C": ["bench-route"],  # it waits itself: a wait step before it could double the limit
        "D": ["bench-route", "stop-all", "start-fast4"],
        "E": ["bench-f", "stop-all", "start-plain4"],
        "F": ["bench-f", "stop-all"],
    }
