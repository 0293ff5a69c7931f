"""The hardware catalog: EC2 instance types and accelerator families as typed rows.

The rows ship in ``data/instances.yaml`` and ``data/accelerators.yaml``; `llmctl catalog refresh`
writes an overlay (live specs and prices from EC2 and the Pricing API) into the user's state
directory, and rows there replace the shipped ones by name.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llmctl.blueprints._data import load_yaml
from llmctl.blueprints.schema import Accelerator
from llmctl.errors import CatalogError, did_you_mean

PricingModel = Literal["on-demand", "reserved-3y", "spot"]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Instance(_Row):
    """One EC2 instance type."""

    name: str = Field(description="EC2 instance type, e.g. 'inf2.48xlarge'.")
    family: str = Field(description="Instance family, e.g. 'inf2'.")
    accelerator: Accelerator = Field(description="Accelerator family, or 'cpu'.")
    accelerator_name: str | None = Field(
        None, description="Marketing name of the accelerator (A10G, Inferentia2, ...)."
    )
    accelerator_count: int = Field(0, ge=0, description="Accelerator devices (Neuron chips or GPUs).")
    accelerator_memory_gib: float = Field(0, ge=0, description="Memory per accelerator device, GiB.")
    neuron_cores: int = Field(0, ge=0, description="NeuronCores on the instance (0 for non-Neuron).")
    vcpu: int = Field(ge=1, description="vCPUs.")
    memory_gib: float = Field(gt=0, description="Host memory, GiB.")
    enis: int | None = Field(
        None, ge=1, description="ENIs of the default network card (Karpenter's ENI-limited max pods)."
    )
    ipv4_per_eni: int | None = Field(
        None, ge=1, description="IPv4 addresses per ENI (Karpenter's ENI-limited max pods)."
    )
    efa_interfaces: int = Field(
        0,
        ge=0,
        description="EFA interfaces the instance takes (DescribeInstanceTypes EfaInfo.MaximumEfaInterfaces; 0: "
        "no EFA). A multi-node replica's pods request this many `vpc.amazonaws.com/efa` each.",
    )
    network_gbps: float | None = Field(
        None,
        gt=0,
        description="Network bandwidth of the instance, Gbit/s (what EFA can carry between nodes).",
    )
    on_demand_usd: float = Field(ge=0, description="On-demand price, USD per hour.")
    reserved_3y_usd: float | None = Field(
        None, ge=0, description="Effective 3-year reserved price, USD per hour."
    )
    spot_usd: float | None = Field(
        None, ge=0, description="Recent spot price, USD per hour (from a refresh)."
    )
    price_note: str | None = Field(
        None, description="Where the price comes from when not us-east-1 on-demand."
    )

    @property
    def parallel_units(self) -> int:
        """What a tensor-parallel degree counts on this instance: NeuronCores, GPUs, or 1 for CPU."""
        if self.neuron_cores:
            return self.neuron_cores
        return self.accelerator_count or 1

    @property
    def cores_per_device(self) -> int:
        """NeuronCores per Neuron chip (0 when not a Neuron instance)."""
        return self.neuron_cores // self.accelerator_count if self.neuron_cores else 0

    def price(self, pricing: PricingModel) -> float | None:
        """Hourly price under a pricing model, or None when the catalog has no figure for it."""
        if pricing == "on-demand":
            return self.on_demand_usd
        if pricing == "reserved-3y":
            return self.reserved_3y_usd
        return self.spot_usd


class QuotaRef(_Row):
    """An EC2 Service Quotas entry (counted in vCPUs)."""

    code: str = Field(description="Service Quotas code, e.g. 'L-1945791B'.")
    name: str = Field(description="Quota name as shown in the console.")


class AcceleratorInfo(_Row):
    """Facts about one accelerator family."""

    name: Accelerator = Field(description="The family's name (its key in accelerators.yaml).")
    kind: Literal["neuron", "gpu", "cpu"] = Field(description="neuron, gpu or cpu.")
    memory_per_core_gb: float | None = Field(
        None, description="Accelerator memory per NeuronCore, GB (Neuron only)."
    )
    tp_degrees: list[int] = Field(description="Tensor-parallel degrees the serving engines accept.")
    tp_degrees_transformers_neuronx: list[int] = Field(
        default_factory=list, description="Degrees transformers-neuronx accepts (it also allowed 12 on inf2)."
    )
    device_resource: str | None = Field(None, description="Kubernetes extended resource for whole devices.")
    core_resource: str | None = Field(None, description="Kubernetes extended resource for NeuronCores.")
    taint: str | None = Field(None, description="Taint key the platform puts on this family's NodePool.")
    quota: QuotaRef | None = Field(None, description="On-demand vCPU quota for the family.")
    spot_quota: QuotaRef | None = Field(None, description="Spot vCPU quota for the family.")
    quota_by_family: dict[str, QuotaRef] = Field(
        default_factory=dict, description="Quota per instance-family initial letter (GPUs: g or p)."
    )

    @property
    def runtimes(self) -> list[str]:
        """Runtimes that can serve on this accelerator (from the runtime registry)."""
        from llmctl.blueprints.runtimes import runtimes_on

        return runtimes_on(self.name)


class SoftwareRange(_Row):
    """Neuron SDK / vLLM versions that run on some instance families."""

    sdk_min: str | None = Field(None, description="Lowest Neuron SDK version (inclusive).")
    sdk_max: str | None = Field(None, description="Highest Neuron SDK version (inclusive, on major.minor).")
    vllm_min: str | None = Field(None, description="Lowest vLLM version (inclusive).")
    vllm_max: str | None = Field(None, description="Highest vLLM version (inclusive, on major.minor).")
    families: list[str] = Field(description="Instance families this range supports.")
    note: str = Field("", description="Why the range exists.")


class PlatformFixed(_Row):
    """The fixed hourly cost of a platform before any serving node."""

    eks_control_plane_usd: float = Field(description="EKS control plane, USD per hour.")
    nat_gateway_usd: float = Field(description="One NAT gateway, USD per hour.")
    core_nodes: dict[str, str | int] = Field(description="The core node group: instance_type and count.")


def version_tuple(version: str) -> tuple[int, ...]:
    """'2.21.1' -> (2, 21, 1)."""
    return tuple(int(part) for part in version.split("."))


def in_range(version: str, low: str | None, high: str | None) -> bool:
    """Whether version lies in [low, high]; `high` is compared on as many parts as it has."""
    parts = version_tuple(version)
    if low is not None and parts < version_tuple(low):
        return False
    if high is not None:
        upper = version_tuple(high)
        if parts[: len(upper)] > upper:
            return False
    return True


class HardwareCatalog:
    """Instances, accelerator families, Neuron software ranges and platform fixed cost."""

    def __init__(
        self,
        instances: list[Instance],
        accelerators: dict[str, AcceleratorInfo],
        neuron_software: dict[str, list[SoftwareRange]],
        platform_fixed: PlatformFixed,
    ) -> None:
        self.instances = {row.name: row for row in instances}
        self.accelerators = accelerators
        self.neuron_software = neuron_software
        self.platform_fixed = platform_fixed

    def instance(self, name: str) -> Instance:
        """Look up an instance type; unknown names get a did-you-mean."""
        row = self.instances.get(name)
        if row is None:
            suggestion = did_you_mean(name, self.instances)
            raise CatalogError(
                f"unknown instance type {name!r}" + (f"; {suggestion}" if suggestion else ""),
                "run `llmctl catalog instances` for the known types, or `llmctl catalog refresh` to add live ones",
            )
        return row

    def accelerator(self, name: str) -> AcceleratorInfo:
        """Look up an accelerator family."""
        info = self.accelerators.get(name)
        if info is None:
            suggestion = did_you_mean(name, self.accelerators)
            raise CatalogError(
                f"unknown accelerator {name!r}" + (f"; {suggestion}" if suggestion else ""),
                f"choose one of: {', '.join(self.accelerators)}",
            )
        return info

    def of_accelerator(self, accelerator: str) -> list[Instance]:
        """Every instance of one accelerator family, cheapest first."""
        rows = [row for row in self.instances.values() if row.accelerator == accelerator]
        return sorted(rows, key=lambda row: (row.on_demand_usd, row.name))

    def quota_for(self, instance: Instance, spot: bool = False) -> QuotaRef | None:
        """The EC2 vCPU quota that limits launching this instance type."""
        info = self.accelerator(instance.accelerator)
        if info.quota_by_family:
            return info.quota_by_family.get(instance.family[0])
        return info.spot_quota if spot and info.spot_quota else info.quota

    def core_node_hourly(self) -> float:
        """Hourly price of the platform's core node group."""
        row = self.instance(str(self.platform_fixed.core_nodes["instance_type"]))
        return row.on_demand_usd * int(self.platform_fixed.core_nodes["count"])

    def platform_hourly(self) -> float:
        """Fixed hourly cost of one platform: control plane, NAT and core nodes."""
        fixed = self.platform_fixed
        return fixed.eks_control_plane_usd + fixed.nat_gateway_usd + self.core_node_hourly()


