"""Turn what GPU runs returned (``results.jsonl`` from the device's ``$OUT``) into
benchmarks/results/gpu.json:
``python benchmarks/gpu/collect.py --run RESULTS.jsonl NOTES.json [--run RESULTS2.jsonl NOTES2.json]``.

The figures are copied from each run's records (a difference is taken only between two records of the
same run); each run's notes add what a person read in its logs (why a start failed), each note naming
the log it comes from.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

# the routing row's module sits beside this file: importable when it runs as a script and when a test
# loads it from its path
sys.path.insert(0, str(Path(__file__).resolve().parent))

import collect_pp
import collect_route

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "benchmarks" / "results" / "gpu.json"


def ms(value: float | None) -> float | None:
    return None if value is None else round(1000 * value, 2)


def llmctl_row(summary: dict[str, Any], client: dict[str, Any] | None) -> dict[str, Any]:
    metrics, counts = summary["metrics"], summary["counts"]
    return {
        "completed": counts["completed"],
        "failed": counts["failed"],
        "errors_by_type": counts["errors_by_type"],
        "ttft_p50_ms": ms(metrics["ttft_s"]["p50"]),
        "ttft_p99_ms": ms(metrics["ttft_s"]["p99"]),
        "ttft_answer_p50_ms": ms(metrics.get("ttft_answer_s", {}).get("p50")),
        "tpot_mean_ms": ms(metrics["tpot_s"]["mean"]),
        "output_tok_s": round(summary["throughput"]["output_throughput_tok_s"], 1),
        "output_token_source": summary["tokens"]["output_source"],
        "client": client,
    }


def vllm_row(result: dict[str, Any], client: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "completed": result["completed"],
        "failed": result["failed"],
        "ttft_p50_ms": round(result["p50_ttft_ms"], 2),
        "ttft_p99_ms": round(result["p99_ttft_ms"], 2),
        "tpot_mean_ms": round(result["mean_tpot_ms"], 2),
        "output_tok_s": round(result["output_throughput"], 1),
        "client": client,
    }


def collect(records: list[dict[str, Any]]) -> dict[str, Any]:
    clients = {
        r["label"]: {k: r.get(k) for k in ("wall_s", "cpu_s", "peak_rss_mib")}
        for r in records
        if r["kind"] == "client"
    }
    windows = {r["label"]: r for r in records if r["kind"] == "server_window"}
    setup = next(r for r in records if r["kind"] == "setup")
    out: dict[str, Any] = {
        "device": {"gpus": setup["gpus"], "cpus": setup["cpus"], "versions": json.loads(setup["versions"])},
        "starts": {
            r["name"]: r["seconds"] for r in records if r["kind"] == "ready" and r["name"] != "triton"
        },
        "not_ready": sorted({r["name"] for r in records if r["kind"] == "not_ready"}),
        "phase_lines": {r["name"]: r["lines"] for r in records if r["kind"] == "phase_lines"},
        "nccl": {r["name"]: r["lines"][:6] for r in records if r["kind"] == "nccl"},
        "allreduce": {r["name"]: r["lines"] for r in records if r["kind"] == "allreduce"},
        "bench_against_vllm_bench": {},
        "restarts": {
            r["name"]: {"seconds": r["seconds"], "engine_lines": r["lines"]}
            for r in records
            if r["kind"] == "restart"
        },
        "cold_start_engine_lines": next((r["lines"] for r in records if r["kind"] == "cache_size"), []),
        "compile_cache_bytes": next((r["bytes"] for r in records if r["kind"] == "cache_size"), None),
        "metric_names": {
            r["label"]: r["names"] for r in records if r["kind"] == "metric_names" and r["names"]
        },
        "triton_engine": next((r for r in records if r["kind"] == "triton_engine"), None),
        "triton_keda_gauge": next(
            (keda_gauge(r, setup) for r in records if r["kind"] == "triton_gauge"), None
        ),
        "chat": {
            r["label"]: {
                "models": r["models"],
                "completion_text": (r["completion"].get("choices") or [{}])[0].get("text"),
                "completion_usage": r["completion"].get("usage"),
                "llmctl_chat_rc": r["llmctl_chat_rc"],
            }
            for r in records
            if r["kind"] == "chat"
        },
        "ray_view": {
            r["name"]: {k: r.get(k) for k in ("changes", "deploy_seconds", "placement_groups")}
            for r in records
            if r["kind"] == "ray_view"
        },
        "caches_seeded": {
            r["name"]: {"from": r["source"], "bytes": r["bytes"]}
            for r in records
            if r["kind"] == "cache_seeded"
        },
        "serving_path": serving_path(records, clients, PATHS),
        "serving_path_tensor_parallel": {
            tp: rows for tp, paths in TP_PATHS.items() if (rows := serving_path(records, clients, paths))
        },
    }
    # (record kind, its payload, the client's label prefix, the row builder, the keys it goes under)
    clients_of = {
        "llmctl_bench": ("summary", "llmctl-", llmctl_row, "llmctl_bench", "server_during_llmctl_bench"),
        "vllm_bench": (
            "result",
            "vllm-bench-",
            vllm_row,
            "vllm_bench_serve",
            "server_during_vllm_bench_serve",
        ),
    }
    for record in records:
        label = record.get("label", "")
        if record["kind"] not in clients_of or not label.startswith("vllm-c") or ROUND.search(label):
            continue  # a fast-path round's plain vLLM (vllm-c16-r2) is serving_path_fast's
        payload, prefix, row, key, server_key = clients_of[record["kind"]]
        if not record[payload]:
            continue
        level = label.split("-")[-1]
        entry = out["bench_against_vllm_bench"].setdefault(level, {})
        entry[key] = row(record[payload], clients.get(f"{prefix}{label}"))
        window = windows.get(f"{prefix}{level}")
        if window:
            entry[server_key] = server(window)
    if fast := serving_path_fast(records, clients, windows):
        out["serving_path_fast"] = fast
    # the four-GPU fast-path plan (device_plan.py): tp 2 and tp 4 on the fast path against plain vLLM
    # of the same tensor_parallel, and the two request routers
    if fast_tp := {
        tp: row
        for tp, paths in FAST_TP_PATHS.items()
        if (row := serving_path_fast(records, clients, windows, paths))
    }:
        out["serving_path_fast_tensor_parallel"] = fast_tp
    if routing := collect_route.request_routing(records, clients, llmctl_row):
        out["request_routing"] = routing
    if one_gpu := collect_route.request_routing_one_gpu(records, clients, llmctl_row):
        out[collect_route.ONE_GPU_KEY] = one_gpu
    if pipeline := collect_pp.pipeline_parallel(records, clients, llmctl_row):  # two Ray nodes, one host
        out["pipeline_parallel"] = pipeline
    return out


# the serving path's rows (the first is the baseline): plain vLLM, our Ray Serve app as rendered, the
# stream-batching variant; at tensor_parallel 2 and 4, plain vLLM and our app on the same GPUs' count
PATHS = {
    "vllm": "plain vllm serve",
    "ray1": "our Ray Serve LLM app (as rendered)",
    "ray1b": "our Ray Serve LLM app, stream batching 0 ms",
}
TP_PATHS = {
    "2": {"vllm2": "plain vllm serve, tensor_parallel 2", "ray2": "our Ray Serve LLM app, tensor_parallel 2"},
    "4": {"vllm4": "plain vllm serve, tensor_parallel 4", "ray4": "our Ray Serve LLM app, tensor_parallel 4"},
    "2-eager": {
        "vllm2e": "plain vllm serve, tensor_parallel 2, --enforce-eager",
        "ray2e": "our Ray Serve LLM app, tensor_parallel 2, enforce_eager",
    },
    "4-eager": {
        "vllm4e": "plain vllm serve, tensor_parallel 4, --enforce-eager",
        "ray4e": "our Ray Serve LLM app, tensor_parallel 4, enforce_eager",
    },
}


def serving_path(
    records: list[dict[str, Any]], clients: dict[str, Any], paths: dict[str, str]
) -> dict[str, Any]:
    """``llmctl bench`` at c1/c16/c64 on each path, and each other row against the baseline's (the
    first of ``paths``)."""
    baseline = paths[next(iter(paths))]
    rows: dict[str, dict[str, Any]] = {}
    for record in records:
        if record["kind"] != "llmctl_bench" or not record["summary"]:
            continue
        path, _, level = record["label"].rpartition("-")
        if path in paths and level in ("c1", "c16", "c64"):
            row = llmctl_row(record["summary"], clients.get(f"llmctl-{record['label']}"))
            rows.setdefault(level, {})[paths[path]] = row
    for level_rows in rows.values():
        base = level_rows.get(baseline)
        for name, row in level_rows.items():
            if base and name != baseline:
                row["ttft_p50_ms_over_plain"] = round(row["ttft_p50_ms"] - base["ttft_p50_ms"], 1)
                row["output_tok_s_vs_plain_pct"] = round(
                    100 * (row["output_tok_s"] / base["output_tok_s"] - 1), 1
                )
    return rows


def server(window: dict[str, Any]) -> dict[str, Any]:
    ttft = window["time_to_first_token_seconds"]
    return {
        "requests": ttft["n"],
        "ttft_p50_ms": ttft["p50_ms"],
        "ttft_p99_ms": ttft["p99_ms"],
        "ttft_mean_ms": ttft["mean_ms"],
        "generation_tokens": window["generation_tokens_total"],
        "window_s": window["seconds"],
    }


def keda_oracle() -> ModuleType:
    """tests/workload/keda_metrics_api.py (KEDA's metrics-api rules), found as the triton-gauge step
    finds it."""
    path = Path(__file__).resolve().parent / "triton_gauge.py"
    spec = importlib.util.spec_from_file_location("gpu_triton_gauge", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    oracle: ModuleType = module.keda()
    return oracle


def keda_reading(oracle: ModuleType, scrape: dict[str, Any], metric: str) -> float | str:
    """What KEDA makes of one scrape (its queue family's lines, kept raw): the value, or its error."""
    if "error" in scrape:
        return "no answer"
    try:
        value: float = oracle.value_from_prometheus("\n".join(scrape["lines"]), metric)
    except ValueError as error:
        return str(error)
    return value


def keda_gauge(record: dict[str, Any], setup: dict[str, Any]) -> dict[str, Any]:
    """The triton-gauge row: port 8003 read every 0.5 s as KEDA reads it (each scrape's queue family
    re-read here), its times counted from the burst's start (the stub's clock and the step's are one
    machine's)."""
    oracle, metric, stub = keda_oracle(), record["metric"], record["stub"]
    start = stub["burst_started_at"] - record["started"]
    done = stub["burst_done_at"] - record["started"]
    read = [(scrape, keda_reading(oracle, scrape, metric)) for scrape in record["scrapes"]]
    values = [(round(s["t"] - start, 2), v, s.get("running")) for s, v in read if isinstance(v, float)]
    failures: dict[str, int] = {}
    for _, value in read:
        if not isinstance(value, float):
            failures[value] = failures.get(value, 0) + 1
    peak = max(v for _, v, _ in values)
    peak_at = next(t for t, v, _ in values if v == peak)
    rise = next(t for t, v, _ in values if v > 0)
    zero = next(t for t, v, _ in values if t > peak_at and v == 0)
    after = [v for t, v, _ in values if t > done - start]
    return {
        "metric": metric,
        "read_as": "KEDA metrics-api, format prometheus, valueLocation the metric (the first matching series "
        "of its family), aggregationType sum over the Service's ready endpoints (one pod here)",
        "vllm": stub["vllm"],
        "device": setup["gpus"],
        "model_json": stub["model_json"],
        "engine_start_s": stub["engine_start_s"],
        "burst": {**stub["burst"], "seconds": round(done - start, 2)},
        "scrapes": len(read),
        "samples": len(values),
        "failed_reads": failures,
        "peak": peak,
        "peak_at_s": peak_at,
        "first_above_zero_s": rise,
        "back_to_zero_s": zero,
        "drain_s": round(zero - rise, 2),
        "burst_done_s": round(done - start, 2),
        "after_burst": {"samples": len(after), "max": max(after) if after else None},
        "series": [[t, v, running] for t, v, running in values if t >= -2],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--run",
        nargs=2,
        action="append",
        required=True,
        type=Path,
        metavar=("RESULTS", "NOTES"),
        help="a run's results.jsonl and its notes (JSON object: what a person read), in run order",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT,
        help=f"where to write (default {OUT.relative_to(REPO)}; a new run's figures can go beside it first)",
    )
    args = parser.parse_args(argv)
    runs = []
    for results, notes in args.run:
        records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        runs.append({**json.loads(notes.read_text()), "measured": collect(records)})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"runs": runs}, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out}")


