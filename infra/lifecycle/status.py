"""`llmctl status` as data: the stacks, the cluster and its Kubernetes add-ons, the endpoints."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from llmctl.errors import LlmctlError
from llmctl.state import list_endpoints

CLUSTER_KEYS = ("cluster_name", "region", "node_pools", "versions")


def kube_status(stack: str) -> dict[str, Any]:
    """NodePools, nodes, device plugins and schedulers, or ``{"error": ...}`` saying why not."""
    from llmctl.infra.lifecycle.kube import cluster_status, kubeconfig_path

    path = kubeconfig_path(stack)
    if not path.exists():
        return {"error": "no kubeconfig saved for this stack (run `llmctl up` first)"}
    try:
        return cluster_status(path)
    except LlmctlError as exc:
        return {"error": f"{exc.message} ({exc.hint})"}


def start_status(stack: str, blueprint: str) -> dict[str, Any]:
    """The start timeline of each current serving pod of ``blueprint`` (``{"pods": [...]}``), or
    ``{"error": ...}`` saying why not. The namespace and kubeconfig come from what `up` recorded."""
    from llmctl.infra.lifecycle.kube import kubeconfig_path
    from llmctl.infra.lifecycle.timeline import start_timelines
    from llmctl.state import load_endpoint

    try:
        extra = load_endpoint(stack, blueprint).extra
    except LlmctlError:
        extra = {}  # still starting (`up` records the endpoint once ready): the defaults `up` uses
    kube = Path(extra["kubeconfig"]) if extra.get("kubeconfig") else kubeconfig_path(stack)
    if not kube.exists():
        return {"blueprint": blueprint, "error": "no kubeconfig saved for this stack (run `llmctl up` first)"}
    namespace = extra.get("namespace") or blueprint
    try:
        timelines = start_timelines(kube, namespace)
    except LlmctlError as exc:
        return {"blueprint": blueprint, "error": f"{exc.message} ({exc.hint})"}
    return {"blueprint": blueprint, "namespace": namespace, "pods": [t.to_dict() for t in timelines]}


def collect_status(
    stack: str, target: str, engine: Any = None, blueprint: str | None = None
) -> dict[str, Any]:
    """Everything `llmctl status --json` prints; ``engine`` (an ``infra.engine.Engine``) is
    needed for the cluster targets only; with ``blueprint``, its pods' start timelines too."""
    data: dict[str, Any] = {"stack": stack, "target": target}
    if target == "local":
        from llmctl.serving.local import local_status

        data["local"] = local_status(stack=stack)
    else:
        from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, StackSpec
        from llmctl.infra.lifecycle.stacks import stack_rows

        data["stacks"] = [row for row in stack_rows(engine) if row["stack"] == stack]
        platform = engine.outputs(StackSpec(PLATFORM_PROJECT, stack)) or {}
        data["cluster"] = {k: platform.get(k) for k in CLUSTER_KEYS} if platform else None
        data["kubernetes"] = kube_status(stack) if platform else None
        if blueprint is not None:
            data["starts"] = start_status(stack, blueprint)
    data["endpoints"] = [asdict(e) for e in list_endpoints(stack)]
    return data


def port_forwards(endpoint: Any, port: int) -> list[tuple[str, str, int, int, str]]:
    """`llmctl connect`: (label, service, local port, remote port, local URL) for each service a
    deployed endpoint recorded (serving port, Ray dashboard, UI)."""
    extra = endpoint.extra
    remote = int(extra.get("port", "8000"))
    wanted = [
        ("endpoint", extra.get("service"), port, remote),
        ("dashboard", extra.get("dashboard_service"), 8265, 8265),
        ("UI", extra.get("ui_service"), 7860, int(extra.get("ui_port", "80"))),
    ]
    return [
        (
            label,
            service,
            local,
            target_port,
            endpoint.base_url.replace(f":{target_port}", f":{local}", 1)
            if label == "endpoint"
            else f"http://localhost:{local}",
        )
        for label, service, local, target_port in wanted
        if service
    ]
