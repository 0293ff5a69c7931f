"""`PlatformConfig`: everything the platform program needs, validated, and its round trip
through Pulumi stack config (so the plain `pulumi` CLI runs the same program)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import (
    ALWAYS_POOLS,
    DEFAULT_EXPIRY,
    NEURON_ACCELERATORS,
    POOLS,
    PoolSpec,
    pool,
    pools_for,
)
from llmctl.blueprints.schema import Blueprint, CapacitySpec
from llmctl.blueprints.versions import versions
from llmctl.errors import BlueprintError
from llmctl.infra.platform.addons import Addon, installed_addons
from llmctl.infra.platform.needs import blueprint_needs, merge_needs
from llmctl.infra.platform.regions import region_problem

PROJECT = "llmctl"

# AZ IDs where inf2/trn1 capacity exists, in order of preference (AZ IDs, not names: names are
# shuffled per account).
DEFAULT_AZ_IDS: dict[str, tuple[str, ...]] = {
    "us-west-2": ("usw2-az4", "usw2-az1"),
    "us-east-1": ("use1-az6", "use1-az5"),
    "us-east-2": ("use2-az3", "use2-az1"),
}
_CLUSTER_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9-]{0,37}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
# Karpenter's expireAfter pattern (NodePool CRD), and the shortest expiry we accept (an hour: shorter
# ones recycle nodes faster than a Neuron model compiles).
_EXPIRY = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
_MIN_EXPIRY_S = 3600


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError:
        raise ValueError(f"{value!r} is not a network CIDR like '10.1.0.0/21'") from None


class VpcConfig(_Strict):
    """The VPC: created by the stack, or an existing one brought by the user."""

    cidr: str = Field(
        "10.1.0.0/21",
        description="Primary CIDR: two private /24 (control plane, internal LBs) and two public /26.",
    )
    pods_cidr: str = Field(
        "100.64.0.0/16", description="Secondary CIDR, split into one subnet per AZ for nodes and pods."
    )
    az_count: int = Field(2, ge=2, le=3, description="Availability zones to spread subnets over.")
    existing_vpc_id: str | None = Field(None, description="Use this VPC instead of creating one (vpc-...).")
    private_subnet_ids: list[str] = Field(
        default_factory=list,
        description="With existing_vpc_id: private subnets for the control plane and nodes.",
    )
    public_subnet_ids: list[str] = Field(
        default_factory=list, description="With existing_vpc_id: public subnets (for public load balancers)."
    )

    @field_validator("cidr", "pods_cidr")
    @classmethod
    def _network(cls, value: str) -> str:
        return _cidr(value)

    @model_validator(mode="after")
    def _existing(self) -> VpcConfig:
        if self.existing_vpc_id and len(self.private_subnet_ids) < 2:
            raise ValueError("existing_vpc_id needs at least two private_subnet_ids in different AZs")
        if not self.existing_vpc_id and (self.private_subnet_ids or self.public_subnet_ids):
            raise ValueError("subnet ids only apply together with existing_vpc_id")
        if not self.existing_vpc_id and ipaddress.ip_network(self.cidr).prefixlen > 21:
            raise ValueError(f"cidr {self.cidr} is too small: use a /21 or larger")
        return self


#: `llmctl up`'s setting of who reaches the EKS API: comma-separated CIDRs, or `private`
API_CIDRS_ENV = "LLMCTL_API_CIDRS"


class EndpointConfig(_Strict):
    """Who can reach the Kubernetes API server: nobody outside the VPC unless ranges are named."""

    public: bool = Field(
        False,
        description="Expose the API endpoint publicly, to `public_cidrs` only (required then); False (the "
        "default): private, reachable from inside the VPC (or a peered network / VPN) only.",
    )
    public_cidrs: list[str] = Field(
        default_factory=list,
        description="Source CIDRs allowed to reach the public endpoint (required when public): the "
        "addresses that run llmctl and kubectl, e.g. your office/VPN ranges or '<your address>/32'.",
    )

    @field_validator("public_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        return [_cidr(value) for value in values]

    @model_validator(mode="after")
    def _named_ranges(self) -> EndpointConfig:
        if self.public and not self.public_cidrs:
            raise ValueError(
                "a public endpoint needs public_cidrs (the ranges that run llmctl and kubectl, e.g. "
                "'203.0.113.7/32'); or set public to false (private)"
            )
        return self

    @classmethod
    def from_setting(cls, value: str) -> EndpointConfig:
        """`LLMCTL_API_CIDRS`: `private`, or comma-separated CIDRs for a public endpoint limited to them."""
        text = value.strip()
        if text.lower() == "private":
            return cls(public=False)
        try:
            return cls(public=True, public_cidrs=[part.strip() for part in text.split(",") if part.strip()])
        except ValidationError as exc:
            reason = str(exc.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
            raise BlueprintError(
                f"{API_CIDRS_ENV}={value!r}: {reason}",
                f"set {API_CIDRS_ENV} to comma-separated CIDRs such as 203.0.113.7/32, or to private",
            ) from None


class ObservabilityConfig(_Strict):
    """Metrics add-ons."""

    cloudwatch: bool = Field(True, description="Install the amazon-cloudwatch-observability EKS add-on.")
    neuron_metrics: bool = Field(
        True, description="Collect accelerator (Neuron/NVIDIA) metrics in that add-on."
    )
    metrics_server: bool = Field(
        True, description="Install the metrics-server EKS add-on (for HPA and `kubectl top`)."
    )


def _duration_s(value: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"([0-9]+)(s|m|h)", value))


class NodeExpiryConfig(_Strict):
    """How long Karpenter keeps a node before replacing it (NodePool `expireAfter`), per pool kind.

    Expiry is forceful in Karpenter v1: it replaces a node even when its pods carry
    `karpenter.sh/do-not-disrupt`, so an expiring serving node restarts its replica.
    """

    accelerator: str = Field(
        DEFAULT_EXPIRY["accelerator"],
        description="expireAfter of the Neuron and GPU pools (serving replicas): 'Never' or a duration "
        "such as '720h' (at least 1h).",
    )
    heads: str = Field(
        DEFAULT_EXPIRY["heads"],
        description="expireAfter of the ray-head pool (losing a head restarts the RayCluster): 'Never' or "
        "a duration (at least 1h).",
    )
    cpu: str = Field(
        DEFAULT_EXPIRY["cpu"],
        description="expireAfter of the general CPU pool (default): 'Never' or a duration (at least 1h).",
    )

    @field_validator("accelerator", "heads", "cpu")
    @classmethod
    def _expiry(cls, value: str) -> str:
        if not _EXPIRY.match(value):
            raise ValueError(f"{value!r} is not 'Never' or a duration like '720h' or '30m' (s, m, h)")
        if value != "Never" and _duration_s(value) < _MIN_EXPIRY_S:
            raise ValueError(f"{value!r} is shorter than 1h: nodes would be replaced while models still load")
        return value

    def for_pool(self, spec: PoolSpec) -> str:
        """The expireAfter of one Karpenter pool."""
        return str(getattr(self, spec.expiry_kind))


class CoreNodesConfig(_Strict):
    """The small managed node group for Ray heads and system pods."""

    instance_type: str = Field(
        default_factory=lambda: str(hardware().platform_fixed.core_nodes["instance_type"]),
        description="Instance type of the core nodes (default from the hardware catalog's platform_fixed).",
    )
    size: int = Field(
        default_factory=lambda: int(hardware().platform_fixed.core_nodes["count"]),
        ge=1,
        le=20,
        description="Desired (and minimum) number of core nodes.",
    )
    max_size: int = Field(4, ge=1, le=50, description="Maximum number of core nodes.")

    @model_validator(mode="after")
    def _bounds(self) -> CoreNodesConfig:
        if self.size > self.max_size:
            raise ValueError(f"size ({self.size}) is larger than max_size ({self.max_size})")
        return self


class PlatformConfig(_Strict):
    """One platform stack (one EKS cluster per environment)."""

    stack: str = Field("dev", description="Stack (environment) name, e.g. 'dev'.")
    cluster_name: str = Field("", description="EKS cluster name; empty means 'llmctl-<stack>'.")
    region: str = Field("us-west-2", description="AWS region, used explicitly by every AWS resource.")
    kubernetes_version: str = Field("", description="EKS Kubernetes version; empty means the pinned default.")
    pools: list[str] = Field(
        default_factory=lambda: list(ALWAYS_POOLS),
        description="Node pools to create (names from blueprints/pools.py); core, default and ray-head are always "
        "added.",
    )
    instance_types: list[str] = Field(
        default_factory=list,
        description="Accelerator instance types the AZs must offer (from the blueprints).",
    )
    az_ids: list[str] = Field(
        default_factory=list, description="Preferred AZ IDs in order; empty means the per-region default."
    )
    pinned_az_ids: list[str] = Field(
        default_factory=list,
        description="The AZ IDs the subnets are in, kept from the first `up` of the environment (empty: "
        "choose by instance offerings, then az_ids). Changing them replaces the subnets "
        "(`llmctl up --reselect-azs`).",
    )
    vpc: VpcConfig = Field(default_factory=VpcConfig, description="VPC options.")
    endpoint: EndpointConfig = Field(default_factory=EndpointConfig, description="API endpoint access.")
    core_nodes: CoreNodesConfig = Field(
        default_factory=CoreNodesConfig, description="Core managed node group."
    )
    node_expiry: NodeExpiryConfig = Field(
        default_factory=NodeExpiryConfig,
        description="NodePool expireAfter per pool kind (accelerator and ray-head pools: Never by default).",
    )
    observability: ObservabilityConfig = Field(
        default_factory=ObservabilityConfig, description="Observability toggles."
    )
    queue_scaling: bool = Field(
        False,
        description="Install KEDA, for workloads that scale a Deployment on its queue (set from the blueprints: "
        "scaling.signal queue on a Deployment runtime that autoscales).",
    )
    admin_principal_arns: list[str] = Field(
        default_factory=list,
        description="IAM principals given cluster-admin access entries. EKS already makes the identity that "
        "creates the cluster an admin: do not list that one (a second entry fails with ResourceInUseException).",
    )
    cache_force_destroy: bool = Field(
        True,
        description="Let `destroy` delete the cache bucket with its objects (weights can be re-downloaded).",
    )
    tags: dict[str, str] = Field(
        default_factory=dict, description="User tags added to every taggable AWS resource."
    )
    capacity_reservations: dict[str, CapacitySpec] = Field(
        default_factory=dict,
        description="EC2 capacity reservations per node pool (from the blueprints' `capacity`): the pool's "
        "EC2NodeClass selects them and its NodePool allows the `reserved` capacity type besides its own "
        "(a blueprint's `fallback: none` binds only its own pods, through their nodeSelector).",
    )
    root_volume_gib: dict[str, int] = Field(
        default_factory=dict,
        description="Root volume (GiB) per node pool where the blueprints' models do not fit the pool's default "
        "(from the blueprints: `pools.root_volumes_by_pool`); other pools keep theirs.",
    )

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        if value and not _CLUSTER_NAME.match(value):
            raise ValueError("use letters, digits and '-', starting with a letter, at most 38 characters")
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        # the shape first (cheap), then botocore's offline list of regions, with the closest name
        problem = (
            region_problem(value)
            if _REGION.match(value)
            else f"{value!r} is not an AWS region like 'us-west-2'"
        )
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("pools")
    @classmethod
    def _pools(cls, values: list[str]) -> list[str]:
        known = [spec.name for spec in POOLS]
        unknown = [value for value in values if value not in known]
        if unknown:
            raise ValueError(f"unknown pool(s) {', '.join(unknown)}; known: {', '.join(known)}")
        wanted = {*ALWAYS_POOLS, *values}
        return [name for name in known if name in wanted]

    @model_validator(mode="after")
    def _reserved_pools(self) -> PlatformConfig:
        for name in [*self.capacity_reservations, *self.root_volume_gib]:
            if name not in self.pools or pool(name).managed_by != "karpenter":
                raise ValueError(
                    f"capacity_reservations or root_volume_gib names pool {name!r}, which is not a Karpenter pool "
                    "of this platform "
                    f"(pools: {', '.join(self.pools)})"
                )
        return self

    @model_validator(mode="after")
    def _defaults(self) -> PlatformConfig:
        if not self.cluster_name:
            object.__setattr__(self, "cluster_name", f"llmctl-{self.stack}")
            if not _CLUSTER_NAME.match(self.cluster_name):
                raise ValueError(
                    f"stack name {self.stack!r} gives an invalid cluster name; use letters, digits and '-' "
                    "(at most 31 characters, starting with a letter), or set cluster_name"
                )
        if not self.kubernetes_version:
            object.__setattr__(self, "kubernetes_version", versions().eks.kubernetes_version.value)
        if not self.az_ids:
            object.__setattr__(self, "az_ids", list(DEFAULT_AZ_IDS.get(self.region, ())))
        if self.pinned_az_ids and len(set(self.pinned_az_ids)) != self.vpc.az_count:
            raise ValueError(
                f"pinned_az_ids {', '.join(self.pinned_az_ids)} must name {self.vpc.az_count} different AZ IDs "
                "(vpc.az_count)"
            )
        minor = ".".join(self.kubernetes_version.split(".")[:2])
        pinned = versions().kube_scheduler
        if minor not in pinned and any(pool(name).accelerator in NEURON_ACCELERATORS for name in self.pools):
            raise ValueError(
                f"kubernetes_version {self.kubernetes_version}: no Neuron custom scheduler (kube-scheduler) "
                f"is pinned for it; pinned minors: {', '.join(sorted(pinned))} "
                "(add one under `kube_scheduler` in blueprints/data/versions.yaml)"
            )
        return self

    def addons(self) -> list[Addon]:
        """The add-ons this platform installs: the rows of the add-on registry
        (:mod:`llmctl.infra.platform.addons`) whose install condition holds, in registry order."""
        return installed_addons(
            {pool(name).accelerator for name in self.pools},
            cloudwatch=self.observability.cloudwatch,
            metrics_server=self.observability.metrics_server,
            queue_scaling=self.queue_scaling,
        )

    def chart_keys(self) -> list[str]:
        """Keys (in `versions.yaml` charts) of the Helm charts this platform installs."""
        return [row.key for row in self.addons() if row.kind == "chart"]

    @classmethod
    def for_blueprints(
        cls,
        blueprints: Iterable[Blueprint],
        *,
        stack: str = "dev",
        region: str = "us-west-2",
        all_pools: bool = False,
        **overrides: Any,
    ) -> PlatformConfig:
        """The platform some blueprints need: their pools and the AZs that offer their instances."""
        chosen = list(blueprints)
        pools = [spec.name for spec in pools_for(chosen, hardware(), all_pools=all_pools)]
        instance_types = sorted(
            {bp.compute.instance_type for bp in chosen if bp.compute.accelerator != "cpu"}
        )
        data: dict[str, Any] = {
            "stack": stack,
            "region": region,
            "pools": pools,
            "instance_types": instance_types,
            **merge_needs(blueprint_needs(bp) for bp in chosen).settings(),
        }
        if all_pools:  # a platform ready for any blueprint, KEDA included
            data["queue_scaling"] = True
        data.update(overrides)
        return validate_config(data, source="platform settings")

    def to_pulumi_config(self) -> dict[str, str]:
        """Stack config (`pulumi config set` keys and values) that rebuilds this config."""
        data = self.model_dump(mode="json")
        out = {"aws:region": self.region}
        for key, value in data.items():
            out[f"{PROJECT}:{key}"] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return out

    @classmethod
    def from_pulumi_config(cls, values: Mapping[str, str] | None = None) -> PlatformConfig:
        """Read the config from the running Pulumi stack (or from `values`, keys as in to_pulumi_config)."""
        if values is None:
            values = _read_stack_config()
        data: dict[str, Any] = {}
        for key, raw in values.items():
            namespace, _, name = key.partition(":")
            if namespace != PROJECT or name not in cls.model_fields:
                continue
            data[name] = raw if cls.model_fields[name].annotation is str else _json(key, raw)
        if "region" not in data and values.get("aws:region"):
            data["region"] = values["aws:region"]
        return validate_config(data, source="Pulumi stack config")


def _json(key: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise BlueprintError(
            f"stack config {key} is not valid JSON: {raw!r}",
            f"set it with `pulumi config set {key} '<json>'`",
        ) from None


def _read_stack_config() -> dict[str, str]:
    import pulumi

    values: dict[str, str] = {}
    project = pulumi.Config(PROJECT)
    for name in PlatformConfig.model_fields:
        raw = project.get(name)
        if raw is not None:
            values[f"{PROJECT}:{name}"] = raw
    region = pulumi.Config("aws").get("region")
    if region:
        values["aws:region"] = region
    return values


def validate_config(data: Mapping[str, Any], *, source: str) -> PlatformConfig:
    """Validate settings, turning pydantic errors into a BlueprintError with field paths."""
    try:
        return PlatformConfig.model_validate(dict(data))
    except ValidationError as exc:
        problems = [
            (".".join(str(p) for p in err["loc"]) or "(root)", str(err["msg"]).removeprefix("Value error, "))
            for err in exc.errors(include_url=False)
        ]
        raise BlueprintError(
            f"invalid platform config in {source}",
            "fix the fields listed (see docs/platform.md for every key)",
            source=source,
            problems=problems,
        ) from None