def overlay_path() -> Path:
    """Where `llmctl catalog refresh` writes live instance rows."""
    from llmctl.state import state_dir

    return state_dir() / "catalog" / "instances.yaml"


@functools.lru_cache(maxsize=4)
def load_hardware(overlay: Path | None = None) -> HardwareCatalog:
    """The shipped catalog, with rows from an overlay file (a refresh) replacing shipped ones."""
    shipped = load_yaml("data", "instances.yaml")
    rows = {row["name"]: row for row in shipped["instances"]}
    if overlay is not None and overlay.exists():
        extra = yaml.safe_load(overlay.read_text(encoding="utf-8")) or {}
        for row in extra.get("instances", []):
            rows[row["name"]] = {**rows.get(row["name"], {}), **row}
    accel = load_yaml("data", "accelerators.yaml")
    return HardwareCatalog(
        instances=[Instance.model_validate(row) for row in rows.values()],
        accelerators={
            k: AcceleratorInfo.model_validate({"name": k, **v}) for k, v in accel["accelerators"].items()
        },
        neuron_software={
            k: [SoftwareRange.model_validate(r) for r in v] for k, v in accel["neuron_software"].items()
        },
        platform_fixed=PlatformFixed.model_validate(accel["platform_fixed"]),
    )


def hardware() -> HardwareCatalog:
    """The catalog in effect: shipped rows plus the user's refresh overlay, if any. Without an
    overlay every state dir shares one cached catalog (each command asks several times)."""
    overlay = overlay_path()
    return load_hardware(overlay if overlay.exists() else None)


def ceil_div(a: float, b: float) -> int:
    """Ceiling of a / b for positive numbers, robust to float noise."""
    return max(1, math.ceil(round(a / b, 9)))
