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

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "results" / "gpu-runs" / "2026-11-28-h200x2.jsonl"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"gpu_{name}", ROOT / "benchmarks" / "gpu" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_program_started_on_the_device_has_multicast_off() -> None:
    device = load("device")
    for gpus in (None, "0", "0,1"):
        environ = device.env(gpus, VLLM_PORT="31000")
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


def test_a_seed_from_an_engine_that_never_ran_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start with nothing to copy is a cold start: no cache_seeded record says otherwise."""
    monkeypatch.setenv("GPU_ROOT", str(tmp_path))
    device = load("device")
    device.seed_cache("ray4", "ray2")
    assert not device.RESULTS.exists()
    (device.CACHES / "ray2" / "home").mkdir(parents=True)
    (device.CACHES / "ray2" / "home" / "kernel.bin").write_bytes(b"x" * 10)
    device.seed_cache("ray4", "ray2")
    (line,) = device.RESULTS.read_text().splitlines()
    assert json.loads(line) | {"t": 0} == {
        "kind": "cache_seeded",
        "t": 0,
        "name": "ray4",
        "source": "ray2",
        "bytes": 10,
    }
