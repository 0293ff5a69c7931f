"""A serving replica over several nodes: what its worker pods add to reach each other over EFA.

Only blueprints whose replica spans nodes (`Blueprint.nodes_per_replica` > 1, pipeline-parallel stages
of one whole node each) get any of it; every other blueprint renders as before.

- EFA devices: each worker pod requests the instance type's EFA interfaces (`vpc.amazonaws.com/efa`,
  the EFA device plugin's resource). Karpenter attaches EFA interfaces to a node only when its pods
  request that resource, and then as many as the type takes (aws/karpenter-provider-aws 1d927085dd81
  pkg/providers/amifamily/resolver.go: `efaCount` is the type's EFA capacity when the NodeClaim
  requests `v1.ResourceEFA`, else 0).
- One zone: a required pod affinity on `topology.kubernetes.io/zone` between the blueprint's worker
  pods. The first pod may land in any zone the pool offers; every later one (the other stages, and
  the other replicas) must land in that pod's zone. Karpenter's scheduler honours required pod
  affinity when it picks a new node's zone (kubernetes-sigs/karpenter
  pkg/controllers/provisioning/scheduling/topology.go: a `TopologyTypePodAffinity` group per term).
  A zone pinned in the NodePool would do the same for every blueprint of the pool and tie it to one
  zone's capacity; the affinity ties only this blueprint's replicas, to the zone its first pod found.
- The NCCL environment for EFA (below). NVLink multicast (NVLS) is left to NCCL and the instance:
  NCCL enables it where the GPUs and driver support it (H100 and later); llmctl does not force it off.
"""

from __future__ import annotations

from llmctl.blueprints.hardware import Instance
from llmctl.infra.workload import meta
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.scheduling.capacity import EFA_DEVICE

ZONE_LABEL = "topology.kubernetes.io/zone"
#: on the RayService (KubeRay v1.7.0 copies a RayService's annotations to the RayClusters it makes:
#: ray-operator/controllers/ray/rayservice_controller.go 1511-1512): worker pods per serving replica,
#: which `llmctl status` and `llmctl bench` divide the worker counts by (infra/lifecycle/replicas.py)
NODES_PER_REPLICA = "llmctl.dev/nodes-per-replica"
# Instance families whose EFA does RDMA read and write to GPU memory (GPUDirect RDMA). The setting
# is harmless but unneeded with libfabric >= 1.18 and aws-ofi-nccl >= 1.7, and needed below that
# (aws-samples/awsome-distributed-training 0610db0638db 1.architectures/efa-cheatsheet.md, "Settings
# via environment variables" and "Sample Presets"); the image's versions are checked at preflight.
RDMA_FAMILIES = ("p4d", "p4de", "p5", "p5e", "p5en")


def multi_node(config: WorkloadConfig) -> bool:
    """Whether the blueprint's replica spans several nodes."""
    return config.blueprint.nodes_per_replica > 1


def replica_annotations(config: WorkloadConfig) -> dict[str, str]:
    """The RayService's annotation of worker pods per replica (none for a single-node replica)."""
    return {NODES_PER_REPLICA: str(config.blueprint.nodes_per_replica)} if multi_node(config) else {}


def efa_resources(config: WorkloadConfig, instance: Instance) -> dict[str, int]:
    """The EFA devices one worker pod requests: every EFA interface of its node (none off multi-node)."""
    if not multi_node(config) or not instance.efa_interfaces:
        return {}
    return {EFA_DEVICE: instance.efa_interfaces}


def nccl_env(config: WorkloadConfig, instance: Instance) -> list[Obj]:
    """NCCL and libfabric settings for EFA on the worker pods (the same cheatsheet):

    - `FI_PROVIDER=efa`: libfabric uses the EFA provider only, so aws-ofi-nccl cannot quietly pick
      another (TCP) provider; without EFA, NCCL's transport lines say so and the preflight fails;
    - `FI_EFA_USE_DEVICE_RDMA=1` on the RDMA families (p4d/p4de/p5*);
    - `FI_EFA_USE_HUGE_PAGE=0`: Ray and vLLM fork worker processes, which huge pages make fail
      (`OSError: Cannot allocate memory`);
    - `NCCL_DEBUG=INFO` with the INIT and NET subsystems: the lines that name the network NCCL chose
      (`NET/OFI Selected provider is efa`, `Using network AWS Libfabric` or `NET/Socket`), which the
      preflight and `kubectl logs` read, without NCCL's per-collective output.
    No `NCCL_NVLS_ENABLE`, `NCCL_PROTO`, `NCCL_BUFFSIZE` or `NCCL_MIN_CHANNELS`: NCCL's defaults (the
    cheatsheet recommends leaving them out with current aws-ofi-nccl).
    """
    if not multi_node(config):
        return []
    env = {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_HUGE_PAGE": "0",
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
    }
    if instance.family in RDMA_FAMILIES:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return [{"name": name, "value": value} for name, value in sorted(env.items())]


def same_zone(config: WorkloadConfig) -> Obj:
    """The pod-spec `affinity` that keeps the blueprint's worker pods in one zone (none off multi-node)."""
    if not multi_node(config):
        return {}
    selector = {"matchLabels": meta.labels(config, "ray-worker")}
    term = {"labelSelector": selector, "topologyKey": ZONE_LABEL}
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
