"""Routing on one H200 (benchmarks/gpu/device_route1.py, docs/gpu-runs.md "Routing on one H200"),
checked on the CPU: the 8B-shaped model folder with no weights, what each start gives Ray and the
driver (two replicas on GPU 0, half of it each, dummy weights, a fixed KV cache), the loads' sizes
against that cache, and collect.py's row for such a run, on a SYNTHETIC results file
(tests/bench/data/route1-synthetic.jsonl, written by :func:`run_steps`: the real steps with doubles
for the servers, the loads and the scrapes; never a recorded run)."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpu_support import documented_calls, load
from test_gpu_plan import device_in

from llmctl.serving.client.tiny import TinyShape, write_tiny_model

FIXTURE = Path(__file__).resolve().parent / "data" / "route1-synthetic.jsonl"
GIB = 1024**3


def tiny_args_shape(base: Any) -> TinyShape:
    """The shape ``setup`` gives ``llmctl models tiny`` (device_base.TINY_ARGS)."""
    flags = dict(zip(base.TINY_ARGS[::2], base.TINY_ARGS[1::2], strict=True))
    return TinyShape(**{flag.strip("-").replace("-", "_"): int(v) for flag, v in flags.items()})


def test_the_8b_folder_is_the_tiny_models_with_llama3_8bs_shape_and_no_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    import transformers

    device = device_in(tmp_path, monkeypatch)
    route1 = device.route1
    write_tiny_model(device.base.MODEL, shape=tiny_args_shape(device.base), tensor_parallel=4)
    folder = route1.model_8b()
    assert folder == device.base.WHEELS / "shape8b"
    names = sorted(path.name for path in folder.iterdir())
    assert not [n for n in names if n.endswith(".safetensors") or n == "llmctl-tiny.json"]
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} <= set(names)
    config = transformers.AutoConfig.from_pretrained(folder)
    assert (config.hidden_size, config.num_hidden_layers, config.intermediate_size) == (4096, 32, 14336)
    assert (config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (32, 8, 128)
    assert config.max_position_embeddings == route1.MAX_CONTEXT == 8192
    assert config.vocab_size == 512  # the tiny tokenizer's: the 8B's compute, not its vocabulary
    # vLLM 0.26.0 caps max_model_len at the tokenizer's model_max_length too (config/model.py)
    assert transformers.AutoTokenizer.from_pretrained(folder).model_max_length == 8192
    kv = config.num_hidden_layers * config.num_key_value_heads * config.head_dim * 2 * 2  # K, V in bf16
    assert kv == route1.KV_BYTES_PER_TOKEN == 128 * 1024
    with torch.device("meta"):
        parameters = sum(p.numel() for p in transformers.LlamaForCausalLM(config).parameters())
    assert round(parameters / 1e9, 2) == 6.98
    # both engines on one 139 GiB H200: the second still finds what request_memory asks for, with the
    # first's weights, KV cache and up to 4 GiB of activations and context already taken
    total = 139 * GIB
    first = 2 * parameters + route1.KV_CACHE_BYTES + 4 * GIB
    assert total - first > total * route1.UTIL_8B
    assert route1.model_8b() == folder  # a second start reuses it


def started_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, router: str
) -> tuple[Any, dict[str, Any], argparse.Namespace]:
    """start-route1 with `ray start` and the driver's process replaced: what Ray starts with, and the
    driver's arguments as ray_driver.py parses them."""
    device = device_in(tmp_path, monkeypatch)
    seen: dict[str, Any] = {}

    def ray_start(argv: list[str], env: dict[str, str], **_: object) -> subprocess.CompletedProcess[str]:
        seen.update(ray_argv=argv, env=env)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(device.servers.subprocess, "run", ray_start)
    monkeypatch.setattr(
        device.servers, "spawn", lambda name, argv, env, **kw: seen.update(name=name, argv=argv)
    )
    monkeypatch.setattr(device.servers, "stop", lambda names: seen.setdefault("stopped", []).append(names))
    monkeypatch.setattr(device.route1, "model_8b", lambda: device.base.WHEELS / "shape8b")
    (device.base.RES / "rayr1d.pid").write_text("1")  # the other router's cluster, still up
    device.route1.start_route1(argparse.Namespace(router=router, eager=False))  # eager whatever it says
    driver = load("ray_driver")
    parsed: dict[str, argparse.Namespace] = {}
    monkeypatch.setattr(driver, "deploy", lambda args: parsed.setdefault("args", args))
    monkeypatch.setattr(sys, "argv", seen["argv"][1:])
    driver.main()
    return device, seen, parsed["args"]


