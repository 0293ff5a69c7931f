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
