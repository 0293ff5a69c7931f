"""Network: a VPC sized for pods, or an existing VPC, tagged for Karpenter and the LB controller.

Layout (defaults, as the seeds): primary 10.1.0.0/21 holds two private /24 (control-plane ENIs,
internal load balancers) and two public /26 (NAT, public load balancers); the secondary
100.64.0.0/16 is split into one subnet per AZ where nodes and pods get their addresses. AZs are
chosen by AZ ID (names differ per account) among those that offer the accelerator instances.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from llmctl.errors import CloudError
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.manifests import DISCOVERY_TAG
from llmctl.infra.platform.tags import tags_for

ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
# On an existing VPC's subnet: the keys of the tags this cluster added (space-separated). A tag is
# this cluster's to manage (and remove on `down`) when it was absent, or when this marker lists it.
MANAGED_TAGS_PREFIX = "llmctl:managed-tags/"


@dataclass(frozen=True)
class SubnetTag:
    """One tag llmctl wants on an existing subnet, and what it found there."""

    subnet_id: str
    key: str
    value: str
    found: str | None  # the value already on the subnet, None when absent or this cluster's own

    def describe(self) -> str:
        return f"{self.subnet_id} {self.key}={self.found if self.found is not None else self.value}"


def managed_tags_key(cluster_name: str) -> str:
    """The marker tag listing the tags a cluster added to a subnet it does not own."""
    return f"{MANAGED_TAGS_PREFIX}{cluster_name}"


def subnet_tag_plan(
    cluster_name: str, wanted: list[tuple[str, str, str]], current: dict[str, dict[str, str]]
) -> list[SubnetTag]:
    """Which of the wanted (subnet, key, value) tags llmctl manages and which it found.

    A tag absent from the subnet, or listed in this cluster's marker, is managed (created, and
    deleted by `down`). A tag another party set is left as it is: `down` must not remove a role tag
    another cluster's load balancers rely on. A discovery tag naming another cluster is refused, since
    this cluster's Karpenter could not find the subnet without changing it."""
    plan = []
    for subnet_id, key, value in wanted:
        tags = current.get(subnet_id, {})
        ours = tags.get(managed_tags_key(cluster_name), "").split()
        found = tags.get(key)
        if found is None or key in ours:
            plan.append(SubnetTag(subnet_id, key, value, None))
            continue
        if key == DISCOVERY_TAG and found != value:
            raise CloudError(
                f"subnet {subnet_id} carries {DISCOVERY_TAG}={found}: another cluster's Karpenter "
                f"discovers it, and {cluster_name}'s would need that tag changed",
                "pass private_subnet_ids that no other cluster has tagged for Karpenter discovery; "
                "llmctl does not change another cluster's tags",
            )
        plan.append(SubnetTag(subnet_id, key, value, found))
    return plan


@dataclass(frozen=True)
class Zone:
    """An availability zone: its per-account name and its stable ID."""

    name: str
    id: str


@dataclass(frozen=True)
class SubnetPlan:
    """CIDRs of every subnet, index-aligned with the chosen zones."""

    private: list[str]
    public: list[str]
    nodes: list[str]


def choose_zones(
    zones: list[Zone],
    preferred_ids: list[str],
    count: int,
    offered: dict[str, set[str]] | None = None,
    pinned_ids: list[str] | None = None,
) -> list[Zone]:
    """Pick `count` zones: those offering every wanted instance type first, then preferred AZ IDs.

    `offered` maps instance type -> zone names offering it (None: no accelerator to place).
    Each wanted instance type must be offered in at least one chosen zone. `pinned_ids` (the AZ IDs
    an earlier `up` chose) are kept as they are: moving a subnet replaces it.
    """
    offered = offered or {}
    if pinned_ids:
        return _pinned(zones, pinned_ids, offered)

    def rank(item: tuple[int, Zone]) -> tuple[int, int, int]:
        position, zone = item
        served = sum(zone.name in names for names in offered.values())
        preference = preferred_ids.index(zone.id) if zone.id in preferred_ids else len(preferred_ids)
        return (-served, preference, position)

    chosen = [zone for _, zone in sorted(enumerate(zones), key=rank)][:count]
    if len(chosen) < count:
        raise CloudError(
            f"the region has {len(zones)} available zone(s); {count} are needed",
            "pick another region, or lower vpc.az_count",
        )
    for instance_type, names in sorted(offered.items()):
        if not any(zone.name in names for zone in chosen):
            raise CloudError(
                f"{instance_type} is not offered in any of the chosen zones ({', '.join(z.id for z in chosen)})",
                "pick a region that offers it (`aws ec2 describe-instance-type-offerings --location-type "
                "availability-zone-id`) or set az_ids",
            )
    return sorted(chosen, key=lambda zone: zones.index(zone))


