"""What pods can request on one node of an instance type, computed as the pinned Karpenter does.

Karpenter decides whether a pending pod fits a not-yet-launched node from the instance type's
data, never from a real node: it subtracts a VM overhead from the memory, then kube-reserved,
system-reserved and the eviction threshold, then the requests of the DaemonSets that would land on
the node. A pod that asks for more than that waits forever ("no instance type satisfied
resources"), so `llmctl validate`, the builders' request sizing, `llmctl size` and the
schedulability report all use this one module. Every term, and the Karpenter source lines it comes
from, is in ``data/karpenter.yaml``; docs/platform.md works an example through.

Units follow Karpenter: memory in MiB, CPU in millicores, each term rounded as Karpenter rounds it.
The catalog and the NodePools are amd64 only, so the 64 MiB Graviton term of ``memory()`` is left
out.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmctl.blueprints._data import load_yaml
from llmctl.blueprints.hardware import Instance

MIB = 1024**2
GIB_MIB = 1024


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ControllerSettings(_Strict):
    """The Karpenter controller settings that change its arithmetic (passed to the chart)."""

    vm_memory_overhead_percent: float = Field(
        ge=0, lt=1, description="VM_MEMORY_OVERHEAD_PERCENT: share of memory assumed lost to the hypervisor."
    )
    reserved_enis: int = Field(ge=0, description="RESERVED_ENIS: ENIs left out of the max-pods count.")
    reserved_capacity_gate: bool = Field(
        description="featureGates.reservedCapacity (ODCRs, capacity blocks)."
    )


class KarpenterDefaults(_Strict):
    """What Karpenter assumes when the EC2NodeClass has no kubelet block."""

    eviction_memory_mib: int = Field(ge=0, description="Hard eviction threshold for memory, MiB.")
    max_pods_without_eni_data: int = Field(ge=1, description="Max pods when the ENI limits are unknown.")


class DaemonSetSpec(_Strict):
    """One DaemonSet the platform installs, with one pod's requests."""

    name: str = Field(description="DaemonSet name.")
    from_: str = Field(alias="from", description="What installs it (an EKS add-on or a chart).")
    lands_on: Literal["all", "neuron", "nvidia"] = Field(description="Which nodes its pods land on.")
    needs: Literal["cloudwatch"] | None = Field(None, description="Platform setting that installs it.")
    cpu_m: int = Field(ge=0, description="CPU requests of one pod, millicores.")
    memory_mi: int = Field(ge=0, description="Memory requests of one pod, MiB.")
    source: str = Field(description="Where the requests were read.")
    note: str = Field("", description="Caveats about the source.")

    def counts_on(self, instance: Instance) -> bool:
        """Whether Karpenter counts this DaemonSet on a node of this instance type."""
        if self.lands_on == "neuron":
            return instance.neuron_cores > 0
        if self.lands_on == "nvidia":
            return instance.accelerator == "nvidia"
        return True


class KarpenterModel(_Strict):
    """The contents of ``data/karpenter.yaml``."""

    source: dict[str, object] = Field(description="Repository, commit and the source line of each term.")
    controller: ControllerSettings
    defaults: KarpenterDefaults
    daemonsets: list[DaemonSetSpec]


@functools.lru_cache(maxsize=1)
def karpenter_model() -> KarpenterModel:
    """The shipped Karpenter model (controller settings, defaults, DaemonSets)."""
    return KarpenterModel.model_validate(load_yaml("data", "karpenter.yaml"))


@dataclass(frozen=True)
class KubeletSettings:
    """The EC2NodeClass `spec.kubelet` fields that change allocatable (llmctl sets none)."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard_memory: str | None = None  # memory.available: a quantity ('500Mi') or a percent ('5%')


@dataclass(frozen=True)
class DaemonSetShare:
    """One DaemonSet's requests on a node."""

    name: str
    cpu_m: int
    memory_mib: int


