"""gpu.json's ``pipeline_parallel`` row: the multi-node blueprint's app at pipeline_parallel 2 over two Ray
nodes on one host (benchmarks/gpu/device_pp.py), from the run's records.

The probe's outputs are read by the product's own reader (``llmctl.serving.fabric.report.parse``) and
NCCL's lines by the probe's own rule (``llmctl.serving.fabric.probe.transport_summary``), imported where
they are used, so this module imports with the standard library alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NAME = "raypp"  # device_pp.NAME
# said plainly, with the run: what two Ray nodes on one host are not
DIFFERS_FROM_EKS = (
    "One host, not two nodes: both Ray nodes are raylets on one machine (one H200 each), where the "
    "RayService puts each pipeline stage on its own p5.48xlarge worker pod; the activations between "
    "the stages never left the machine.",
    "No EFA: one host has no network between its GPUs to prove, and the device carries no aws-ofi-nccl "
    "plugin, so the rendered FI_PROVIDER=efa had nothing to load. The probe's `network` figure (NCCL's "
    "P2P and SHM turned off) is NCCL's Socket path over the host's own interface: what two nodes "
    "without EFA fall back to (TCP), not what EFA gives (3200 Gbps per p5.48xlarge); its verdict "
    "against the p5's EFA is a fallback, as it should be.",
    "The engine's stages talked as NCCL picks on one host (P2P over NVLink, or SHM: the transport "
    "lines say which), not over a network; between two p5.48xlarge the same send and receive go over "
    "EFA through aws-ofi-nccl.",
    "The tiny random Llama (2 layers: one per stage), not Llama 3.1 405B: tensor_parallel 1 instead of "
    "8 per stage, max_context 4096 instead of 32768, vLLM eager (no torch.compile, no CUDA graphs); "
    "the figures show the pipeline path working and what it costs a request, not what 405B serves.",
    "The head raylet holds a stage here; in the rendered RayService the head pod has no GPU "
    "(num-cpus 0) and the two worker pods hold the stages.",
    "The second raylet's Serve proxy and HAProxy ports are moved (RAY_SERVE_WORKER_PROXY_HTTP_PORT, "
    "the HAProxy stats and metrics ports), since two nodes here share one host's ports; each pod has "
    "its own.",
    "No Kubernetes: no KubeRay, no preflight Job, no EFA device requests or one-zone affinity; the probe "
    "ran as the preflight Job's command, two launchers standing for its two pods.",
)


def pipeline_parallel(
    records: list[dict[str, Any]],
    clients: dict[str, Any],
    llmctl_row: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> dict[str, Any] | None:
    """The row, or None for a run without ``start-pp``."""
    start = next((r for r in records if r["kind"] == "start_pp"), None)
    if start is None:
        return None
    view = next((r for r in records if r["kind"] == "ray_view" and r["name"] == NAME), None)
    bench = {
        record["label"].rpartition("-")[2]: llmctl_row(
            record["summary"], clients.get(f"llmctl-{record['label']}")
        )
        for record in records
        if record["kind"] == "llmctl_bench" and record["label"].startswith(f"{NAME}-c") and record["summary"]
    }
    chat = next((r for r in records if r["kind"] == "chat" and r["label"] == NAME), None)
    return {
        "blueprint": start["blueprint"],
        "layout": {
            k: start[k]
            for k in ("tensor_parallel", "pipeline_parallel", "max_context", "engine_extra", "gpus")
        },
        "fast_path": start["fast_path"],
        "started_at": start["t"],
        "ready_s": next((r["seconds"] for r in records if r["kind"] == "ready" and r["name"] == NAME), None),
        "not_ready": any(r["kind"] in ("not_ready", "died") and r["name"] == NAME for r in records),
        "changes": view.get("changes") if view else None,
        "placement": placement(view),
        "fabric_probe": {r["mode"]: probe_row(r) for r in records if r["kind"] == "pp_probe"},
        "chat": None
        if chat is None
        else {
            "completion_text": (chat["completion"].get("choices") or [{}])[0].get("text"),
            "completion_error": chat["completion"].get("error"),
            "llmctl_chat_rc": chat["llmctl_chat_rc"],
        },
        "bench": {level: bench[level] for level in ("c1", "c16") if level in bench},
        "failed": sum(row["failed"] for row in bench.values()),
        "nccl_transport": engine_transport(records),
        "differs_from_eks": list(DIFFERS_FROM_EKS),
    }


def placement(view: dict[str, Any] | None) -> dict[str, Any] | None:
    """The replica's placement group as Ray reported it (the one with GPU bundles), each bundle's node,
    and whether the bundles span two Ray nodes; Ray's nodes beside it."""
    if view is None:
        return None
    groups = [
        group
        for group in view.get("placement_groups") or []
        if any((bundle or {}).get("GPU") for bundle in (group.get("bundles") or {}).values())
    ]
    if not groups:
        return {"placement_group": None, "nodes": view.get("nodes"), "spans_nodes": 0}
    group = groups[-1]
    on = group.get("bundles_to_node_id") or {}
    return {
        "strategy": group.get("strategy"),
        "state": group.get("state"),
        "bundles": group.get("bundles"),
        "bundles_to_node_id": on,
        "spans_nodes": len(set(on.values())),
        "nodes": view.get("nodes"),
    }


def probe_row(record: dict[str, Any]) -> dict[str, Any]:
    """One probe mode: the bus bandwidth at the largest size, the transport NCCL reported, both
    launchers' exit codes, its environment."""
    from llmctl.serving.fabric.report import parse

    row: dict[str, Any] = {"env": record["env"], "rc": record["rc"], "seconds": record["seconds"]}
    try:
        result = parse(record["output"])
    except ValueError as error:  # no row: the probe failed; its output says why
        return {**row, "error": str(error), "output_tail": record["output"][-1500:]}
    largest = result.largest
    return {
        **row,
        "ranks": result.ranks,
        "largest_bytes": largest.size,
        "busbw_gbs": round(largest.busbw, 2),
        "avg_busbw_gbs": None if result.avg_busbw is None else round(result.avg_busbw, 2),
        "wrong": result.wrong,
        "transport": result.transport.get("kind"),
        "network": result.transport.get("network"),
        "channels": result.transport.get("channels"),
    }


def engine_transport(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """NCCL's transport lines from the cluster's logs (``pp_nccl``), by log file, and what they say
    carried the data (the probe's rule)."""
    from llmctl.serving.fabric.probe import transport_summary

    found = next((r for r in records if r["kind"] == "pp_nccl"), None)
    if found is None:
        return None
    lines = [line for file_lines in found["files"].values() for line in file_lines]
    return {"summary": transport_summary(lines), "files": found["files"]}
