"""gpu.json's ``pipeline_parallel`` row: the multi-node blueprint's app at pipeline_parallel 2 over two Ray
nodes on one host (benchmarks/gpu/device_pp.py), from the run's records.

The probe's outputs are read by the product's own reader (``llmctl.serving.fabric.report.parse``) and
NCCL's lines by the probe's own rule (``llmctl.serving.fabric.probe.transport_summary``), imported where
they are used, so this module imports with the standard library alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NAME, NAME_NET = "raypp", "rayppn"  # device_pp's: as NCCL picks, and with NCCL's P2P and SHM off
NAME_SHARED = "raypp1"  # device_pp's start-pp1: both Ray nodes given GPU 0 of a one-GPU machine
# said plainly, with a raypp1 run, in place of the first three lines below (by index)
SHARED_GPU = {
    0: "One host and ONE GPU, not two nodes of their own GPUs: both Ray nodes are raylets on one machine, "
    "each given the same H200 (the one-GPU kind was all that was lent), so the two pipeline stages are "
    "two processes on one device sharing its compute and memory (a fixed 4 GiB KV cache each, "
    "gpu_memory_utilization 0.3): the figures are not what two GPUs give. NCCL 2.30.7 was loaded for "
    "it (LD_PRELOAD, NCCL_MULTI_RANK_GPU_ENABLE=1; 2.28.9, the machine torch's and the ray-llm image's, "
    "refuses two ranks on one GPU); `nccl_versions` says what the stages loaded. On EKS each stage is "
    "its own p5.48xlarge worker pod and the activations go between nodes.",
    1: "No EFA and no network path: the device carries no aws-ofi-nccl plugin, so the rendered "
    "FI_PROVIDER=efa had nothing to load, and with both ranks on one GPU NCCL keeps P2P even with "
    "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 (src/graph/paths.cc ncclTopoCheckP2p: the switch lowers "
    "the P2P level to PATH_LOC, and a path from a GPU to itself is PATH_LOC), so the probe's `network` "
    "mode measured the same P2P copy as `nccl-picks` (its transport lines say P2P), not Socket; both "
    "figures are one GPU's copy within its own memory, not a fabric.",
    2: "The engine's stages sent and received through NCCL's P2P transport within one GPU (P2P/CUMEM, "
    "the transport lines), not over NVLink or a network; between two p5.48xlarge the same send and "
    "receive go over EFA through aws-ofi-nccl.",
}
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
    "EFA through aws-ofi-nccl. `engine_over_network`, where run, is the same app with NCCL's P2P and "
    "SHM off: its stages over Socket (TCP on one host's interface), the path without EFA.",
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
    """The row, or None for a run without ``start-pp``: the app as NCCL picks between the two nodes,
    and under ``engine_over_network`` its start with NCCL's P2P and SHM off (``start-pp-net``)."""
    starts = {r["servers"][0]: r for r in records if r["kind"] == "start_pp"}
    if not starts:
        return None
    first = next(iter(starts.values()))
    row: dict[str, Any] = {
        "blueprint": first["blueprint"],
        "layout": {
            k: first[k] for k in ("tensor_parallel", "pipeline_parallel", "max_context", "engine_extra")
        },
        "fast_path": first["fast_path"],
        "fabric_probe": {r["mode"]: probe_row(r) for r in records if r["kind"] == "pp_probe"},
    }
    main = NAME if NAME in starts else NAME_SHARED if NAME_SHARED in starts else None
    if main:
        row.update(engine(records, starts[main], clients, llmctl_row))
    if NAME_NET in starts:
        row["engine_over_network"] = engine(records, starts[NAME_NET], clients, llmctl_row)
    differs = list(DIFFERS_FROM_EKS)
    if main == NAME_SHARED:
        differs = [SHARED_GPU.get(index, line) for index, line in enumerate(differs)]
    row["differs_from_eks"] = differs
    return row


def engine(
    records: list[dict[str, Any]],
    start: dict[str, Any],
    clients: dict[str, Any],
    llmctl_row: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> dict[str, Any]:
    """One start of the app: when, its GPUs and NCCL settings, when it was ready, Ray's placement,
    the chat, c1 and c16, and NCCL's transport lines between its stages."""
    name = start["servers"][0]
    view = next((r for r in records if r["kind"] == "ray_view" and r["name"] == name), None)
    bench = {
        r["label"].rpartition("-")[2]: llmctl_row(r["summary"], clients.get(f"llmctl-{r['label']}"))
        for r in records
        if r["kind"] == "llmctl_bench" and r["label"].startswith(f"{name}-c") and r["summary"]
    }
    chat = next((r for r in records if r["kind"] == "chat" and r["label"] == name), None)
    ready = next((r["seconds"] for r in records if r["kind"] == "ready" and r["name"] == name), None)
    cut = [r for r in records if r["kind"] == "not_ready" and r["name"] == name]
    return {
        "server": name,
        "started_at": start["t"],
        "gpus": start["gpus"],
        "gpu_memory_utilization": start.get("gpu_memory_utilization"),
        "nccl_env": start.get("nccl_env"),
        "ready_s": ready,
        # never ready (a wait cut at its limit and none after it saw it ready), or its driver died
        "not_ready": (ready is None and bool(cut))
        or any(r["kind"] == "died" and r["name"] == name for r in records),
        "waits_cut_s": [r["waited"] for r in cut],  # waits that ended at their limit before the ready
        "changes": view.get("changes") if view else None,
        "placement": placement(view),
        "chat": None
        if chat is None
        else {
            "completion_text": (chat["completion"].get("choices") or [{}])[0].get("text"),
            "completion_error": chat["completion"].get("error"),
            "llmctl_chat_rc": chat["llmctl_chat_rc"],
        },
        "bench": {level: bench[level] for level in ("c1", "c16") if level in bench},
        "failed": sum(level["failed"] for level in bench.values()),
        "nccl_transport": engine_transport(records, name),
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
    created = [group for group in groups if group.get("state") == "CREATED"]  # a replica restarted: its own
    group = (created or groups)[-1]
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


def engine_transport(records: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """NCCL's transport lines from the cluster's logs (``pp_nccl``), by log file, and what they say
    carried the data (the probe's rule)."""
    from llmctl.serving.fabric.probe import transport_summary

    found = next((r for r in records if r["kind"] == "pp_nccl" and r["name"] == name), None)
    if found is None:
        return None
    lines = [line for file_lines in found["files"].values() for line in file_lines]
    return {
        "summary": transport_summary(lines),
        "nccl_versions": found.get("nccl_versions"),
        "files": found["files"],
    }
