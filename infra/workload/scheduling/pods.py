"""The pods a workload's manifests would create: every pod template of a manifest, what one such pod
requests (the sum of its containers, at least its largest init container) and how many fit the node
it selects. Pure reading of the objects, shared by the schedulability check, the platform parts
check and the day-two rules (infra/workload/scheduling/rollout.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.hardware import HardwareCatalog, hardware
from llmctl.errors import CatalogError
from llmctl.infra.workload.scheduling.capacity import (
    CHECKED_RESOURCES,
    NEURON_CORE,
    NEURON_DEVICE,
    NVIDIA_GPU,
    allocatable,
    parse_quantity,
)

Obj = dict[str, Any]


@dataclass(frozen=True)
class PodTemplate:
    """A pod spec found in a manifest, with where it came from and extra per-pod requests."""

    kind: str
    name: str
    where: str
    spec: Obj
    extra: tuple[tuple[str, float], ...] = ()


def pod_templates(manifest: Obj) -> Iterator[PodTemplate]:
    """Every pod template of a manifest."""
    kind, name = manifest.get("kind", ""), manifest.get("metadata", {}).get("name", "")
    spec: Obj = manifest.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        yield PodTemplate(kind, name, "pod", spec["template"]["spec"])
    elif kind in ("RayService", "RayCluster"):
        cluster: Obj = spec.get("rayClusterConfig", spec) if kind == "RayService" else spec
        extra: tuple[tuple[str, float], ...] = ()
        if cluster.get("enableInTreeAutoscaling"):
            sidecar = (cluster.get("autoscalerOptions") or {}).get("resources") or {}
            extra = tuple(container_requests({"resources": sidecar}).items())
        yield PodTemplate(kind, name, "head group", cluster["headGroupSpec"]["template"]["spec"], extra)
        for group in cluster.get("workerGroupSpecs", []):
            yield PodTemplate(kind, name, f"worker group {group.get('groupName')}", group["template"]["spec"])


def container_requests(container: Obj) -> dict[str, float]:
    """A container's requests of the checked resources (a limit stands in for a missing request)."""
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    result = {}
    for resource in CHECKED_RESOURCES:
        value = requests.get(resource, limits.get(resource))
        if value is not None:
            result[resource] = parse_quantity(value)
    return result


def pod_requests(template: PodTemplate) -> dict[str, float]:
    """Effective pod requests: sum of containers (plus extras), at least the largest init container."""
    total: dict[str, float] = {}
    for container in template.spec.get("containers", []):
        for resource, amount in container_requests(container).items():
            total[resource] = total.get(resource, 0.0) + amount
    for resource, amount in template.extra:
        total[resource] = total.get(resource, 0.0) + amount
    for container in template.spec.get("initContainers", []):
        for resource, amount in container_requests(container).items():
            total[resource] = max(total.get(resource, 0.0), amount)
    return total


INSTANCE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class NodeShape:
    """The node a serving pod lands on: its instance type, how many such pods fit one, its price."""

    instance_type: str
    pods_per_node: int
    usd_per_hour: float

    def nodes(self, pods: int) -> int:
        """Nodes for `pods` more pods."""
        return math.ceil(pods / self.pods_per_node) if pods > 0 else 0


def node_shape(spec: Obj, catalog: HardwareCatalog | None = None) -> NodeShape | None:
    """The node of a pod spec that names its instance type (the serving pods do; a UI pod on the
    shared default pool does not: None). Pods per node by the pod's accelerator requests (or CPU on a
    CPU node) against one node's allocatable (:mod:`llmctl.infra.workload.scheduling.capacity`)."""
    name = (spec.get("nodeSelector") or {}).get(INSTANCE_LABEL)
    if not name:
        return None
    catalog = catalog or hardware()
    try:
        instance = catalog.instance(str(name))
    except CatalogError:
        return None
    room = allocatable(instance)
    asks = pod_requests(PodTemplate("", "", "", spec))
    fits = [
        int(room.of(resource) // asks[resource])
        for resource in (NEURON_DEVICE, NEURON_CORE, NVIDIA_GPU)
        if asks.get(resource)
    ]
    if not fits and asks.get("cpu"):  # a CPU node: by its vCPUs
        fits = [int(room.cpu // asks["cpu"])]
    return NodeShape(instance.name, max(1, min(fits or [1])), instance.on_demand_usd)