def _pinned(zones: list[Zone], pinned_ids: list[str], offered: dict[str, set[str]]) -> list[Zone]:
    reselect = "`llmctl up --reselect-azs` chooses the AZs again (it replaces the subnets)"
    missing = [zid for zid in pinned_ids if zid not in {zone.id for zone in zones}]
    if missing:
        raise CloudError(f"the environment's AZ(s) {', '.join(missing)} are not available now", reselect)
    chosen = [zone for zone in zones if zone.id in pinned_ids]
    for instance_type, names in sorted(offered.items()):
        if not any(zone.name in names for zone in chosen):
            raise CloudError(
                f"{instance_type} is not offered in the environment's AZs ({', '.join(pinned_ids)})",
                f"deploy it to another environment (--stack), or {reselect}",
            )
    return chosen


def plan_subnets(cidr: str, pods_cidr: str, az_count: int) -> SubnetPlan:
    """Private /24s, public /26s (from the /24 after them) and one node/pod subnet per zone."""
    primary = ipaddress.IPv4Network(cidr)
    twenty_fours = list(primary.subnets(new_prefix=24))
    if len(twenty_fours) < az_count + 1:
        raise ValueError(f"{cidr} is too small for {az_count} zones")
    private = [str(net) for net in twenty_fours[:az_count]]
    public = [str(net) for net in list(twenty_fours[az_count].subnets(new_prefix=26))[:az_count]]
    pods = ipaddress.IPv4Network(pods_cidr)
    split = pods.prefixlen + math.ceil(math.log2(az_count))
    nodes = [str(net) for net in list(pods.subnets(new_prefix=split))[:az_count]]
    return SubnetPlan(private=private, public=public, nodes=nodes)


def _zones(opts: pulumi.InvokeOptions) -> list[Zone]:
    result = aws.get_availability_zones(state="available", opts=opts)
    return [Zone(name, zid) for name, zid in zip(result.names, result.zone_ids, strict=True)]


def _offerings(instance_types: list[str], opts: pulumi.InvokeOptions) -> dict[str, set[str]]:
    if not instance_types:
        return {}
    result = aws.ec2.get_instance_type_offerings(
        filters=[{"name": "instance-type", "values": instance_types}],
        location_type="availability-zone",
        opts=opts,
    )
    # EC2 answers one row per (type, zone offering it): a type with no row is offered nowhere.
    offered: dict[str, set[str]] = {name: set() for name in instance_types}
    for instance_type, location in zip(result.instance_types, result.locations, strict=True):
        offered.setdefault(instance_type, set()).add(location)
    return offered


