"""Karpenter's events and NodeClaims, built from data/karpenter/launch_signals.yaml the way Karpenter
builds them (the file names the source and commit of every piece)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

NS = "llama"


@functools.cache
def signals() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (Path(__file__).parent / "data" / "karpenter" / "launch_signals.yaml").read_text()
    )
    return data


def _truncate(text: str) -> str:
    """lifecycle/launch.go truncateMessage: the first 300 characters and '...' when longer."""
    limit = int(signals()["capacity_event"]["truncate_at"])
    return text if len(text) < limit else text[:limit] + "..."


def fleet_error(name: str, **values: str) -> str:
    entry = signals()["fleet_errors"][name]
    return str(signals()["capacity_event"]["fleet_error_format"]).format(
        code=entry["code"], text=str(entry["text"]).format(**values)
    )


def capacity_message(claim: str, *fleet: str) -> str:
    """InsufficientCapacityErrorEvent's message for a launch whose fleet errors are `fleet`."""
    shape = signals()["capacity_event"]
    error = str(shape["error_format"]).format(fleet_errors=str(shape["fleet_error_join"]).join(fleet))
    return str(shape["message_format"]).format(claim=claim, error=_truncate(error))


def event(
    name: str, kind: str, involved: str, reason: str, message: str, at: str, ns: str = NS
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns if kind == "Pod" else "default"},
        "involvedObject": {"kind": kind, "name": involved, **({"namespace": ns} if kind == "Pod" else {})},
        "reason": reason,
        "type": "Warning",
        "message": message,
        "source": {"component": "karpenter"},
        "lastTimestamp": at,
    }


def capacity_event(claim: str, *fleet: str, at: str = "2026-11-26T20:00:03Z") -> dict[str, Any]:
    """The event Karpenter publishes on a NodeClaim before deleting it (no NodeClaim is left)."""
    reason = str(signals()["capacity_event"]["reason"])
    return event(f"{claim}.1", "NodeClaim", claim, reason, capacity_message(claim, *fleet), at)


def pod_event(
    pod: str, sentence: str, requirements: str, resources: str, at: str = "2026-11-26T20:00:05Z", ns: str = NS
) -> dict[str, Any]:
    """PodFailedToScheduleEvent of one InstanceTypeFilterError sentence."""
    shape = signals()["pod_event"]
    error = str(shape["errors"][sentence]).format(requirements=requirements, resources=resources)
    return event(
        f"{pod}.1", "Pod", pod, str(shape["reason"]), str(shape["message_format"]).format(error=error), at, ns
    )


def launched_unknown(claim: str, condition: str, pool: str = "gpu-nvidia") -> dict[str, Any]:
    """A NodeClaim left with Launched=Unknown and the provider's reason (SetUnknownWithReason)."""
    shape = signals()["launched_unknown"]
    cond = shape["conditions"][condition]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": claim, "labels": {"karpenter.sh/nodepool": pool}},
        "status": {
            "conditions": [
                {
                    "type": "Launched",
                    "status": shape["status"],
                    "reason": cond["reason"],
                    "message": cond["message"],
                }
            ]
        },
    }


def pending(instance_type: str, memory: str, cpu: str, pool: str = "x", ns: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serve-0", "namespace": ns},
        "spec": {
            "nodeSelector": {
                "karpenter.sh/nodepool": pool,
                "node.kubernetes.io/instance-type": instance_type,
            },
            "containers": [{"name": "serve", "resources": {"requests": {"memory": memory, "cpu": cpu}}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}],
        },
    }


def requirements(pool: str, instance_type: str, capacity_type: str = "") -> str:
    """scheduling.Requirements' String() of a pod's nodeSelector on its pool."""
    parts = [f"karpenter.sh/nodepool In [{pool}]", f"node.kubernetes.io/instance-type In [{instance_type}]"]
    if capacity_type:
        parts.insert(0, f"karpenter.sh/capacity-type In [{capacity_type}]")
    return ", ".join(parts)