# --- the fast path (issue 52): `device.py bench-f`, rounds alternating the servers at every level ---

ROUND = re.compile(r"-r[0-9]+$")
FAST_PATHS = {
    "ray1": "ours_fast",  # our app as rendered with serving.ray_fast_path (device.py --fast-path)
    "vllm": "plain",
    "ray1d": "ours_default",  # the same app restarted without the fast-path variables
}
# both eager (device.py --eager): ours on the fast path, plain vLLM on the same number of GPUs
FAST_TP_PATHS = {
    "2": {"ray2fe": "ours_fast", "vllm2fe": "plain"},
    "4": {"ray4fe": "ours_fast", "vllm4fe": "plain"},
}
# issue 52's goals, checked in every round against plain vLLM's load of the same round
GOALS = (
    ("c1", "ttft_p50_ms_over_plain", "c1 TTFT p50 within 5 ms of plain vLLM", 5.0, "ms"),
    ("c64", "ttft_p50_pct_over_plain", "c64 TTFT p50 within 10 % of plain vLLM", 10.0, "%"),
    ("c16", "output_tok_s_pct_below_plain", "c16 output tok/s within 5 % of plain vLLM (or above)", 5.0, "%"),
    ("c64", "output_tok_s_pct_below_plain", "c64 output tok/s within 5 % of plain vLLM (or above)", 5.0, "%"),
)


