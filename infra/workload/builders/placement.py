"""Where serving pods run and what they request: pools from the platform's facts, nodeSelectors and
tolerations, accelerator and CPU/memory requests sized to one node, and the Neuron scheduler/env.

Pure: returns plain dicts shaped like the Kubernetes API (camelCase keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.hardware import HardwareCatalog, Instance, hardware
from llmctl.blueprints.models import lookup_model
from llmctl.blueprints.pools import (
    CAPACITY_TYPE_LABEL,
    HEAD_POOL,
    INSTANCE_TYPE_LABEL,
    NEURON_SCHEDULER,
    POOL_LABEL,
    pool_for_blueprint,
)
from llmctl.blueprints.pools import pool as pool_spec
from llmctl.blueprints.sizing import host_memory
from llmctl.errors import CatalogError, LlmctlError
from llmctl.infra.workload.builders.efa import efa_resources
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.scheduling.capacity import (
    NEURON_DEVICE,
    NVIDIA_GPU,
    allocatable,
    cpu_quantity,
    memory_quantity,
    parse_quantity,
)
from llmctl.infra.workload.scheduling.pool_facts import PoolFacts

Obj = dict[str, Any]
CPU_POOL = "default"
# Karpenter does not voluntarily disrupt (consolidate, drift) a node running a pod with this
# annotation; expiry and interruption still do (the head pool never expires by default).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


# --- pools and node selection -----------------------------------------------------------------------------------


def _instance(config: WorkloadConfig, catalog: HardwareCatalog | None = None) -> Instance:
    return (catalog or hardware()).instance(config.blueprint.compute.instance_type)


def serving_pool(config: WorkloadConfig) -> PoolFacts:
    """The pool whose nodes run the serving replicas (on EKS `pool_for_blueprint`: the placement-group
    pool for a replica over several nodes)."""
    instance = _instance(config)
    facts = config.platform
    if facts.target == "eks":
        spec = pool_for_blueprint(config.blueprint, hardware())
        return facts.pool(spec.name) or PoolFacts.from_spec(spec)
    for pool in facts.pools:
        if pool.launches(instance.name, instance.family):
            return pool
    raise LlmctlError(
        f"no pool of the cluster runs {instance.name} (pools: {', '.join(p.name for p in facts.pools) or 'none'})",
        "name a pool with that instance type or family in the kubeconfig target's pools",
    )


def _eks_or_untainted(config: WorkloadConfig, name: str) -> PoolFacts:
    facts = config.platform
    if facts.target == "eks":
        return facts.pool(name) or PoolFacts.from_spec(pool_spec(name))
    for pool in facts.pools:
        if not pool.taints:
            return pool
    raise LlmctlError(
        "the cluster has no untainted pool for the Ray head and UIs",
        "name a CPU pool without taints in the kubeconfig target's pools",
    )


def head_pool(config: WorkloadConfig) -> PoolFacts:
    """The pool of Ray heads: on EKS the on-demand, consolidate-only-when-empty `ray-head` pool (losing
    a head restarts the whole RayCluster); elsewhere the first untainted pool."""
    return _eks_or_untainted(config, HEAD_POOL)


def cpu_pool(config: WorkloadConfig) -> PoolFacts:
    """The pool of UIs and helper Jobs: Karpenter's `default` CPU pool on EKS (spot allowed), the first
    untainted pool elsewhere."""
    return _eks_or_untainted(config, CPU_POOL)


def head_annotations(pool: PoolFacts) -> dict[str, str]:
    """Annotations of a Ray head pod: `karpenter.sh/do-not-disrupt` on a Karpenter pool."""
    return {DO_NOT_DISRUPT: "true"} if pool.managed_by == "karpenter" else {}


def node_selector(pool: PoolFacts, instance_type: str | None = None) -> dict[str, str]:
    """nodeSelector that lands on a pool (and one instance type when given)."""
    selector = {POOL_LABEL: pool.name} if pool.managed_by == "karpenter" else dict(pool.labels)
    if instance_type and pool.managed_by != "existing":
        selector[INSTANCE_TYPE_LABEL] = instance_type
    return selector


def tolerations(pool: PoolFacts) -> list[Obj]:
    """Tolerations for every taint of a pool."""
    result = []
    for taint in pool.taints:
        item: Obj = {"key": taint.key, "effect": taint.effect}
        if taint.value is None:
            item["operator"] = "Exists"
        else:
            item.update(operator="Equal", value=taint.value)
        result.append(item)
    return result


def capacity_selector(config: WorkloadConfig, pool: PoolFacts) -> dict[str, str]:
    """The serving pods' `karpenter.sh/capacity-type`, where a capacity reservation decides it.

    The platform's NodePool allows `reserved` besides its own types (manifests.pool_capacity_types),
    so a reservation binds only the blueprint that names it: with `fallback: none` its pods select
    `reserved`; with `fallback: on-demand` they take either (Karpenter fills reserved first). Another
    blueprint's pods on a pool with reservations keep the pool's own type, so they neither wait for
    nor use capacity reserved for someone else (with one own type; a spot+on-demand pool has two and
    a nodeSelector names one, so such pods are left as they are)."""
    if pool.managed_by != "karpenter":
        return {}
    capacity = config.blueprint.capacity
    if capacity is not None:
        return {CAPACITY_TYPE_LABEL: "reserved"} if capacity.fallback == "none" else {}
    own = [kind for kind in pool.capacity_types if kind != "reserved"]
    if "reserved" in pool.capacity_types and len(own) == 1:
        return {CAPACITY_TYPE_LABEL: own[0]}
    return {}


def serving_scheduling(config: WorkloadConfig) -> Obj:
    """The pod-spec fields that place a serving replica: its pool, instance type and capacity type."""
    pool = serving_pool(config)
    spec = scheduling(pool, config.blueprint.compute.instance_type)
    spec["nodeSelector"].update(capacity_selector(config, pool))
    return spec


def scheduling(pool: PoolFacts, instance_type: str | None = None) -> Obj:
    """The pod-spec fields that place a pod on a pool."""
    spec: Obj = {"nodeSelector": node_selector(pool, instance_type)}
    toleration_list = tolerations(pool)
    if toleration_list:
        spec["tolerations"] = toleration_list
    return spec


# --- resources ------------------------------------------------------------------------------------


def neuron_devices(config: WorkloadConfig) -> int:
    """Whole Neuron devices one replica needs for its tp degree (0 off Neuron)."""
    instance = _instance(config)
    if not instance.neuron_cores:
        return 0
    return math.ceil(config.blueprint.compute.tensor_parallel / instance.cores_per_device)


def accelerators(config: WorkloadConfig) -> dict[str, int]:
    """Extended resources one serving replica requests."""
    bp = config.blueprint
    if bp.is_neuron:
        return {NEURON_DEVICE: neuron_devices(config)}
    if bp.compute.accelerator == "nvidia":
        # a replica over several nodes: each worker pod is one stage and also takes its node's EFA devices
        return {NVIDIA_GPU: bp.compute.tensor_parallel, **efa_resources(config, _instance(config))}
    return {}


# The CPU share a replica leaves unrequested (memory: `blueprints.sizing.host_memory`).
CPU_MARGIN_SHARE = 0.1


@dataclass(frozen=True)
class ReplicaSizing:
    """What one serving replica requests, why, and what the node offers it (`llmctl validate` prints it)."""

    instance: str
    share: float  # the replica's share of the node (its accelerators / the node's)
    node_cpu: float  # what a pod can request on the node (Karpenter's allocatable less DaemonSets)
    node_memory_gib: float
    weights_gib: float | None  # host memory for the weights while loading (None: model not in the catalog)
    kv_cache_gib: float  # host KV cache (CPU engines only)
    runtime_gib: float
    memory_request_gib: float
    memory_limit_gib: float
    cpu_request: float
    from_blueprint: tuple[str, ...] = ()  # the fields the blueprint set itself

    @property
    def need_gib(self) -> float | None:
        """Host memory the model needs (weights, KV cache, runtime)."""
        if self.weights_gib is None:
            return None
        return self.weights_gib + self.kv_cache_gib + self.runtime_gib

    @property
    def memory_margin_gib(self) -> float | None:
        """Requested memory above the need (negative: below it)."""
        need = self.need_gib
        return None if need is None else self.memory_request_gib - need

    @property
    def cpu_margin(self) -> float:
        """The replica's CPU share of the node left unrequested."""
        return self.node_cpu * self.share - self.cpu_request

    def as_dict(self) -> dict[str, Any]:
        """Stable keys for `--json`."""

        def gib(value: float | None) -> float | None:
            return None if value is None else round(value, 2)

        return {
            "instance": self.instance,
            "share": round(self.share, 4),
            "node": {"cpu": round(self.node_cpu, 3), "memory_gib": gib(self.node_memory_gib)},
            "need": {
                "weights_gib": gib(self.weights_gib),
                "kv_cache_gib": gib(self.kv_cache_gib),
                "runtime_gib": gib(self.runtime_gib),
                "total_gib": gib(self.need_gib),
            },
            "requests": {"cpu": round(self.cpu_request, 3), "memory_gib": gib(self.memory_request_gib)},
            "limits": {"memory_gib": gib(self.memory_limit_gib)},
            "margin": {"cpu": round(self.cpu_margin, 3), "memory_gib": gib(self.memory_margin_gib)},
            "from_blueprint": list(self.from_blueprint),
        }

    def line(self) -> str:
        """One line for people: the request, its parts and the margin, against what the node offers."""
        need = self.need_gib
        if need is None:
            what = "model not in the catalog, so its need is unknown"
        else:
            parts = f"weights {self.weights_gib:.1f}"
            if self.kv_cache_gib:
                parts += f", KV cache {self.kv_cache_gib:.1f}"
            parts += f", runtime {self.runtime_gib:.1f}"
            what = f"need {need:.1f} GiB ({parts}) + margin {self.memory_margin_gib:.1f} GiB"
        return (
            f"memory {self.memory_request_gib:.1f} GiB = {what}; limit {self.memory_limit_gib:.1f} GiB; "
            f"cpu {self.cpu_request:g} (margin {self.cpu_margin:.1f}); one {self.instance} offers a pod "
            f"{self.node_cpu:g} vCPU / {self.node_memory_gib:.1f} GiB (Karpenter's allocatable less DaemonSets)"
        )


