"""The labels and ObjectMeta every object of a workload carries: shared by the builders and the
delivery's ConfigMap, below both."""

from __future__ import annotations

from typing import Any

from llmctl.infra.workload.config import WorkloadConfig

Obj = dict[str, Any]


def labels(config: WorkloadConfig, component: str) -> dict[str, str]:
    """Standard labels of every object of a workload."""
    return {
        "app.kubernetes.io/name": config.blueprint.name,
        "app.kubernetes.io/instance": config.blueprint.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "llmctl",
        "llmctl.dev/runtime": config.blueprint.runtime,
    }


def metadata(
    config: WorkloadConfig, name: str, component: str, annotations: dict[str, str] | None = None
) -> Obj:
    """ObjectMeta for a namespaced object of the workload."""
    meta: Obj = {"name": name, "namespace": config.ns, "labels": labels(config, component)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