# Ray 2.58.0 exports a histogram's sum as bucket midpoints times bucket counts, not the observed values
# (ray/_private/telemetry/open_telemetry_metric_recorder.py, record_histogram_aggregated_batch: "the
# histogram sum value will be an approximation since we use bucket midpoints"): an engine mean read
# through Ray's metrics export is that estimate (vLLM 0.26's TTFT buckets around 100 ms are 0.08, 0.1,
# 0.25 s; its queue and prefill buckets start at 0.3 s, so those means read 150 ms whatever happened).
# The bucket counts are exact, so the p50 interpolated within them is the same estimate on both sides.
RAY_MEANS = (
    "bucket-midpoint estimate (Ray 2.58.0's metrics export sums a histogram at its buckets' midpoints); "
    "compare engines by the bucket-interpolated p50, read the same way on both sides"
)


def fast_row(
    summary: dict[str, Any], client: Any, window: dict[str, Any] | None, *, through_ray: bool = False
) -> dict[str, Any]:
    """One load's client figures, and the engine's own TTFT over the same window (vLLM's histogram:
    plain vLLM's /metrics, our app's engine through Ray's metrics export; the window holds the bench's
    8 warm-up requests too). The TTFT outside the engine is the client's p50 less the engine's
    (bucket-interpolated on both sides), and for plain vLLM also the client's mean less the engine's
    (an engine mean through Ray is a bucket-midpoint estimate, ``RAY_MEANS``: not subtracted)."""
    row = llmctl_row(summary, client)
    row["ttft_mean_ms"] = ms(summary["metrics"]["ttft_s"]["mean"])
    if window:
        engine = server(window)
        for key, name in (
            ("queue_mean_ms", "request_queue_time_seconds"),
            ("prefill_mean_ms", "request_prefill_time_seconds"),
        ):
            if name in window:  # read from the tp 2/4 plan on (device_bench.HISTOGRAMS)
                engine[key] = None if through_ray else window[name]["mean_ms"]
        if through_ray:
            engine["means"] = RAY_MEANS
        row["engine"] = engine
        if engine["ttft_p50_ms"] is not None and row["ttft_p50_ms"] is not None:
            row["ttft_p50_ms_outside_engine"] = round(row["ttft_p50_ms"] - engine["ttft_p50_ms"], 2)
        if not through_ray and engine["ttft_mean_ms"] is not None and row["ttft_mean_ms"] is not None:
            row["ttft_mean_ms_outside_engine"] = round(row["ttft_mean_ms"] - engine["ttft_mean_ms"], 2)
    return row


