"""The node pools a platform offers, as plain data.

One source of truth for three users: the platform program creates a Karpenter NodePool +
EC2NodeClass per pool, the workload builders take nodeSelectors and tolerations from it, and the
schedulability check (`llmctl validate`) compares the two. Pure: no Pulumi, no boto3.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from llmctl.blueprints.hardware import HardwareCatalog, Instance
from llmctl.blueprints.models import lookup_model
from llmctl.blueprints.runtimes import NEURON
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import CatalogError

POOL_LABEL = "karpenter.sh/nodepool"
# Karpenter labels every node it launches with its capacity type (spot, on-demand, reserved).
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ROLE_LABEL = "llmctl.dev/role"
CORE_POOL = "core"
# Ray heads: on-demand capacity that consolidation does not take away (see `head_pool` below).
HEAD_POOL = "ray-head"
# Pools every platform has, whatever its blueprints (a NodePool without nodes costs nothing).
ALWAYS_POOLS = (CORE_POOL, "default", HEAD_POOL)
# NodePool `expireAfter` per pool kind (`PoolSpec.expiry_kind`). Karpenter v1 expiry is forceful:
# `karpenter.sh/do-not-disrupt` does not stop it, so pools that hold serving replicas or Ray heads
# never expire by default; the general CPU pool is recycled monthly (Karpenter's own default).
DEFAULT_EXPIRY = {"accelerator": "Never", "heads": "Never", "cpu": "720h"}
# Accelerators whose devices the Neuron driver and device plugin hand over (`/dev/neuron*`).
NEURON_ACCELERATORS = NEURON
# The scheduler the Neuron chart deploys; pods asking for more than one device or core must use it.
NEURON_SCHEDULER = "my-scheduler"


@dataclass(frozen=True)
class Taint:
    """A node taint."""

    key: str
    effect: str = "NoSchedule"
    value: str | None = None


@dataclass(frozen=True)
class PoolSpec:
    """One pool of nodes: a Karpenter NodePool, or the managed core node group."""

    name: str
    accelerator: str
    families: tuple[str, ...]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity_types: tuple[str, ...] = ("on-demand",)
    root_volume_gib: int = 100
    managed_by: str = "karpenter"  # or "eks-nodegroup" for the core pool
    # Karpenter consolidation: WhenEmpty never moves running pods; WhenEmptyOrUnderutilized repacks.
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "1m"
    # Only these instance types of its families (the NodePool adds an instance-type requirement); ()
    # for every type of the families.
    instance_types: tuple[str, ...] = ()
    # "cluster": the pool's nodes launch into a cluster placement group the platform makes for it (its
    # EC2NodeClass's placementGroupSelector), the pool of replicas that span nodes (`pool_for_blueprint`).
    placement: str | None = None

    @property
    def expiry_kind(self) -> str:
        """Which `node_expiry` setting applies: accelerator, heads or cpu (core: none, not Karpenter)."""
        if self.accelerator != "cpu":
            return "accelerator"
        return "heads" if self.name == HEAD_POOL else "cpu"

    @property
    def device_ownership(self) -> bool:
        """Whether containerd on this pool's nodes hands a pod's accelerator devices over owned by the
        pod's user (`device_ownership_from_security_context`, set by the EC2NodeClass's userData:
        `llmctl.infra.platform.node_config`): the Neuron pools, so that a non-root serving pod opens the
        `/dev/neuron*` nodes it was given whatever mode the host's udev rule sets (0666 from the
        driver's package, 0660 for a `neuron` group as Neuron's security guide advises)."""
        return self.accelerator in NEURON_ACCELERATORS

    def node_labels(self, instance_type: str | None = None) -> dict[str, str]:
        """The labels a node of this pool carries (Karpenter adds the pool name and type)."""
        labels = (
            {POOL_LABEL: self.name, **self.labels} if self.managed_by == "karpenter" else dict(self.labels)
        )
        if instance_type:
            labels[INSTANCE_TYPE_LABEL] = instance_type
        return labels


# The catalog's NVIDIA types with EFA (`Instance.efa_interfaces` > 0, blueprints/data/instances.yaml),
# the only ones a replica over several nodes may use (rules.py). All take a cluster placement group:
# DescribeInstanceTypes PlacementGroupInfo.SupportedStrategies lists "cluster" for p5.48xlarge and
# g5.12xlarge (aws/karpenter-provider-aws 1d927085dd81 pkg/fake/zz_generated.describe_instance_types.go),
# and the EC2 User Guide's placement group rules exclude only burstable (T), Mac1 and M7i-flex types
# from the cluster strategy. Were one not to, Karpenter would drop it from the pool, not fail: types
# whose SupportedStrategies lack the group's strategy are incompatible with the EC2NodeClass
# (pkg/providers/instancetype/compatibility/compatibility.go `placementGroupCompatibility`).
EFA_GPU_TYPES = (
    "g5.12xlarge",
    "g5.24xlarge",
    "g5.48xlarge",
    "g6.12xlarge",
    "g6.48xlarge",
    "g6e.12xlarge",
    "g6e.48xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
)
#: the pool of NVIDIA replicas over several nodes: one cluster placement group, EFA types only
GPU_EFA_POOL = "gpu-nvidia-efa"

NEURON_TAINT = Taint("aws.amazon.com/neuron")
GPU_TAINT = Taint("nvidia.com/gpu")

POOLS: tuple[PoolSpec, ...] = (
    PoolSpec(
        "core",
        "cpu",
        ("m5",),
        labels={ROLE_LABEL: "core", "workload": "rayhead"},
        managed_by="eks-nodegroup",
        root_volume_gib=100,
    ),
    PoolSpec(
        "default",
        "cpu",
        ("c5", "m5", "r5", "c6i", "m6i", "r6i", "c7i", "m7i", "r7i"),
        labels={ROLE_LABEL: "cpu", "instanceType": "default"},
        capacity_types=("spot", "on-demand"),
        root_volume_gib=200,
    ),
    # Ray heads: losing one restarts the whole RayCluster (and reloads or recompiles the model), so
    # on-demand only and only empty nodes are consolidated; head pods also carry
    # `karpenter.sh/do-not-disrupt`. General-purpose families: the head asks for 2 vCPU / 8 GiB.
    PoolSpec(
        HEAD_POOL,
        "cpu",
        ("m5", "m6i", "m7i"),
        labels={ROLE_LABEL: "ray-head", "instanceType": HEAD_POOL},
        root_volume_gib=100,
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
    ),
    PoolSpec(
        "inferentia-inf2",
        "inferentia2",
        ("inf2",),
        labels={ROLE_LABEL: "neuron", "instanceType": "inferentia-inf2", "provisionerType": "Karpenter"},
        taints=(NEURON_TAINT,),
        root_volume_gib=500,
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
    ),
    PoolSpec(
        "trainium-trn1",
        "trainium",
        ("trn1", "trn1n"),
        labels={ROLE_LABEL: "neuron", "instanceType": "trainium-trn1", "provisionerType": "Karpenter"},
        taints=(NEURON_TAINT,),
        root_volume_gib=500,
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
    ),
    PoolSpec(
        "trainium-trn2",
        "trainium2",
        ("trn2",),
        labels={ROLE_LABEL: "neuron", "instanceType": "trainium-trn2", "provisionerType": "Karpenter"},
        taints=(NEURON_TAINT,),
        root_volume_gib=500,
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
    ),
    PoolSpec(
        "gpu-nvidia",
        "nvidia",
        ("g5", "g6", "g6e", "p4d", "p4de", "p5"),
        labels={ROLE_LABEL: "gpu", "instanceType": "gpu-nvidia", "provisionerType": "Karpenter"},
        taints=(GPU_TAINT,),
        root_volume_gib=500,
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
    ),
    # Replicas over several nodes (`Blueprint.nodes_per_replica` > 1): the GPU pool's families, only
    # their EFA types, every node in the platform's cluster placement group for this pool (one AZ, one
    # network spine: EC2 User Guide, "Placement strategies"). Its own pool, so that the group holds
    # only these nodes and not every GPU node of the platform.
    PoolSpec(
        GPU_EFA_POOL,
        "nvidia",
        ("g5", "g6", "g6e", "p4d", "p4de", "p5"),
        labels={ROLE_LABEL: "gpu", "instanceType": GPU_EFA_POOL, "provisionerType": "Karpenter"},
        taints=(GPU_TAINT,),
        root_volume_gib=500,
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
        instance_types=EFA_GPU_TYPES,
        placement="cluster",
    ),
)


def pool(name: str) -> PoolSpec:
    """A pool by name."""
    for spec in POOLS:
        if spec.name == name:
            return spec
    raise CatalogError(f"unknown node pool {name!r}", f"known pools: {', '.join(p.name for p in POOLS)}")


def pool_for_instance(instance: Instance) -> PoolSpec:
    """The Karpenter pool that launches an instance type for replicas of one node (the placement-group
    pools are for replicas over several: :func:`pool_for_blueprint`)."""
    for spec in POOLS:
        if spec.managed_by == "karpenter" and spec.placement is None and instance.family in spec.families:
            return spec
    raise CatalogError(
        f"no node pool launches {instance.name} (family {instance.family})",
        "pick an instance type from a supported family (`llmctl catalog instances`)",
    )


def pool_for_blueprint(blueprint: Blueprint, catalog: HardwareCatalog) -> PoolSpec:
    """The Karpenter pool of a blueprint's serving nodes: for a replica over several nodes
    (`nodes_per_replica` > 1) the placement-group pool that launches its instance type, else (and for
    a type no such pool takes, which the rules refuse for several nodes) :func:`pool_for_instance`."""
    instance = catalog.instance(blueprint.compute.instance_type)
    if blueprint.nodes_per_replica > 1:
        for spec in POOLS:
            if spec.placement is not None and instance.name in spec.instance_types:
                return spec
    return pool_for_instance(instance)


def pools_for(
    blueprints: Iterable[Blueprint], catalog: HardwareCatalog, *, all_pools: bool = False
) -> list[PoolSpec]:
    """The pools a platform needs for some blueprints: `ALWAYS_POOLS`, plus theirs."""
    if all_pools:
        return list(POOLS)
    wanted = set(ALWAYS_POOLS)
    for blueprint in blueprints:
        wanted.add(pool_for_blueprint(blueprint, catalog).name)
    return [spec for spec in POOLS if spec.name in wanted]


# A serving node's disk besides the model: the serving image pulled and unpacked (the ray-llm image is
# tens of GB), the engine's compile caches, logs. llmctl's estimate.
NODE_DISK_MARGIN_GIB = 150


def root_volumes_by_pool(blueprints: Iterable[Blueprint], catalog: HardwareCatalog) -> dict[str, int]:
    """Root volumes (GiB) above a pool's default, where a blueprint's model does not fit it: every
    serving node holds the whole model on its disk, a replica over several nodes too (Ray Serve LLM
    downloads the model files on each node of a replica's placement group: ray 2.58.0
    python/ray/llm/_internal/serve/utils/node_initialization_utils.py `initialize_node`, one download
    task per node of `bundles_to_node_id`, and vLLM's pipeline stages read their layers from the full
    set of files). The weights plus `NODE_DISK_MARGIN_GIB`, rounded up to 100 GiB; pools whose default
    holds every blueprint's model are left out (their EC2NodeClass stays as it was)."""
    sizes: dict[str, int] = {}
    for bp in blueprints:
        try:
            arch = lookup_model(bp.model.architecture or bp.model.id, allow_hub=False)
            spec = pool_for_blueprint(bp, catalog)
        except CatalogError:
            continue
        need = arch.weights_gb(bp.model.dtype) * 1e9 / 1024**3 + NODE_DISK_MARGIN_GIB
        size = -(-int(need) // 100) * 100
        if size > max(spec.root_volume_gib, sizes.get(spec.name, 0)):
            sizes[spec.name] = size
    return sizes