@dataclass(frozen=True)
class NodeAllocatable:
    """Karpenter's view of one node: capacity, each overhead term, and what is left for pods."""

    instance: str
    capacity_cpu_m: int
    memory_mib: int  # the instance's memory (DescribeInstanceTypes SizeInMiB)
    vm_overhead_mib: int
    max_pods: int
    kube_reserved_cpu_m: int
    kube_reserved_memory_mib: int
    system_reserved_cpu_m: int
    system_reserved_memory_mib: int
    eviction_memory_mib: int
    daemonsets: tuple[DaemonSetShare, ...] = ()

    @property
    def capacity_memory_mib(self) -> int:
        """Memory capacity Karpenter assumes: the instance's memory less the VM overhead."""
        return self.memory_mib - self.vm_overhead_mib

    @property
    def karpenter_cpu_m(self) -> int:
        """Allocatable CPU before DaemonSets (Karpenter's InstanceType.Allocatable())."""
        return self.capacity_cpu_m - self.kube_reserved_cpu_m - self.system_reserved_cpu_m

    @property
    def karpenter_memory_mib(self) -> int:
        """Allocatable memory before DaemonSets (Karpenter's InstanceType.Allocatable())."""
        return (
            self.capacity_memory_mib
            - self.kube_reserved_memory_mib
            - self.system_reserved_memory_mib
            - self.eviction_memory_mib
        )

    @property
    def daemonset_cpu_m(self) -> int:
        """CPU requests of the DaemonSets on this node."""
        return sum(d.cpu_m for d in self.daemonsets)

    @property
    def daemonset_memory_mib(self) -> int:
        """Memory requests of the DaemonSets on this node."""
        return sum(d.memory_mib for d in self.daemonsets)

    @property
    def cpu_m(self) -> int:
        """CPU one pod can request: allocatable less the DaemonSets."""
        return self.karpenter_cpu_m - self.daemonset_cpu_m

    @property
    def pod_memory_mib(self) -> int:
        """Memory one pod can request: allocatable less the DaemonSets."""
        return self.karpenter_memory_mib - self.daemonset_memory_mib

    def as_dict(self) -> dict[str, object]:
        """Stable keys for `--json` and reports."""
        return {
            "instance": self.instance,
            "memory_mib": self.memory_mib,
            "vm_overhead_mib": self.vm_overhead_mib,
            "max_pods": self.max_pods,
            "kube_reserved": {"cpu_m": self.kube_reserved_cpu_m, "memory_mib": self.kube_reserved_memory_mib},
            "system_reserved": {
                "cpu_m": self.system_reserved_cpu_m,
                "memory_mib": self.system_reserved_memory_mib,
            },
            "eviction_memory_mib": self.eviction_memory_mib,
            "karpenter_allocatable": {"cpu_m": self.karpenter_cpu_m, "memory_mib": self.karpenter_memory_mib},
            "daemonsets": {d.name: {"cpu_m": d.cpu_m, "memory_mib": d.memory_mib} for d in self.daemonsets},
            "pod_allocatable": {"cpu_m": self.cpu_m, "memory_mib": self.pod_memory_mib},
        }


# --- the terms, one function each (data/karpenter.yaml names the source lines) --------------------------


def memory_mib(instance: Instance) -> int:
    """The instance's memory in MiB, as DescribeInstanceTypes reports it."""
    return round(instance.memory_gib * GIB_MIB)


def vm_overhead_mib(memory: int, percent: float) -> int:
    """``memory()``: ceil(bytes x percent / 1 MiB), in the same float order as Karpenter."""
    return math.ceil(float(memory * MIB) * percent / 1024 / 1024)


def eni_limited_pods(instance: Instance, reserved_enis: int) -> int | None:
    """``ENILimitedPods()``: (ENIs - reserved) x (IPv4 per ENI - 1) + 2; None without ENI data."""
    if instance.enis is None or instance.ipv4_per_eni is None:
        return None
    usable = max(instance.enis - reserved_enis, 0)
    if usable == 0:
        return 0
    return usable * (instance.ipv4_per_eni - 1) + 2


def max_pods(
    instance: Instance, settings: ControllerSettings, defaults: KarpenterDefaults, kubelet: KubeletSettings
) -> int:
    """``pods()`` for AL2023: kubelet maxPods, else the ENI-limited count, capped by podsPerCore."""
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    else:
        eni = eni_limited_pods(instance, settings.reserved_enis)
        count = defaults.max_pods_without_eni_data if eni is None else eni
    if kubelet.pods_per_core:
        count = min(kubelet.pods_per_core * instance.vcpu, count)
    return count


def kube_reserved_cpu_m(cpu_m: int) -> int:
    """``kubeReservedResources()`` CPU: 6 % / 1 % / 0.5 % / 0.25 % of successive core ranges."""
    total = 0
    for start, end, share in (
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ):
        if cpu_m >= start:
            span = float(min(cpu_m, end) - start)
            total += int(span * share)
    return total