def against(row: dict[str, Any], plain: dict[str, Any]) -> dict[str, float]:
    return {
        "ttft_p50_ms_over_plain": round(row["ttft_p50_ms"] - plain["ttft_p50_ms"], 2),
        "ttft_p50_pct_over_plain": round(100 * (row["ttft_p50_ms"] / plain["ttft_p50_ms"] - 1), 1),
        "ttft_p99_ms_over_plain": round(row["ttft_p99_ms"] - plain["ttft_p99_ms"], 2),
        "tpot_mean_ms_over_plain": round(row["tpot_mean_ms"] - plain["tpot_mean_ms"], 2),
        "output_tok_s_vs_plain_pct": round(100 * (row["output_tok_s"] / plain["output_tok_s"] - 1), 1),
        "output_tok_s_pct_below_plain": round(100 * (1 - row["output_tok_s"] / plain["output_tok_s"]), 1),
    }


def serving_path_fast(
    records: list[dict[str, Any]],
    clients: dict[str, Any],
    windows: dict[str, Any],
    paths: dict[str, str] = FAST_PATHS,
) -> dict[str, Any]:
    """Per level, each round's loads (``<server>-c<level>-r<round>``), each of our paths against plain
    vLLM's load of the same round, and issue 52's goals checked in every round of the fast path. A
    label loaded twice keeps its last load (the earlier one is counted under ``superseded``)."""
    loads, superseded = collect_route.last_loads(
        records, lambda label: bool(ROUND.search(label)) and label.rsplit("-", 2)[0] in paths
    )
    if not loads:
        return {}
    levels: dict[str, Any] = {}
    for label, record in loads.items():
        server_name, level, round_ = label.rsplit("-", 2)
        row = fast_row(
            record["summary"],
            clients.get(f"llmctl-{label}"),
            windows.get(label),
            through_ray=paths[server_name] != "plain",
        )
        levels.setdefault(level, {"rounds": {}})["rounds"].setdefault(round_, {})[paths[server_name]] = row
    for entry in levels.values():
        for path in ("ours_fast", "ours_default"):
            pairs = {
                round_: against(loads_[path], loads_["plain"])
                for round_, loads_ in sorted(entry["rounds"].items())
                if path in loads_ and "plain" in loads_
            }
            if pairs:
                entry[f"{path}_vs_plain"] = pairs
    out: dict[str, Any] = {
        "paths": dict(paths),
        "levels": {level: levels[level] for level in ("c1", "c16", "c64") if level in levels},
        "failed": sum(
            row["failed"]
            for entry in levels.values()
            for paths in entry["rounds"].values()
            for row in paths.values()
        ),
        "goals": goals(levels),
        "fast_path_lines": {k: v for k, v in fast_path_lines(records).items() if k in paths},
        "open_files": {
            r["name"]: r.get("open_files") for r in records if r["kind"] == "ray_start" and r["name"] in paths
        },
    }
    if superseded:
        out["superseded"] = superseded
    return out