@pytest.mark.parametrize(("router", "name"), [("default", "rayr1d"), ("prefix_aware", "rayr1p")])
def test_start_route1_puts_two_replicas_of_the_8b_shape_on_half_of_gpu_0_each(
    router: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device, seen, args = started_cluster(tmp_path, monkeypatch, router)
    assert seen["stopped"] == [["rayr1d"]] and seen["name"] == name  # one cluster at a time
    assert "--num-gpus=1" in seen["ray_argv"] and seen["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert "VLLM_PORT" not in seen["env"]  # two engines in one environment (device_base VLLM_PORTS)
    assert seen["env"]["NCCL_NVLS_ENABLE"] == "0" and seen["env"]["NVSHMEM_DISABLE_NVLS"] == "1"
    assert (args.replicas, args.router, args.tp, args.gpu_fraction) == (2, router, 1, 0.5)
    assert args.model == str(device.base.WHEELS / "shape8b") and args.util == 0.35
    assert args.max_context == 8192
    assert json.loads(args.engine_extra) == {
        "enforce_eager": True,
        "load_format": "dummy",
        "kv_cache_memory_bytes": 5 * GIB,
    }
    (started,) = [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()][-1:]
    assert started["kind"] == "start_route1" and started["servers"] == [name]
    assert started["router"] == router and started["gpu_fraction"] == 0.5 and started["eager"]


def test_start_route1_refuses_a_router_it_has_no_cluster_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    device = device_in(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="start-route1 knows"):
        device.route1.start_route1(argparse.Namespace(router="kv_aware", eager=True))


def test_the_gpu_fraction_reaches_the_apps_placement_bundle_as_ray_accepts_it() -> None:
    from ray.llm._internal.common.placement import PlacementGroupConfig
    from test_gpu_driver_router import _args, _rendered_app

    from llmctl.serving.common.ingress import parse_args
    from llmctl.serving.ray_vllm.app import ARGS, llm_config

    driver, route1 = load("ray_driver"), load("device").route1
    given = _args(replicas=2, router="prefix_aware", max_context=route1.MAX_CONTEXT, util=route1.UTIL_8B)
    app_args, _ = driver.device_args(_rendered_app(), given)
    config = llm_config(*parse_args(app_args, ARGS))  # the blueprint takes the context and the share
    assert config["engine_kwargs"]["max_model_len"] == 8192
    assert config["engine_kwargs"]["gpu_memory_utilization"] == 0.35
    assert config["placement_group_config"]["bundle_per_worker"] == {"GPU": 1}  # as the app builds it
    driver.gpu_bundle(0.5)(config)
    placement = PlacementGroupConfig(**config["placement_group_config"])
    assert placement.bundle_per_worker.GPU == 0.5 and placement.strategy == "STRICT_PACK"
    # what vLLM's Ray executor asks each worker's GPUs with, from the engine's own environment: in the
    # replica's runtime_env, beside the app's own variables (2026-11-29: without it, {'GPU': 1.0})
    assert config["runtime_env"]["env_vars"]["VLLM_RAY_PER_WORKER_GPUS"] == "0.5"
    assert len(config["runtime_env"]["env_vars"]) > 1
    for wrong in (0.0, 1.5):
        with pytest.raises(ValueError, match="--gpu-fraction"):
            driver.gpu_bundle(wrong)


def lru_hits(sequence: list[tuple[int, int]], capacity: int, unit: int) -> int:
    """Requests whose shared prefix (``unit`` tokens) a replica's LRU cache of ``capacity`` tokens still
    holds: ``sequence`` is (replica, group) in arrival order."""
    caches: dict[int, list[int]] = {}
    hits = 0
    for replica, group in sequence:
        held = caches.setdefault(replica, [])
        if group in held:
            hits += 1
            held.remove(group)
        held.append(group)
        while len(held) * unit > capacity:
            held.pop(0)
    return hits


def test_the_loads_overflow_one_replicas_cache_under_round_robin_and_fit_it_when_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.serving.client.bench.options import check_workload

    route1 = device_in(tmp_path, monkeypatch).route1
    cache_tokens = route1.KV_CACHE_BYTES // route1.KV_BYTES_PER_TOKEN
    assert cache_tokens == 40960
    (c,) = route1.LEVELS
    for name, shape in route1.WORKLOADS.items():
        extra, requests = shape(c)
        flags = dict(zip(extra[::2], extra[1::2], strict=True))
        settings = {key.strip("-").replace("-", "_"): int(value) for key, value in flags.items()}
        check_workload(settings)
        question = settings["mean_input_tokens"]
        if name == "prefix":
            groups, unit = settings["prefix_groups"], settings["prefix_tokens"] + question + 128
            longest = settings["prefix_tokens"] + question
        else:  # a conversation's cached prompt and output, on average over its turns
            groups, turns = settings["conversations"], settings["turns"]
            longest = turns * question + (turns - 1) * 128
            unit = sum((t + 1) * question + 128 * t for t in range(turns)) // turns + 128
            assert groups >= c  # a turn is sent once the one before it was answered
        assert longest + 128 <= route1.MAX_CONTEXT
        # odd: round robin (request i to replica i mod 2) would otherwise pin each group to a replica
        assert groups % 2 == 1
        assert groups * unit > cache_tokens  # all of them: more than one replica holds
        assert math.ceil(groups / 2) * unit <= cache_tokens  # half of them: what one replica holds
        # request i's prefix: group i mod G, or conversation i mod C of its round (workloads.py); round
        # robin sends it to replica i mod 2, a prefix router where that prefix went first (new ones
        # alternate: each goes to the replica with the fewer prompts)
        per_round = groups * settings.get("turns", requests)
        keys = [(i // per_round) * groups + i % groups for i in range(requests)]
        round_robin = lru_hits([(i % 2, key) for i, key in enumerate(keys)], cache_tokens, unit)
        by_prefix = lru_hits([(key % 2, key) for key in keys], cache_tokens, unit)
        assert round_robin == 0 and by_prefix == requests - len(set(keys))


SUMMARIES = {  # synthetic client figures (ms, ms, tok/s) per router and workload
    ("rayr1d", "prefix"): (900.0, 2400.0, 350.0),
    ("rayr1p", "prefix"): (300.0, 700.0, 520.0),
    ("rayr1d", "turns"): (800.0, 1500.0, 400.0),
    ("rayr1p", "turns"): (700.0, 1600.0, 410.0),  # a miss: the goal is not met, by 100 ms
}
COUNTERS = {  # per load: prompt tokens queried and found per replica, requests each finished
    ("rayr1d", "prefix"): ((400000.0, 360000.0), (20000.0, 18000.0), (90.0, 90.0)),
    ("rayr1p", "prefix"): ((380000.0, 380000.0), (340000.0, 330000.0), (96.0, 84.0)),
    ("rayr1d", "turns"): ((300000.0, 300000.0), (0.0, 30000.0), (85.0, 85.0)),
    ("rayr1p", "turns"): ((300000.0, 300000.0), (150000.0, 150000.0), (80.0, 90.0)),
}


def summary(p50: float, p90: float, tok_s: float, n: int) -> dict[str, Any]:
    """The fields of ``llmctl bench``'s summary.json that collect.py reads (times in s)."""
    return {
        "metrics": {
            "ttft_s": {"p50": p50 / 1000, "p90": p90 / 1000, "p99": 2 * p90 / 1000, "mean": p50 / 1000},
            "tpot_s": {"mean": 0.03},
            "ttft_answer_s": {"p50": p50 / 1000},
        },
        "counts": {"completed": n, "failed": 0, "errors_by_type": {}},
        "throughput": {"output_throughput_tok_s": tok_s},
        "tokens": {"output_source": {"usage": n}},
    }


def export(totals: dict[str, list[float]]) -> str:
    """Ray's export of both replicas' engine counters (one WorkerId each) and a TTFT histogram."""
    lines = []
    for i, worker in enumerate(("w0", "w1")):
        labels = f'engine="0",WorkerId="{worker}",model_name="tiny"'
        lines.append(f"ray_vllm_prefix_cache_queries_total{{{labels}}} {totals['queries'][i]}")
        lines.append(f"ray_vllm_prefix_cache_hits_total{{{labels}}} {totals['hits'][i]}")
        lines.append(
            f'ray_vllm_request_success_total{{{labels},finished_reason="length"}} {totals["done"][i]}'
        )
        done = totals["done"][i]
        lines.append(f'ray_vllm_time_to_first_token_seconds_bucket{{{labels},le="0.5"}} {done / 2}')
        lines.append(f'ray_vllm_time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {done}')
        lines.append(f"ray_vllm_time_to_first_token_seconds_count{{{labels}}} {done}")
        lines.append(f"ray_vllm_time_to_first_token_seconds_sum{{{labels}}} {done * 0.4}")
    return "\n".join(lines) + "\n"


def run_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The documented calls' steps (start-route1, bench-route1, stop-all; each router in turn) with
    doubles for what needs the device: the cluster's start, `llmctl bench` and Ray's export."""
    device = device_in(tmp_path, monkeypatch)
    plan, route1 = device.plan, device.route1
    device.base.record(
        "setup",
        gpus=["NVIDIA H200, 143771 MiB"],
        cpus=16,
        versions="{}",
        synthetic="tests/bench/test_gpu_route1.py run_steps",
    )
    clock = {"now": 1000.0}
    totals = {"queries": [0.0, 0.0], "hits": [0.0, 0.0], "done": [0.0, 0.0]}

    class Clock:
        time = staticmethod(lambda: clock["now"])
        sleep = staticmethod(lambda seconds: clock.__setitem__("now", clock["now"] + seconds))

    def ray_vllm(name: str, **_: object) -> None:
        (device.base.RES / f"{name}.pid").write_text("1")

    def wait(args: argparse.Namespace) -> None:  # bench-route's wait for a cluster still starting
        for name in args.names.split(","):
            (device.base.RES / f"{name}.ready").write_text("1")
            device.base.record("ready", name=name, seconds=150.0)

    def bench(label: str, port: int, c: int, n: int, extra: tuple[str, ...] = ()) -> None:
        name, workload = label.split("-")[:2]
        queries, hits, done = COUNTERS[(name, workload)]
        for key, values in (("queries", queries), ("hits", hits), ("done", done)):
            totals[key] = [a + b for a, b in zip(totals[key], values, strict=True)]
        clock["now"] += 60
        device.base.record("client", label=f"llmctl-{label}", wall_s=60.0, rc=0, cpu_s=9.0, peak_rss_mib=800)
        figures = SUMMARIES[(name, workload)]
        device.base.record("llmctl_bench", label=label, rc=0, summary=summary(*figures, n), tail=None)

    monkeypatch.setattr(device.servers, "ray_vllm", ray_vllm)
    monkeypatch.setattr(device.servers, "stop", lambda names: None)
    monkeypatch.setattr(device.servers, "wait", wait)
    monkeypatch.setattr(route1, "model_8b", lambda: device.base.WHEELS / "shape8b")
    monkeypatch.setattr(plan, "time", Clock)
    monkeypatch.setattr(plan, "llmctl_bench", bench)
    monkeypatch.setattr(plan, "scrape", lambda url: export(totals))
    monkeypatch.setattr(plan, "fast_lines", lambda name: None)
    for router, name in (("default", "rayr1d"), ("prefix_aware", "rayr1p")):
        args = argparse.Namespace(
            router=router, eager=True, names=name, rounds=1, first_round=1, limit=1, no_chat=True
        )
        route1.start_route1(args)
        route1.bench_route1(args)
    plan.stop_all(None)
    return [json.loads(line) for line in device.base.RESULTS.read_text().splitlines()]


def test_the_fixture_is_what_the_steps_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The synthetic file holds the records the steps write, in their order (the clock aside)."""
    ran = run_steps(tmp_path, monkeypatch)
    fixture = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert [r | {"t": 0} for r in ran] == [r | {"t": 0} for r in fixture]
    labels = [r["label"] for r in ran if r["kind"] == "llmctl_bench"]
    assert labels == [
        "rayr1d-prefix-c16-r1",
        "rayr1d-turns-c16-r1",
        "rayr1p-prefix-c16-r1",
        "rayr1p-turns-c16-r1",
    ]


def test_collect_pairs_the_routers_measured_one_after_the_other() -> None:
    collect = load("collect")
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    measured = collect.collect(records)
    assert "request_routing" not in measured  # the four-GPU row is another run's
    row = measured["request_routing_one_h200_two_replicas_sharing_it_8b_shape_dummy_weights"]
    assert row["routers"] == {"rayr1d": "default", "rayr1p": "prefix_aware"}
    assert row["setup"]["gpus"] == 1 and row["setup"]["gpu_fraction"] == 0.5
    assert row["setup"]["kv_cache_bytes"] == 5 * GIB and row["setup"]["shape"]["num_hidden_layers"] == 32
    prefix = row["workloads"]["prefix"]["c16"]
    default, aware = prefix["rounds"]["r1"]["default"], prefix["rounds"]["r1"]["prefix_aware"]
    assert (default["ttft_p50_ms"], default["ttft_p90_ms"], default["output_tok_s"]) == (900.0, 2400.0, 350.0)
    assert default["hit_rate"] == round(38000 / 760000, 4) and aware["hit_rate"] == round(670000 / 760000, 4)
    assert aware["requests_by_engine"] == {"WorkerId=w0": 96.0, "WorkerId=w1": 84.0}
    assert prefix["aware_vs_default"]["r1"] == {
        "ttft_p50_ms_vs_default": -600.0,
        "ttft_p90_ms_vs_default": -1700.0,
        "output_tok_s_vs_default_pct": 48.6,
        "hit_rate_points_vs_default": round(100 * (aware["hit_rate"] - default["hit_rate"]), 2),
    }
    assert aware["engine"]["requests"] == 180.0
    goal = row["goal"]
    # the goal is the shared-prefix workload's (issue 52); the multi-turn loads stand beside it
    assert goal["by_load"] == {"prefix-c16": {"r1": -1700.0}}
    assert goal["met"] and goal["missed_by"] is None and "where_time_goes" not in goal
    assert goal["other_loads"] == {"turns-c16": {"r1": 100.0}}
    lost = goal["other_loads_where_time_goes"]
    assert lost["load"] == "turns-c16" and lost["default"]["hit_rate"] == round(30000 / 600000, 4)
    assert row["failed"] == 0


def test_the_documented_calls_run_steps_that_exist_with_flags_that_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator runs the page's commands literally: each step exists, each flag parses, the
    clusters are servers of the harness, each start gets the fast path and a router it knows."""
    device = device_in(tmp_path, monkeypatch)
    ran: list[tuple[str, argparse.Namespace, bool]] = []

    def step(name: str) -> Any:
        return lambda args: ran.append((name, args, device.servers.FAST_PATH))

    monkeypatch.setattr(device.install, "recv", step("recv"))
    monkeypatch.setattr(device.install, "setup", step("setup"))
    monkeypatch.setattr(device.plan, "stop_all", step("stop-all"))
    monkeypatch.setattr(device.route1, "start_route1", step("start-route1"))
    monkeypatch.setattr(device.route1, "bench_route1", step("bench-route1"))
    monkeypatch.setattr(
        device.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(argv, 0, "GPU 0: H200\n", "")
    )
    steps = {}
    for call, argv in documented_calls("### Routing on one H200").items():
        ran.clear()
        monkeypatch.setattr(sys, "argv", ["device.py", *argv])
        device.main()
        steps[call] = [name for name, *_ in ran]
        for name, args, fast in ran:
            assert fast == ("--fast-path" in argv) and args.gpus == 1
            if name == "start-route1":
                assert fast and args.router in device.route1.NAMES
            if name == "bench-route1":
                assert args.names in device.route1.NAMES.values() and args.names in device.base.SERVERS
                assert args.no_chat and args.rounds == 1
    assert steps == {
        "parts 00-13": ["recv"],
        "A (part 14)": ["recv", "setup", "start-route1"],
        "B": ["bench-route1", "stop-all", "start-route1"],
        "C": ["bench-route1", "stop-all"],
    }