def _share(config: WorkloadConfig, instance: Instance) -> float:
    extended = accelerators(config)
    if extended.get(NEURON_DEVICE):
        return extended[NEURON_DEVICE] / instance.accelerator_count
    if extended.get(NVIDIA_GPU):
        return extended[NVIDIA_GPU] / instance.accelerator_count
    return 1.0


def replica_sizing(config: WorkloadConfig) -> ReplicaSizing:
    """CPU and memory of one serving replica: what the model needs plus a margin, not the whole node.

    Memory request = `blueprints.sizing.host_memory` (weights held while loading, host KV cache on
    CPU, runtime, plus a 20 % margin of at least 2 GiB); the limit is the replica's share of what Karpenter offers a pod on the
    node, so loading and compiling may burst into the node's room. CPU request = the share of the
    node's CPU less 10 %. Blueprint values (`cpus_per_replica`, `memory_gib_per_replica`) win; a
    request above the node's allocatable fails `llmctl validate`, which names both numbers.
    """

    bp = config.blueprint
    instance = _instance(config)
    node = allocatable(instance)
    share = _share(config, instance)
    try:
        arch = lookup_model(bp.model.architecture or bp.model.id, allow_hub=False)
    except CatalogError:
        arch = None
    node_share = node.memory_gib * share
    host = None
    if arch is not None:
        host = host_memory(
            arch,
            bp.compute.accelerator,
            dtype=bp.model.dtype,
            context=bp.model.max_context,
            batch=bp.model.batch_size,
            stages=bp.nodes_per_replica,
        )
    # no model facts: the share of the node, as before
    request = node_share if host is None else host.request_gib
    request = _ceil_quantity_gib(request)
    limit = max(request, _floor_quantity_gib(node_share))
    chosen: list[str] = []
    if bp.compute.memory_gib_per_replica:
        request = limit = parse_quantity(memory_quantity(bp.compute.memory_gib_per_replica)) / 1024**3
        chosen.append("memory_gib_per_replica")
    cpu = node.cpu * share * (1 - CPU_MARGIN_SHARE)
    if bp.compute.cpus_per_replica:
        cpu = bp.compute.cpus_per_replica
        chosen.append("cpus_per_replica")
    return ReplicaSizing(
        instance=instance.name,
        share=share,
        node_cpu=node.cpu,
        node_memory_gib=node.memory_gib,
        weights_gib=None if host is None else host.weights_gib,
        kv_cache_gib=0.0 if host is None else host.kv_cache_gib,
        runtime_gib=0.0 if host is None else host.runtime_gib,
        memory_request_gib=request,
        memory_limit_gib=limit,
        cpu_request=parse_quantity(cpu_quantity(cpu)),
        from_blueprint=tuple(chosen),
    )


