"""Cluster placement groups: one per pool that asks for one (`PoolSpec.placement`, the pool of replicas
over several nodes), which that pool's EC2NodeClass names in `placementGroupSelector`.

What Karpenter (aws/karpenter-provider-aws v1.14.1, commit 1d927085dd81) does with the selector:

- it never creates the group: it resolves an existing one by name or id with DescribePlacementGroups
  (state `available`; pkg/providers/placementgroup/types.go `DescribePlacementGroupsInput`), and the
  EC2NodeClass is not Ready (condition `PlacementGroupReady` false, "PlacementGroupNotFound") until it
  exists (pkg/controllers/nodeclass/placementgroup.go; pkg/apis/v1/ec2nodeclass_status.go). Hence this
  component; Karpenter's controller policy already allows ec2:DescribePlacementGroups, and
  RunInstances / CreateFleet on `placement-group/*` (karpenter.py `LaunchFromSharedResources`).
- it drops the instance types whose PlacementGroupInfo.SupportedStrategies lack the group's strategy
  (pkg/providers/instancetype/compatibility/compatibility.go `placementGroupCompatibility`), requires
  the label `karpenter.k8s.aws/placement-group-id` = the group's id of every node it plans for the
  pool (pkg/providers/instancetype/offering/offering.go `InjectOfferings`), and launches into the group
  (the launch template's `Placement.GroupId`, pkg/providers/launchtemplate/types.go).
- an insufficient-capacity error is cached per placement group (pkg/providers/instance/instance.go
  `updateUnavailableOfferingsCache`, `awscache.WithPlacementGroup`; 3 minutes, pkg/cache/cache.go
  `UnavailableOfferingsTTL`): a full group does not block the other pools' launches of the same type.

EC2 fixes a cluster group's availability zone with its first instance (EC2 User Guide, "Placement
strategies": a cluster placement group is in a single AZ); the workload's required zone affinity among
its worker pods asks for one zone too, so the two agree.

Deletion: EC2 refuses to delete a group that still holds instances. The pool's EC2NodeClass depends on
the group, so `down` deletes it first, and Karpenter removes the EC2NodeClass's finalizer only when no
NodeClaim of it is left (pkg/controllers/nodeclass/controller.go `finalize`), i.e. once its instances
are terminated (a NodeClaim stays while its instance is shutting-down: pkg/providers/instance/instance.go
`instanceStateFilter`). Should the destroy still find instances (a Kubernetes API dropped from state),
`down`'s fallback sweeps them, waiting for `instance_terminated`, and retries (lifecycle/finalizers.py).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from llmctl.blueprints.pools import PoolSpec


def placement_group_name(cluster_name: str, pool: PoolSpec) -> str:
    """The EC2 name of a pool's placement group (unique per account and region, as the cluster's name
    is): `<cluster>-<pool>`."""
    return f"{cluster_name}-{pool.name}"


class PlacementGroups(pulumi.ComponentResource):
    """An `aws.ec2.PlacementGroup` for each pool with a `placement` strategy, by pool name."""

    groups: dict[str, aws.ec2.PlacementGroup]
    names: dict[str, str]

    def __init__(
        self,
        name: str,
        pools: list[PoolSpec],
        *,
        cluster_name: str,
        tags: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:platform:PlacementGroups", name, None, opts)
        self.groups, self.names = {}, {}
        for spec in pools:
            if spec.placement is None:
                continue
            self.names[spec.name] = placement_group_name(cluster_name, spec)
            self.groups[spec.name] = aws.ec2.PlacementGroup(
                f"{name}-{spec.name}",
                name=self.names[spec.name],
                strategy=spec.placement,
                tags={**tags, "llmctl:pool": spec.name},
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"placement_groups": dict(self.names)})