def goals(levels: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal in every round our fast path was loaded: met when every round meets it; else by how
    much the worst round missed."""
    checked = []
    for level, key, goal, limit, unit in GOALS:
        pairs = levels.get(level, {}).get("ours_fast_vs_plain", {})
        if not pairs:
            continue
        values = {round_: pair[key] for round_, pair in pairs.items()}
        worst = max(values.values())
        entry = {
            "goal": goal,
            "measure": key,
            "limit": limit,
            "unit": unit,
            "rounds": values,
            "met": worst <= limit,
            "missed_by": None if worst <= limit else round(worst - limit, 2),
        }
        worst_round = max(values, key=lambda r: values[r])
        if worst > limit and (where := where_time_goes(levels[level]["rounds"][worst_round])):
            entry["where_time_goes"] = {"round": worst_round, **where}
        checked.append(entry)
    return checked


def where_time_goes(paths: dict[str, Any]) -> dict[str, Any] | None:
    """A missed goal's worst round, ours against plain vLLM, over the same windows: the client's TTFT
    p50 and TPOT, the engine's TTFT p50 (bucket-interpolated the same way on both sides), what of the
    p50 is outside the engine, and plain vLLM's exact queue and prefill means (ours are bucket-midpoint
    estimates through Ray's export, ``RAY_MEANS``: left out). None where the windows lack the queue
    histogram (runs before it was read)."""
    parts: dict[str, Any] = {}
    for path in ("ours_fast", "plain"):
        row = paths.get(path)
        if not row or "engine" not in row or "queue_mean_ms" not in row["engine"]:
            return None
        engine = row["engine"]
        parts[path] = {
            "client_ttft_p50_ms": row["ttft_p50_ms"],
            "client_tpot_mean_ms": row["tpot_mean_ms"],
            "engine_ttft_p50_ms": engine["ttft_p50_ms"],
            "outside_engine_p50_ms": row.get("ttft_p50_ms_outside_engine"),
            "engine_queue_mean_ms": engine["queue_mean_ms"],
            "engine_prefill_mean_ms": engine["prefill_mean_ms"],
        }
    ours, plain = parts["ours_fast"], parts["plain"]
    parts["ours_over_plain_ms"] = {
        key: None if ours[key] is None or plain[key] is None else round(ours[key] - plain[key], 2)
        for key in ours
    }
    parts["engine_means"] = RAY_MEANS
    return parts


def fast_path_lines(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What the Ray clusters logged and ran (device.py fast_lines): the first record of each cluster
    (the later ones of the same name repeat it or read a newer session)."""
    found: dict[str, Any] = {}
    for record in records:
        if record["kind"] == "fast_lines" and record["name"] not in found:
            found[record["name"]] = {k: record[k] for k in ("lines", "serve_logs", "haproxy")}
    return found


if __name__ == "__main__":
    main()
