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
        "spec": {  # as the provisioner writes it (registration_signals.yaml, nodeclaim)
            "nodeClassRef": {**registration()["nodeclaim"]["node_class_ref"], "name": pool},
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]}],
        },
        "status": {
            "conditions": [
                {
                    "type": "Launched",
                    "status": shape["status"],
                    "lastTransitionTime": "2026-11-26T20:00:00Z",  # its creation: the status stays Unknown
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


# --- past Launched: data/karpenter/registration_signals.yaml (each piece with its file and lines) ---


@functools.cache
def registration() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (Path(__file__).parent / "data" / "karpenter" / "registration_signals.yaml").read_text()
    )
    return data


def condition(kind: str, state: str, at: str, **values: str) -> dict[str, Any]:
    """One condition as operatorpkg writes it: `kind` launched, registered, initialized,
    instance_terminating or ready; `state` a key of that kind's entry ('awaiting' for the first
    Unknown); `values` fill the message's Go %q verbs (quoted, as Go quotes them)."""
    shapes = registration()["conditions"]
    shape = shapes["awaiting"] if state == "awaiting" else shapes[kind][state]
    message = str(shape.get("message", "")).format(**{k: f'"{v}"' for k, v in values.items()})
    if state == "hook_pending":
        message = values["hooks"]
    return {
        "type": {"instance_terminating": "InstanceTerminating"}.get(kind, kind.capitalize()),
        "status": shape["status"],
        "lastTransitionTime": at,
        "reason": shape["reason"],
        "message": message,
        "observedGeneration": 1,
    }


def nodeclaim(
    name: str,
    *,
    created: str,
    launched: str | None = None,
    registered: str = "node_not_found",
    registered_at: str | None = None,
    initialized: str = "awaiting",
    initialized_at: str | None = None,
    deleting: str | None = None,
    terminating_at: str | None = None,
    instance_type: str = "inf2.48xlarge",
    zone: str = "us-west-2d",
    capacity_type: str = "on-demand",
    instance_id: str = "i-0a1b2c3d4e5f60718",
    **values: str,
) -> dict[str, Any]:
    """A NodeClaim of the NodePool its name starts with, as the provisioner creates it and the
    lifecycle controller moves it on: launched at `launched` (else Launched still awaiting), its
    Registered and Initialized states (first lastTransitionTime: the creation), being deleted from
    `deleting` (InstanceTerminating True from `terminating_at`)."""
    shape = registration()["nodeclaim"]
    pool = name.rsplit("-", 1)[0]
    labels = {"karpenter.sh/nodepool": pool}
    status: dict[str, Any] = {}
    conditions = []
    if launched is not None:  # the provider's labels and providerID arrive with Launched=True
        labels.update(
            {
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/zone": zone,
                "karpenter.sh/capacity-type": capacity_type,
            }
        )
        status["providerID"] = str(shape["provider_id_format"]).format(zone=zone, instance_id=instance_id)
    if registered == "true" and registered_at is None:
        raise ValueError("a Registered=True condition needs its time")
    conditions.append(condition("registered", registered, registered_at or created, **values))
    conditions.append(condition("initialized", initialized, initialized_at or created, **values))
    conditions.append(
        condition("launched", "true", launched) if launched else condition("launched", "awaiting", created)
    )
    if terminating_at is not None:
        conditions.append(condition("instance_terminating", "true", terminating_at))
    not_true = [c for c in conditions if c["type"] != "InstanceTerminating" and c["status"] != "True"]
    if not_true:
        latest_first = sorted(not_true, key=lambda c: c["lastTransitionTime"], reverse=True)
        ready = {
            **condition("ready", "reconciling", max(c["lastTransitionTime"] for c in conditions)),
            "message": ", ".join(f"{c['type']}={c['status']}" for c in latest_first),
        }
    else:
        ready = condition("ready", "true", max(c["lastTransitionTime"] for c in conditions))
    status["conditions"] = [*sorted(conditions, key=lambda c: c["lastTransitionTime"]), ready]
    if registered == "true":
        status["nodeName"] = f"ip-10-0-7-{sum(map(ord, name)) % 250}.us-west-2.compute.internal"
    metadata: dict[str, Any] = {
        "name": name,
        "creationTimestamp": created,
        "labels": labels,
        "finalizers": [shape["finalizer"]],
        "ownerReferences": [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "name": pool,
                "uid": "5e0c7d4a-2b1f-4c3e-9a8d-7f6e5d4c3b2a",
                "blockOwnerDeletion": True,
            }
        ],
    }
    if deleting is not None:
        metadata["deletionTimestamp"] = deleting
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": metadata,
        "spec": {
            "nodeClassRef": {**shape["node_class_ref"], "name": pool},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
            ],
        },
        "status": status,
    }


def gone(name: str) -> dict[str, Any]:
    """The stand-in kubectl's overlay for a NodeClaim the API server no longer has."""
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name, "deleted": True}}


def nominated(pod: str, claim: str, at: str, ns: str = NS) -> dict[str, Any]:
    """Karpenter's NominatePodEvent (provisioning/scheduling/events.go at 6e7eab7a): the pod should
    schedule on the NodeClaim (repeats keep firstTimestamp: the event is aggregated)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{claim}", "namespace": ns},
        "involvedObject": {"kind": "Pod", "name": pod, "namespace": ns},
        "reason": "Nominated",
        "type": "Normal",
        "message": f"Pod should schedule on: nodeclaim/{claim}",
        "source": {"component": "karpenter"},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }


def finalized(claim: str, at: str) -> dict[str, Any]:
    """operatorpkg's event once the termination finalizer is gone (registration_signals.yaml)."""
    shape = registration()["liveness"]["finalized_event"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{claim}.finalized", "namespace": "default"},
        "involvedObject": {"kind": "NodeClaim", "name": claim},
        "reason": shape["reason"],
        "type": shape["type"],
        "message": str(shape["format"]).replace("%s", registration()["nodeclaim"]["finalizer"]),
        "source": {"component": "karpenter"},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": 1,
    }