class Network(pulumi.ComponentResource):
    """The VPC, its subnets and routes, or tags on an existing VPC's subnets."""

    vpc_id: pulumi.Output[str]
    control_plane_subnet_ids: pulumi.Output[list[str]]
    node_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]
    zones: list[Zone]
    # The way out of the subnets: internet gateway, NAT (and its IP), route tables and their
    # associations. The cluster depends on them, so on destroy they go only after the cluster and
    # everything on it (Karpenter's finalizers call EC2/IAM through the NAT). Empty for an existing
    # VPC, whose routes are not this stack's.
    routing: list[pulumi.Resource]
    # On an existing VPC: the tags wanted on its subnets, managed or found (empty for a new VPC).
    subnet_tags: list[SubnetTag]

    def __init__(self, name: str, config: PlatformConfig, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("llmctl:platform:Network", name, None, opts)
        self._config = config
        self.subnet_tags = []
        child = pulumi.ResourceOptions(parent=self)
        if config.vpc.existing_vpc_id:
            self._existing(name, child)
        else:
            self._create(name, child)
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "control_plane_subnet_ids": self.control_plane_subnet_ids,
                "node_subnet_ids": self.node_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
            }
        )

    def _tags(self, extra: dict[str, str]) -> dict[str, str]:
        return tags_for(self._config, extra)

    def _subnets(
        self,
        name: str,
        vpc: aws.ec2.Vpc,
        kind: str,
        cidrs: list[str],
        tags: dict[str, str],
        opts: pulumi.ResourceOptions,
    ) -> list[aws.ec2.Subnet]:
        """One subnet of a kind per zone, named and tagged `<cluster>-<kind>-<az id>`."""
        return [
            aws.ec2.Subnet(
                f"{name}-{kind}-{zone.id}",
                vpc_id=vpc.id,
                cidr_block=cidr,
                availability_zone=zone.name,
                tags=self._tags({"Name": f"{self._config.cluster_name}-{kind}-{zone.id}", **tags}),
                opts=opts,
            )
            for zone, cidr in zip(self.zones, cidrs, strict=True)
        ]

    def _existing(self, name: str, child: pulumi.ResourceOptions) -> None:
        config = self._config
        self.zones = []
        self.routing = []
        # Karpenter finds the node subnets by the discovery tag; the load balancer controller finds
        # subnets by the role tags (as on the subnets this component creates).
        wanted: list[tuple[str, str, str, str, int]] = [
            (kind, subnet_id, key, value, index)
            for kind, key, value, subnet_ids in (
                ("discovery", DISCOVERY_TAG, config.cluster_name, config.vpc.private_subnet_ids),
                ("internal-elb", INTERNAL_ELB_TAG, "1", config.vpc.private_subnet_ids),
                ("elb", ELB_TAG, "1", config.vpc.public_subnet_ids),
            )
            for index, subnet_id in enumerate(subnet_ids)
        ]
        invoke = pulumi.InvokeOptions(parent=self)
        current = {
            subnet_id: dict(aws.ec2.get_subnet(id=subnet_id, opts=invoke).tags or {})
            for subnet_id in dict.fromkeys(w[1] for w in wanted)
        }
        plan = subnet_tag_plan(config.cluster_name, [(w[1], w[2], w[3]) for w in wanted], current)
        self.subnet_tags = plan
        markers: dict[str, aws.ec2.Tag] = {}
        for (kind, subnet_id, key, value, index), tag in zip(wanted, plan, strict=True):
            if tag.found is not None:
                continue
            if subnet_id not in markers:
                keys = " ".join(t.key for t in plan if t.subnet_id == subnet_id and t.found is None)
                # created first, deleted last: a tag it lists stays ours even after an interrupted run
                markers[subnet_id] = aws.ec2.Tag(
                    f"{name}-managed-tags-{subnet_id}",
                    resource_id=subnet_id,
                    key=managed_tags_key(config.cluster_name),
                    value=keys,
                    opts=child,
                )
            aws.ec2.Tag(
                f"{name}-{kind}-{index}",
                resource_id=subnet_id,
                key=key,
                value=value,
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[markers[subnet_id]])
                ),
            )
        managed = [t.describe() for t in plan if t.found is None]
        found = [t.describe() for t in plan if t.found is not None]
        pulumi.log.info(
            f"subnet tags: llmctl manages {', '.join(managed) or 'none'}; "
            f"found and left alone: {', '.join(found) or 'none'}",
            resource=self,
        )
        self.vpc_id = pulumi.Output.from_input(config.vpc.existing_vpc_id or "")
        self.control_plane_subnet_ids = pulumi.Output.from_input(list(config.vpc.private_subnet_ids))
        self.node_subnet_ids = pulumi.Output.from_input(list(config.vpc.private_subnet_ids))
        self.public_subnet_ids = pulumi.Output.from_input(list(config.vpc.public_subnet_ids))

    def _create(self, name: str, child: pulumi.ResourceOptions) -> None:
        config = self._config
        invoke = pulumi.InvokeOptions(parent=self)
        self.zones = choose_zones(
            _zones(invoke),
            config.az_ids,
            config.vpc.az_count,
            _offerings(config.instance_types, invoke),
            config.pinned_az_ids,
        )
        plan = plan_subnets(config.vpc.cidr, config.vpc.pods_cidr, config.vpc.az_count)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=config.vpc.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self._tags({"Name": config.cluster_name}),
            opts=child,
        )
        pods_block = aws.ec2.VpcIpv4CidrBlockAssociation(
            f"{name}-pods-cidr", vpc_id=vpc.id, cidr_block=config.vpc.pods_cidr, opts=child
        )
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=self._tags({"Name": config.cluster_name}), opts=child
        )
        public = self._subnets(name, vpc, "public", plan.public, {ELB_TAG: "1"}, child)
        private = self._subnets(name, vpc, "private", plan.private, {INTERNAL_ELB_TAG: "1"}, child)
        nodes = self._subnets(
            name,
            vpc,
            "nodes",
            plan.nodes,
            {DISCOVERY_TAG: config.cluster_name},
            pulumi.ResourceOptions(parent=self, depends_on=[pods_block]),
        )
        eip = aws.ec2.Eip(
            f"{name}-nat-ip",
            domain="vpc",
            tags=self._tags({"Name": f"{config.cluster_name}-nat"}),
            opts=child,
        )
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=eip.id,
            subnet_id=public[0].id,
            tags=self._tags({"Name": f"{config.cluster_name}-nat"}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
        )
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=self._tags({"Name": f"{config.cluster_name}-public"}),
            opts=child,
        )
        private_routes = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
            tags=self._tags({"Name": f"{config.cluster_name}-private"}),
            opts=child,
        )
        routed = [
            ("public", public, public_routes),
            ("private", private, private_routes),
            ("nodes", nodes, private_routes),
        ]
        self.routing = [igw, eip, nat, public_routes, private_routes]
        for kind, subnets, table in routed:
            for zone, subnet in zip(self.zones, subnets, strict=True):
                self.routing.append(
                    aws.ec2.RouteTableAssociation(
                        f"{name}-{kind}-{zone.id}-rta",
                        subnet_id=subnet.id,
                        route_table_id=table.id,
                        opts=child,
                    )
                )
        self.vpc_id = vpc.id
        self.control_plane_subnet_ids = pulumi.Output.all(*[s.id for s in private]).apply(list)
        self.node_subnet_ids = pulumi.Output.all(*[s.id for s in nodes]).apply(list)
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public]).apply(list)
