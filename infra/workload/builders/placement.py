"""Where serving pods run and what they request: pools from the platform's facts, nodeSelectors and
tolerations, accelerator and CPU/memory requests sized to one node, and the Neuron scheduler/env.

Pure: returns plain dicts shaped like the Kubernetes API (camelCase keys).
"""

from __future__ import annotations

import math
from typing import Any

from llmctl.blueprints.hardware import HardwareCatalog, Instance, hardware
from llmctl.errors import LlmctlError
from llmctl.infra.pools import (
    HEAD_POOL,
    INSTANCE_TYPE_LABEL,
    NEURON_SCHEDULER,
    POOL_LABEL,
    pool_for_instance,
)
from llmctl.infra.workload.capacity import (
    NEURON_DEVICE,
    NVIDIA_GPU,
    allocatable,
    cpu_quantity,
    memory_quantity,
)
from llmctl.infra.workload.config import PoolFacts, WorkloadConfig

Obj = dict[str, Any]
CPU_POOL = "default"
# Karpenter does not voluntarily disrupt (consolidate, drift) a node running a pod with this
# annotation; expiry and interruption still do (the head pool never expires by default).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


# --- pools and node selection -----------------------------------------------------------------------------------


def _instance(config: WorkloadConfig, catalog: HardwareCatalog | None = None) -> Instance:
    return (catalog or hardware()).instance(config.blueprint.compute.instance_type)


def serving_pool(config: WorkloadConfig) -> PoolFacts:
    """The pool whose nodes run the serving replicas."""
    instance = _instance(config)
    facts = config.platform
    if facts.target == "eks":
        spec = pool_for_instance(instance)
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
        from llmctl.infra.pools import pool as pool_spec

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
        return {NVIDIA_GPU: bp.compute.tensor_parallel}
    return {}


def serving_resources(config: WorkloadConfig) -> Obj:
    """Requests and limits of one serving replica: the blueprint's values, or its share of one node.

    The share is taken of the node's allocatable resources (after the daemonset reserve), in
    proportion to the accelerators the replica uses, so a replica never asks for the whole node.
    """
    bp = config.blueprint
    instance = _instance(config)
    node = allocatable(instance)
    extended = accelerators(config)
    if extended.get(NEURON_DEVICE):
        share = extended[NEURON_DEVICE] / instance.accelerator_count
    elif extended.get(NVIDIA_GPU):
        share = extended[NVIDIA_GPU] / instance.accelerator_count
    else:
        share = 1.0
    cpus = bp.compute.cpus_per_replica or node.cpu * share
    memory = bp.compute.memory_gib_per_replica or node.memory_gib * share
    requests: Obj = {"cpu": cpu_quantity(cpus), "memory": memory_quantity(memory)}
    limits: Obj = {"memory": requests["memory"]}
    for name, count in extended.items():
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
