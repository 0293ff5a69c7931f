"""gpu.json's ``request_routing`` row (collect.py calls it): the two routing clusters of the four-GPU
fast-path plan (device_plan.py ``start-route`` / ``bench-route``), the default request router against
the prefix-aware one, from their ``llmctl bench`` loads and the engines' windows through Ray's
metrics export (``route_window``: histograms and vLLM's counters per replica's engine); and the same
row for one H200 (device_route1.py: two replicas sharing it, one router after the other), under
``ONE_GPU_KEY``.

Per workload (``prefix``: shared system prompts; ``turns``: multi-turn conversations), level and round:
TTFT p50/p90, output tok/s, the prefix cache hit rate (hit tokens over queried tokens, vLLM's own
counters over the load's window, its warm-up requests included) and how the finished requests split
over the engines (one series label set per replica). The goal: the cache-aware router's TTFT p90
lower than the default one's on the shared-prefix workload, in every level and round; the
multi-turn loads are reported beside it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

LABEL = re.compile(r"^(?P<cluster>rayrd|rayrp)-(?P<workload>[a-z]+)-(?P<level>c[0-9]+)-(?P<round>r[0-9]+)$")
# one H200 (device_route1.py): one cluster at a time, its name saying its router
LABEL_ONE_GPU = re.compile(
    r"^(?P<cluster>rayr1d|rayr1p)-(?P<workload>[a-z]+)-(?P<level>c[0-9]+)-(?P<round>r[0-9]+)$"
)
ONE_GPU_KEY = "request_routing_one_h200_two_replicas_sharing_it_8b_shape_dummy_weights"
ONE_GPU_SETUP = ("replicas", "tensor_parallel", "gpu_fraction", "model", "shape", "kv_cache_bytes", "util")
GOAL = "cache-aware TTFT p90 lower than the default router's on the shared-prefix workload"
GOAL_WORKLOAD = (
    "prefix"  # issue 52: "... a lower TTFT p90 than the default router on the shared-prefix workload"
)


def ms(value: float | None) -> float | None:
    return None if value is None else round(1000 * value, 2)


def split(window: dict[str, Any]) -> dict[str, Any]:
    """The window's hit rate and the requests each engine finished (label sets that differ only in
    labels every set shares are shown by the labels that tell them apart)."""
    counters = window.get("series", {})
    queries = sum(counters.get("ray_vllm_prefix_cache_queries_total", {}).values())
    hits = sum(counters.get("ray_vllm_prefix_cache_hits_total", {}).values())
    finished = {k: v for k, v in counters.get("ray_vllm_request_success_total", {}).items() if v}
    parsed = {key: dict(pair.split("=", 1) for pair in key.split(",") if "=" in pair) for key in finished}
    differ = sorted(
        {
            label
            for labels in parsed.values()
            for label in labels
            if len({p.get(label) for p in parsed.values()}) > 1
        }
    )
    by_engine = {
        ",".join(f"{label}={parsed[key].get(label)}" for label in differ) or "all": value
        for key, value in finished.items()
    }
    return {
        "hit_rate": round(hits / queries, 4) if queries else None,
        "queried_tokens": queries,
        "hit_tokens": hits,
        "requests_by_engine": by_engine,
    }


def engine(window: dict[str, Any]) -> dict[str, Any]:
    """The engines' own TTFT over the window through Ray's metrics export: the p50 interpolated within
    the exact bucket counts, and the mean, which Ray 2.58.0 exports as a bucket-midpoint estimate
    (collect.RAY_MEANS: vLLM's queue and prefill buckets start at 0.3 s, so their means are left out)."""
    return {
        "requests": window["time_to_first_token_seconds"]["n"],
        "ttft_mean_ms": window["time_to_first_token_seconds"]["mean_ms"],
        "ttft_p50_ms": window["time_to_first_token_seconds"]["p50_ms"],
        "means": "bucket-midpoint estimate (Ray 2.58.0's metrics export)",
    }


def last_loads(
    records: list[dict[str, Any]], keep: Callable[[str], bool]
) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """The ``llmctl bench`` loads whose label ``keep`` accepts, the last of each label, and how many
    earlier loads of a label the last one superseded (a call that re-ran a level)."""
    loads: dict[str, dict[str, Any]] = {}
    superseded: dict[str, int] = {}
    for record in records:
        label = record.get("label", "")
        if record["kind"] != "llmctl_bench" or not record["summary"] or not keep(label):
            continue
        if label in loads:
            superseded[label] = superseded.get(label, 0) + 1
        loads[label] = record
    return loads, superseded


def request_routing(
    records: list[dict[str, Any]],
    clients: dict[str, Any],
    llmctl_row: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> dict[str, Any]:
    """The routing row of the four-GPU plan (two clusters side by side), or {} for a run without its
    loads."""
    started = next((r for r in records if r["kind"] == "start_route"), None)
    routers: dict[str, str] = started["routers"] if started else {"rayrd": "default", "rayrp": "prefix_aware"}
    return routing(records, clients, llmctl_row, LABEL, routers)


def request_routing_one_gpu(
    records: list[dict[str, Any]],
    clients: dict[str, Any],
    llmctl_row: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> dict[str, Any]:
    """The same row for one H200 (device_route1.py, ``ONE_GPU_KEY``): two replicas sharing the GPU,
    the 8B shape with dummy weights, the default router's cluster (``rayr1d``) and the prefix-aware
    one's (``rayr1p``) started and loaded one after the other; each ``start_route1`` names its
    cluster's router. {} for a run without its loads."""
    starts = [r for r in records if r["kind"] == "start_route1"]
    routers = {"rayr1d": "default", "rayr1p": "prefix_aware"} | {r["servers"][0]: r["router"] for r in starts}
    out = routing(records, clients, llmctl_row, LABEL_ONE_GPU, routers)
    if out and starts:
        out["setup"] = {"gpus": 1, "routers_measured": "one after the other, on the same GPU"} | {
            key: starts[-1].get(key) for key in ONE_GPU_SETUP
        }
    return out


def routing(
    records: list[dict[str, Any]],
    clients: dict[str, Any],
    llmctl_row: Callable[[dict[str, Any], Any], dict[str, Any]],
    pattern: re.Pattern[str],
    routers: dict[str, str],
) -> dict[str, Any]:
    """The loads whose labels ``pattern`` matches, per workload, level and round, the second cluster's
    router (``routers``: cluster to router, the default one's first) against the first's. A label
    loaded twice keeps its last load (the earlier one counted under ``superseded``)."""
    windows = {r["label"]: r for r in records if r["kind"] == "route_window"}
    loads, superseded = last_loads(records, lambda label: bool(pattern.match(label)))
    if not loads:
        return {}
    workloads: dict[str, Any] = {}
    for label, record in loads.items():
        found = pattern.match(label)
        assert found
        summary = record["summary"]
        row = llmctl_row(summary, clients.get(f"llmctl-{label}"))
        row["ttft_p90_ms"] = ms(summary["metrics"]["ttft_s"].get("p90"))
        row["ttft_mean_ms"] = ms(summary["metrics"]["ttft_s"].get("mean"))
        if window := windows.get(label):
            row.update(split(window))
            row["engine"] = engine(window)
        level = workloads.setdefault(found["workload"], {}).setdefault(found["level"], {"rounds": {}})
        level["rounds"].setdefault(found["round"], {})[routers[found["cluster"]]] = row
    default, aware = routers.values()
    checked: dict[str, Any] = {}
    for workload, levels in workloads.items():
        for level, entry in levels.items():
            entry["aware_vs_default"] = {
                round_: compare(rows[aware], rows[default])
                for round_, rows in sorted(entry["rounds"].items())
                if aware in rows and default in rows
            }
            if entry["aware_vs_default"]:
                checked[f"{workload}-{level}"] = {
                    r: pair["ttft_p90_ms_vs_default"] for r, pair in entry["aware_vs_default"].items()
                }
    out: dict[str, Any] = {
        "routers": routers,
        "workloads": {
            name: {level: levels[level] for level in sorted(levels, key=lambda lv: int(lv[1:]))}
            for name, levels in sorted(workloads.items())
        },
        "failed": sum(
            row["failed"]
            for levels in workloads.values()
            for entry in levels.values()
            for rows in entry["rounds"].values()
            for row in rows.values()
        ),
        "goal": goal(checked, workloads, (default, aware)),
    }
    if superseded:
        out["superseded"] = superseded
    return out


def compare(aware: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    """The prefix-aware router's load against the default one's of the same round (ms, points, %)."""
    rate = (aware.get("hit_rate"), default.get("hit_rate"))
    return {
        "ttft_p50_ms_vs_default": round(aware["ttft_p50_ms"] - default["ttft_p50_ms"], 2),
        "ttft_p90_ms_vs_default": round(aware["ttft_p90_ms"] - default["ttft_p90_ms"], 2),
        "output_tok_s_vs_default_pct": round(100 * (aware["output_tok_s"] / default["output_tok_s"] - 1), 1),
        "hit_rate_points_vs_default": None if None in rate else round(100 * (rate[0] - rate[1]), 2),  # type: ignore[operator]
    }


def goal(
    checked: dict[str, dict[str, float]], workloads: dict[str, Any], routers: tuple[str, str]
) -> dict[str, Any]:
    """Issue 52's goal is on the shared-prefix workload: met when every ``prefix`` level and round has
    the cache-aware p90 below the default's; else by how many ms the worst one was not (its p90 minus
    the default's, 0 counted as a miss), and where that load's time went by the engines' histograms.
    The other workloads (``turns``) are reported beside it (``other_loads``, and where the worst of
    them went when the cache-aware router lost there), not counted in the goal."""
    scored = {load: rounds for load, rounds in checked.items() if load.startswith(GOAL_WORKLOAD + "-")}
    others = {load: rounds for load, rounds in checked.items() if load not in scored}
    values = [value for rounds in scored.values() for value in rounds.values()]
    worst = max(values) if values else None
    met = worst is not None and worst < 0
    out: dict[str, Any] = {
        "goal": GOAL,
        "measure": "ttft_p90_ms_vs_default",
        "unit": "ms",
        "by_load": scored,
        "met": met,
        "missed_by": None if met or worst is None else round(worst, 2),
        "other_loads": others,
    }
    if not met and worst is not None:
        out["where_time_goes"] = _where_worst(scored, worst, workloads, routers)
    other_values = [value for rounds in others.values() for value in rounds.values()]
    if other_values and max(other_values) >= 0:
        out["other_loads_where_time_goes"] = _where_worst(others, max(other_values), workloads, routers)
    return out


def _where_worst(
    loads: dict[str, dict[str, float]], worst: float, workloads: dict[str, Any], routers: tuple[str, str]
) -> dict[str, Any]:
    load, round_ = next((k, r) for k, rounds in loads.items() for r, v in rounds.items() if v == worst)
    workload, level = load.rsplit("-", 1)
    rows = workloads[workload][level]["rounds"][round_]
    return {"load": load, "round": round_} | {
        router: where(rows[router])
        | {"requests_by_engine": sorted(rows[router].get("requests_by_engine", {}).values())}
        for router in routers
    }


def where(row: dict[str, Any]) -> dict[str, Any]:
    """One load's client TTFT against its engines' (p50, bucket-interpolated on the engine side; both
    routers' engines are read through Ray's export the same way), what of it is outside the engines,
    and the hit rate."""
    engine_row = row.get("engine", {})
    client, inside = row.get("ttft_p50_ms"), engine_row.get("ttft_p50_ms")
    return {
        "client_ttft_p50_ms": client,
        "client_ttft_p90_ms": row.get("ttft_p90_ms"),
        "engine_ttft_p50_ms": inside,
        "outside_engine_p50_ms": None if client is None or inside is None else round(client - inside, 2),
        "hit_rate": row.get("hit_rate"),
    }
