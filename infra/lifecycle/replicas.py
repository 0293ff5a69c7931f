"""Current and desired replicas of a workload on a cluster, and its autoscaling signal where
Kubernetes knows it: `llmctl status` reads them with kubectl, and `llmctl bench` samples them
during its run for a blueprint deployed on a cluster (:func:`bench_source`).

- Ray runtimes: each RayCluster's worker group counts (`status.availableWorkerReplicas` and
  `desiredWorkerReplicas`, KubeRay 1.7's `ray.io_rayclusters` CRD). Their signal, Ray Serve's
  ongoing requests, lives in Serve, not in Kubernetes, so it is not shown here.
- Deployment runtimes: the serving Deployment's ready and wanted pods, and its autoscaler's
  (KEDA's `keda-hpa-<name>` HPA or llmctl's CPU HPA) desired count and current metric value.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from llmctl.infra.lifecycle.kube import kubeconfig_path, kubectl_json
from llmctl.infra.workload.builders.efa import NODES_PER_REPLICA
from llmctl.serving.client.bench.replicas import ReplicaSource, endpoint_source
from llmctl.state import load_endpoint

SERVING = "app.kubernetes.io/component=serving"


def _metric_value(hpa: dict[str, Any]) -> str | None:
    """The HPA's current metric as text: an external average (KEDA) or a CPU utilisation."""
    for metric in (hpa.get("status") or {}).get("currentMetrics") or []:
        external = (metric.get("external") or {}).get("current") or {}
        if external.get("averageValue") is not None:
            return f"{external['averageValue']} per pod"
        if external.get("value") is not None:
            return str(external["value"])
        resource = (metric.get("resource") or {}).get("current") or {}
        if resource.get("averageUtilization") is not None:
            return f"{resource['averageUtilization']}% cpu"
    return None


def _autoscalers(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """HPAs by the Deployment they scale."""
    return {
        (hpa.get("spec") or {}).get("scaleTargetRef", {}).get("name", ""): hpa
        for hpa in items
        if (hpa.get("spec") or {}).get("scaleTargetRef", {}).get("kind") == "Deployment"
    }


def workload_replicas(kubeconfig: Path | str | None, namespace: str) -> list[dict[str, Any]]:
    """One row per scaled object of the namespace: kind, name, current, desired, signal (None when
    unknown); empty when the namespace has none."""
    rows: list[dict[str, Any]] = []
    for cluster in kubectl_json(kubeconfig, "get", "rayclusters", "-n", namespace, "-o", "json")["items"]:
        status = cluster.get("status") or {}
        # a replica over several nodes is that many worker pods; it counts once all of them are there
        span = int(((cluster["metadata"].get("annotations") or {}).get(NODES_PER_REPLICA)) or 1)
        rows.append(
            {
                "kind": "RayCluster",
                "name": cluster["metadata"]["name"],
                "current": int(status.get("availableWorkerReplicas") or 0) // span,
                "desired": int(status.get("desiredWorkerReplicas") or 0) // span,
                "signal": None,
            }
        )
    hpas = _autoscalers(kubectl_json(kubeconfig, "get", "hpa", "-n", namespace, "-o", "json")["items"])
    deployments = kubectl_json(kubeconfig, "get", "deployments", "-n", namespace, "-l", SERVING, "-o", "json")
    for deployment in deployments["items"]:
        name = deployment["metadata"]["name"]
        hpa = hpas.get(name)
        hpa_status = (hpa or {}).get("status") or {}
        rows.append(
            {
                "kind": "Deployment",
                "name": name,
                "current": int((deployment.get("status") or {}).get("readyReplicas") or 0),
                "desired": int(
                    hpa_status.get("desiredReplicas", (deployment.get("spec") or {}).get("replicas", 0)) or 0
                ),
                "signal": _metric_value(hpa) if hpa else None,
            }
        )
    return rows


def cluster_replicas(kubeconfig: Path | str | None, namespace: str) -> dict[str, Any] | None:
    """The namespace's replicas as one reading for `llmctl bench`: running and desired summed over
    its scaled objects (the rows `status` shows), the first signal Kubernetes reports; None when the
    namespace has nothing scaled."""
    rows = workload_replicas(kubeconfig, namespace)
    if not rows:
        return None
    return {
        "running": sum(row["current"] for row in rows),
        "desired": sum(row["desired"] for row in rows),
        "signal": next((row["signal"] for row in rows if row["signal"] is not None), None),
    }


def bench_source(stack: str, blueprint: str | None, workload: str | None) -> ReplicaSource | None:
    """What `llmctl bench --blueprint` samples: the local runner's replicas on the local target, the
    cluster's (through kubectl, with the kubeconfig and namespace `up` recorded) on eks and
    kubeconfig; None for a plain `--endpoint`."""
    local = endpoint_source(stack, blueprint, workload)
    if local is not None or not blueprint:
        return local
    extra = load_endpoint(stack, blueprint, workload).extra
    kube = extra.get("kubeconfig") or kubeconfig_path(stack)
    return functools.partial(cluster_replicas, kube, extra.get("namespace") or blueprint)
