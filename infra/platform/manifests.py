"""Pure builders of the Karpenter objects for a pool: NodePool (karpenter.sh/v1) and
EC2NodeClass (karpenter.k8s.aws/v1), as plain dicts built from `blueprints/pools.py` PoolSpecs.

The platform program, `llmctl plan` and the tests all use these same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmctl.blueprints.pools import DEFAULT_EXPIRY, INSTANCE_TYPE_LABEL, POOL_LABEL, PoolSpec
from llmctl.blueprints.schema import CapacitySpec
from llmctl.infra.platform.node_config import user_data

#: IMDSv2 PUT response hop limit of every node (core launch template, every EC2NodeClass): 1 keeps
#: the instance metadata (and the node role's credentials) out of reach of pods on the pod network;
#: hostNetwork agents (the VPC CNI, the Pod Identity agent) still reach it. Karpenter's EC2NodeClass
#: CRD defaults to 1 too (upstream karpenter.k8s.aws_ec2nodeclasses.yaml, metadataOptions).
METADATA_HOP_LIMIT = 1

DISCOVERY_TAG = "karpenter.sh/discovery"
NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"

# Default limits per accelerator family: enough for the catalog's largest blueprint (four
# p4de.24xlarge, or two inf2.48xlarge), small enough to stop a runaway scale-out.
_LIMITS: dict[str, dict[str, str]] = {
    "cpu": {"cpu": "1000", "memory": "4000Gi"},
    "inferentia2": {"cpu": "1152", "aws.amazon.com/neuron": "72"},
    "trainium": {"cpu": "1024", "aws.amazon.com/neuron": "128"},
    "trainium2": {"cpu": "1024", "aws.amazon.com/neuron": "128"},
    "nvidia": {"cpu": "1152", "nvidia.com/gpu": "64"},
}


def taint_dicts(pool: PoolSpec) -> list[dict[str, str]]:
    """The pool's taints as Kubernetes taint objects."""
    taints = []
    for taint in pool.taints:
        item = {"key": taint.key, "effect": taint.effect}
        if taint.value is not None:
            item["value"] = taint.value
        taints.append(item)
    return taints


def template_labels(pool: PoolSpec) -> dict[str, str]:
    """Labels Karpenter puts on the pool's nodes (it adds karpenter.sh/nodepool itself)."""
    return {key: value for key, value in pool.labels.items() if key != POOL_LABEL}


def pool_capacity_types(pool: PoolSpec, reservations: CapacitySpec | None) -> tuple[str, ...]:
    """The NodePool's `karpenter.sh/capacity-type` values: `reserved` (Karpenter fills it first) added
    to the pool's own types, never in their place. Several blueprints share a pool, and one
    blueprint's `fallback: none` must not take on-demand from the others' pods: that blueprint's own
    serving pods select `reserved` (``placement.capacity_selector``), the pool stays open."""
    if reservations is None:
        return pool.capacity_types
    return ("reserved", *(kind for kind in pool.capacity_types if kind != "reserved"))


def nodepool_manifest(
    pool: PoolSpec,
    *,
    limits: Mapping[str, str] | None = None,
    expire_after: str | None = None,
    reservations: CapacitySpec | None = None,
) -> dict[str, Any]:
    """The NodePool of a Karpenter-managed pool; `expire_after` defaults to its kind's `DEFAULT_EXPIRY`.
    With capacity `reservations` it allows `reserved` as well as the pool's own capacity types
    (:func:`pool_capacity_types`)."""
    if pool.managed_by != "karpenter":
        raise ValueError(f"pool {pool.name} is not managed by Karpenter")
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": {
            "template": {
                "metadata": {"labels": template_labels(pool)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool.name},
                    "requirements": [
                        {
                            "key": "karpenter.k8s.aws/instance-family",
                            "operator": "In",
                            "values": list(pool.families),
                        },
                        *(
                            [
                                {
                                    "key": INSTANCE_TYPE_LABEL,
                                    "operator": "In",
                                    "values": list(pool.instance_types),
                                }
                            ]
                            if pool.instance_types
                            else []
                        ),
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": list(pool_capacity_types(pool, reservations)),
                        },
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": taint_dicts(pool),
                    "expireAfter": expire_after or DEFAULT_EXPIRY[pool.expiry_kind],
                },
            },
            # Accelerator and Ray head nodes host slow-starting pods (image pull, download,
            # compile): only empty ones are removed. The default CPU pool is packed tighter.
            "disruption": {
                "consolidationPolicy": pool.consolidation_policy,
                "consolidateAfter": pool.consolidate_after,
                "budgets": [{"nodes": "10%"}],
            },
            "limits": dict(limits or _LIMITS[pool.accelerator]),
        },
    }


def ec2nodeclass_manifest(
    pool: PoolSpec,
    *,
    cluster_name: str,
    node_role: str,
    ami_alias: str,
    tags: Mapping[str, str] | None = None,
    reservations: CapacitySpec | None = None,
    root_volume_gib: int | None = None,
    placement_group: str | None = None,
) -> dict[str, Any]:
    """The EC2NodeClass of a Karpenter-managed pool: pinned AL2023 alias, IMDSv2, large root volume
    (`root_volume_gib` where the platform's models need more than the pool's default), the capacity
    reservations its nodes may launch into (`capacityReservationSelectorTerms`), the pool's nodeadm
    NodeConfig (`userData`, where it has one) and the placement group its nodes launch into
    (`placementGroupSelector` by name: an existing group, which Karpenter resolves and never creates;
    `llmctl.infra.platform.placement_groups`)."""
    volume = root_volume_gib or pool.root_volume_gib
    if pool.managed_by != "karpenter":
        raise ValueError(f"pool {pool.name} is not managed by Karpenter")
    discovery = {"tags": {DISCOVERY_TAG: cluster_name}}
    selected: dict[str, Any] = (
        {"capacityReservationSelectorTerms": reservations.selector_terms()} if reservations else {}
    )
    # the nodeadm NodeConfig Karpenter merges into the nodes' userData (the Neuron pools': containerd
    # hands devices over owned by the pod's user, `node_config.py`)
    if (node_config := user_data(pool)) is not None:
        selected["userData"] = node_config
    if placement_group is not None:
        selected["placementGroupSelector"] = {"name": placement_group}
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": pool.name},
        "spec": {
            **selected,
            "role": node_role,
            # AL2023 picks its Neuron or NVIDIA variant from the instance type.
            "amiSelectorTerms": [{"alias": ami_alias}],
            "subnetSelectorTerms": [discovery],
            "securityGroupSelectorTerms": [discovery],
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": METADATA_HOP_LIMIT,
                "httpTokens": "required",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {
                        "volumeSize": f"{volume}Gi",
                        "volumeType": "gp3",
                        "iops": 3000 if volume < 500 else 6000,
                        "throughput": 125 if volume < 500 else 500,
                        "encrypted": True,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "tags": {**(tags or {}), "llmctl:pool": pool.name},
        },
    }
