"""`llmctl status` as data: the stacks, the environment's workloads and their pools, the cluster and
its Kubernetes add-ons, the endpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmctl.errors import BadInput, LlmctlError
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, StackSpec
from llmctl.infra.lifecycle.environment import Environment
from llmctl.infra.lifecycle.kube import cluster_status, kubeconfig_path
from llmctl.infra.lifecycle.ray_upgrade import read_upgrades
from llmctl.infra.lifecycle.replicas import workload_replicas
from llmctl.infra.lifecycle.stacks import stack_rows
from llmctl.infra.lifecycle.timeline import start_timelines
from llmctl.infra.names import check_workload, split_stack
from llmctl.state import load_endpoint

CLUSTER_KEYS = ("cluster_name", "region", "node_pools", "versions")
# kubectl's answer for a resource type the API server does not know (no RayService CRD installed)
NO_KUBERAY = "the server doesn't have a resource type"


def kube_status(stack: str) -> dict[str, Any]:
    """NodePools, nodes, device plugins and schedulers, or ``{"error": ...}`` saying why not."""

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


def only_workload(data: dict[str, Any], workload: str) -> dict[str, Any]:
    """`status --workload NAME`: the environment's status narrowed to one named workload (its stack,
    its row and its endpoints; the platform's cluster and add-ons stay, since it runs on them)."""
    check_workload(workload)
    if data.get("target") == "local":
        raise BadInput(
            "--workload does not apply to --target local",
            "named workloads are workload stacks on a cluster: use --target eks or kubeconfig",
        )
    narrowed = dict(data)
    narrowed["stacks"] = [
        row for row in data.get("stacks", []) if split_stack(row["stack"])[1] in (None, workload)
    ]
    narrowed["workloads"] = [row for row in data.get("workloads") or [] if row["workload"] == workload]
    narrowed["endpoints"] = [row for row in data["endpoints"] if row.get("workload") == workload]
    return narrowed


def cluster_sections(stack: str, engine: Any, blueprint: str | None = None) -> dict[str, Any]:
    """A cluster target's status: its stacks, the platform's cluster and its Kubernetes add-ons, and
    with ``blueprint`` the start timeline of its serving pods."""

    platform = engine.outputs(StackSpec(PLATFORM_PROJECT, stack)) or {}
    sections: dict[str, Any] = {
        "stacks": [row for row in stack_rows(engine) if split_stack(row["stack"])[0] == stack],
        "workloads": workload_rows(stack, engine),
        "cluster": {k: platform.get(k) for k in CLUSTER_KEYS} if platform else None,
        "kubernetes": kube_status(stack) if platform else None,
    }
    if blueprint is not None:
        sections["starts"] = start_status(stack, blueprint)
    kube = sections["kubernetes"]
    if kube and not kube.get("error"):
        for row in sections["workloads"]:
            row["replicas"] = replica_status(stack, row["namespace"])
            row["rayservices"] = rayservice_status(stack, row["namespace"])
    return sections


def rayservice_status(stack: str, namespace: str) -> list[dict[str, Any]] | dict[str, str]:
    """Each RayService of the namespace with its active and pending RayClusters, their pods, nodes
    and cost per hour (:mod:`.ray_upgrade`), or ``{"error": ...}`` saying why not."""
    try:
        return [found.to_dict() for found in read_upgrades(kubeconfig_path(stack), namespace)]
    except LlmctlError as exc:
        if NO_KUBERAY in exc.message:  # a cluster without KubeRay's CRDs has no RayService to show
            return []
        return {"error": f"{exc.message} ({exc.hint})"}


def replica_status(stack: str, namespace: str) -> list[dict[str, Any]] | dict[str, str]:
    """A workload's current and desired replicas and its signal (:mod:`.replicas`), or
    ``{"error": ...}`` saying why not."""
    try:
        return workload_replicas(kubeconfig_path(stack), namespace)
    except LlmctlError as exc:
        return {"error": f"{exc.message} ({exc.hint})"}


def workload_rows(stack: str, engine: Any) -> list[dict[str, Any]]:
    """Every workload of the environment: blueprint, workload name, its stack, namespace and pools."""

    return [
        {
            "blueprint": record.blueprint,
            "workload": record.workload,
            "stack": f"{record.project}/{record.stack(stack)}",
            "namespace": record.namespace,
            "pools": record.pools,
            "instance_types": record.instance_types,
        }
        for record in Environment(engine, stack).records()
    ]


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
