"""NodePools: one EC2NodeClass + NodePool per Karpenter-managed pool the platform offers."""

from __future__ import annotations

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

from llmctl.blueprints.pools import PoolSpec, pool
from llmctl.blueprints.versions import versions
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.karpenter import Karpenter
from llmctl.infra.platform.manifests import ec2nodeclass_manifest, nodepool_manifest
from llmctl.infra.platform.placement_groups import PlacementGroups
from llmctl.infra.platform.tags import tags_for


def karpenter_pools(config: PlatformConfig) -> list[PoolSpec]:
    """The configured pools Karpenter launches (everything but the managed core group)."""
    return [spec for spec in (pool(name) for name in config.pools) if spec.managed_by == "karpenter"]


class NodePools(pulumi.ComponentResource):
    """Karpenter NodePools and EC2NodeClasses. They depend on the Karpenter release, so on destroy
    they go first, while the controller still runs and can terminate their instances. A pool with a
    placement group (`placement`) names it in its EC2NodeClass, which depends on it: the group is made
    before and deleted after the node class, whose finalizer waits for its instances to be gone."""

    nodepools: dict[str, CustomResource]

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        karpenter: Karpenter,
        placement: PlacementGroups | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:platform:NodePools", name, None, opts)
        ami_alias = versions().ami["al2023_alias"].value
        self.nodepools = {}
        for spec in karpenter_pools(config):
            node_class = ec2nodeclass_manifest(
                spec,
                cluster_name=config.cluster_name,
                node_role=karpenter.node_role_name,
                ami_alias=ami_alias,
                tags=tags_for(config),
                reservations=config.capacity_reservations.get(spec.name),
                root_volume_gib=config.root_volume_gib.get(spec.name),
                placement_group=placement.names.get(spec.name) if placement else None,
            )
            group = [placement.groups[spec.name]] if placement and spec.name in placement.groups else []
            node_class_resource = CustomResource(
                f"{name}-{spec.name}-nodeclass",
                api_version=node_class["apiVersion"],
                kind=node_class["kind"],
                metadata=node_class["metadata"],
                spec=node_class["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[karpenter.release, *group]),
            )
            node_pool = nodepool_manifest(
                spec,
                expire_after=config.node_expiry.for_pool(spec),
                reservations=config.capacity_reservations.get(spec.name),
            )
            self.nodepools[spec.name] = CustomResource(
                f"{name}-{spec.name}-nodepool",
                api_version=node_pool["apiVersion"],
                kind=node_pool["kind"],
                metadata=node_pool["metadata"],
                spec=node_pool["spec"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[karpenter.release, node_class_resource]),
            )
        self.register_outputs({"nodepools": list(self.nodepools)})