def _ceil_quantity_gib(gib: float) -> float:
    """Round a request up to the 256 MiB / whole GiB steps `memory_quantity` writes."""
    step = 1.0 if gib >= 16 else 0.25
    return math.ceil(round(gib / step, 6)) * step


def _floor_quantity_gib(gib: float) -> float:
    return parse_quantity(memory_quantity(gib)) / 1024**3


def serving_resources(config: WorkloadConfig) -> Obj:
    """Requests and limits of one serving replica (see `replica_sizing`), plus its accelerators."""
    sizing = replica_sizing(config)
    requests: Obj = {
        "cpu": cpu_quantity(sizing.cpu_request),
        "memory": memory_quantity(sizing.memory_request_gib),
    }
    limits: Obj = {"memory": memory_quantity(sizing.memory_limit_gib)}
    for name, count in accelerators(config).items():
        requests[name] = str(count)
        limits[name] = str(count)
    return {"requests": requests, "limits": limits}


def scheduler_name(config: WorkloadConfig) -> dict[str, str]:
    """`schedulerName: my-scheduler` when a replica takes more than one Neuron device."""
    return {"schedulerName": NEURON_SCHEDULER} if neuron_devices(config) > 1 else {}


def neuron_env(config: WorkloadConfig) -> list[Obj]:
    """NeuronCore env for the tp degree (Neuron only): `NEURON_RT_NUM_CORES`.

    `NEURON_RT_VISIBLE_CORES` is deliberately not set on the pod: the container only sees the
    devices the device plugin gave it, and Ray sets the variable per actor from its `neuron_cores`
    assignment. Ray also reads a pod-level value as a comma list, so a range such as `0-23` counts as
    one core and `ray start --resources='{"neuron_cores": 24}'` refuses to start.
    """
    if not config.blueprint.is_neuron:
        return []
    return [{"name": "NEURON_RT_NUM_CORES", "value": str(config.blueprint.compute.tensor_parallel)}]