def kube_reserved_memory_mib(pods: int) -> int:
    """``kubeReservedResources()`` memory: 11 MiB per pod + 255 MiB."""
    return 11 * pods + 255


_SUFFIX_MIB = {
    "Ki": 1 / 1024,
    "Mi": 1.0,
    "Gi": 1024.0,
    "Ti": 1024.0**2,
    "k": 1e3 / MIB,
    "M": 1e6 / MIB,
    "G": 1e9 / MIB,
}


def quantity_mib(value: str) -> float:
    """A memory quantity ('500Mi', '1Gi', '1G', bytes) in MiB."""
    text = value.strip()
    for suffix in sorted(_SUFFIX_MIB, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIX_MIB[suffix]
    return float(text) / MIB


def quantity_milli(value: str) -> int:
    """A CPU quantity ('500m', '1') in millicores."""
    text = value.strip()
    return int(text[:-1]) if text.endswith("m") else round(float(text) * 1000)


def eviction_memory_mib(capacity_mib: int, eviction_hard: str | None, default: int) -> float:
    """``evictionThreshold()`` memory: 100 MiB, or memory.available as a quantity or a percent of capacity."""
    if eviction_hard is None:
        return float(default)
    if eviction_hard.endswith("%"):
        percent = float(eviction_hard[:-1])
        percent = 0.0 if percent == 100 else percent
        return math.ceil(capacity_mib * MIB / 100 * percent) / MIB
    return quantity_mib(eviction_hard)


def daemonsets_on(instance: Instance, *, cloudwatch: bool = True) -> tuple[DaemonSetShare, ...]:
    """The platform's DaemonSets whose pods Karpenter counts on a node of this instance type."""
    return tuple(
        DaemonSetShare(ds.name, ds.cpu_m, ds.memory_mi)
        for ds in karpenter_model().daemonsets
        if ds.counts_on(instance) and (ds.needs != "cloudwatch" or cloudwatch) and (ds.cpu_m or ds.memory_mi)
    )


def node_allocatable(
    instance: Instance,
    *,
    kubelet: KubeletSettings | None = None,
    daemonsets: Iterable[DaemonSetShare] | None = None,
    settings: ControllerSettings | None = None,
) -> NodeAllocatable:
    """Karpenter's allocatable for one node of an instance type (AL2023, llmctl's controller settings).

    `daemonsets` defaults to the platform's (with CloudWatch observability on, its default);
    pass ``()`` for Karpenter's own figure before DaemonSets.
    """
    model = karpenter_model()
    settings = settings or model.controller
    kubelet = kubelet or KubeletSettings()
    memory = memory_mib(instance)
    overhead = vm_overhead_mib(memory, settings.vm_memory_overhead_percent)
    capacity_cpu = instance.vcpu * 1000
    pods = max_pods(instance, settings, model.defaults, kubelet)
    # AL2023 sizes kube-reserved memory from the ENI-limited pods with no reserved ENIs (types.go:305)
    reserved_pods = eni_limited_pods(instance, 0)
    reserved_cpu = kube_reserved_cpu_m(capacity_cpu)
    reserved_memory = kube_reserved_memory_mib(pods if reserved_pods is None else reserved_pods)
    if "cpu" in kubelet.kube_reserved:
        reserved_cpu = quantity_milli(kubelet.kube_reserved["cpu"])
    if "memory" in kubelet.kube_reserved:
        reserved_memory = math.ceil(quantity_mib(kubelet.kube_reserved["memory"]))
    eviction = eviction_memory_mib(
        memory - overhead, kubelet.eviction_hard_memory, model.defaults.eviction_memory_mib
    )
    return NodeAllocatable(
        instance=instance.name,
        capacity_cpu_m=capacity_cpu,
        memory_mib=memory,
        vm_overhead_mib=overhead,
        max_pods=pods,
        kube_reserved_cpu_m=reserved_cpu,
        kube_reserved_memory_mib=reserved_memory,
        system_reserved_cpu_m=quantity_milli(kubelet.system_reserved.get("cpu", "0")),
        system_reserved_memory_mib=math.ceil(quantity_mib(kubelet.system_reserved.get("memory", "0"))),
        eviction_memory_mib=math.ceil(eviction),
        daemonsets=tuple(daemonsets_on(instance) if daemonsets is None else daemonsets),
    )
