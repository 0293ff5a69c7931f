"""What one node can hold, and quantity parsing.

Shared by the builders (which size requests so a pod fits with headroom) and the schedulability
check (which compares requests with one node), so both use the same arithmetic: Karpenter's, from
:mod:`llmctl.blueprints.allocatable` (VM overhead, kube-reserved, eviction threshold and the
requests of the platform's DaemonSets on that instance type). On an inf2.48xlarge that leaves
190.7 vCPU / 701.8 GiB; on an m5.xlarge 3.44 vCPU / 13.58 GiB.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmctl.blueprints.allocatable import node_allocatable
from llmctl.blueprints.hardware import HardwareCatalog, Instance

NEURON_DEVICE = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
NVIDIA_GPU = "nvidia.com/gpu"
# The EFA device plugin's resource (aws/eks-charts stable/aws-efa-k8s-device-plugin): one per EFA
# interface Karpenter attaches (it attaches the instance type's maximum when a pod requests any)
EFA_DEVICE = "vpc.amazonaws.com/efa"
CHECKED_RESOURCES = ("cpu", "memory", NEURON_DEVICE, NEURON_CORE, NVIDIA_GPU, EFA_DEVICE)
GIB = 1024**3


@dataclass(frozen=True)
class Allocatable:
    """What pods can request on one node of an instance type."""

    instance: str
    cpu: float
    memory_gib: float
    neuron_devices: int
    neuron_cores: int
    gpus: int
    efa: int = 0

    def of(self, resource: str) -> float:
        """Allocatable amount of a checked resource (memory in bytes)."""
        return {
            "cpu": self.cpu,
            "memory": self.memory_gib * GIB,
            NEURON_DEVICE: float(self.neuron_devices),
            NEURON_CORE: float(self.neuron_cores),
            NVIDIA_GPU: float(self.gpus),
            EFA_DEVICE: float(self.efa),
        }[resource]


def allocatable(instance: Instance) -> Allocatable:
    """What one pod can request on a node: Karpenter's allocatable less the platform's DaemonSets."""
    neuron = instance.neuron_cores > 0
    node = node_allocatable(instance)
    return Allocatable(
        instance=instance.name,
        cpu=node.cpu_m / 1000,
        memory_gib=node.pod_memory_mib / 1024,
        neuron_devices=instance.accelerator_count if neuron else 0,
        neuron_cores=instance.neuron_cores,
        gpus=instance.accelerator_count if instance.accelerator == "nvidia" else 0,
        efa=instance.efa_interfaces,
    )


def instance_types(catalog: HardwareCatalog, families: list[str], names: list[str]) -> list[Instance]:
    """Catalog rows of exact names, or of every type in some families."""
    if names:
        return [catalog.instance(name) for name in names]
    return sorted(
        (row for row in catalog.instances.values() if row.family in families),
        key=lambda row: (row.vcpu, row.name),
    )


# Kubernetes' quantity grammar (k8s.io/apimachinery pkg/api/resource/quantity.go): a number
# (`1`, `1.5`, `1.`, `.5`) then a binary suffix, a decimal suffix or a decimal exponent (`e3`, `E-2`).
# A sign is part of the grammar; a request cannot be negative, so only `+` is read.
_QUANTITY = re.compile(r"^\+?([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+)|([a-zA-Z]*))$")
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1000.0**6,  # not 1e18: past 2**53, 1e18 + 1 is 1e18, so a change to the literal could go unseen
    "Ki": 1024.0,
    "Mi": 1024.0**2,
    "Gi": 1024.0**3,
    "Ti": 1024.0**4,
    "Pi": 1024.0**5,
    "Ei": 1024.0**6,
}


def parse_quantity(value: str | int | float) -> float:
    """A Kubernetes quantity ('500m', '16Gi', '2', '1e3') as a number (bytes for memory)."""
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or (match.group(2) is None and match.group(3) not in _SUFFIX):
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    number, exponent, suffix = match.groups()
    if exponent is not None:
        return float(f"{number}e{exponent}")
    return float(number) * _SUFFIX[suffix]


def cpu_quantity(vcpus: float) -> str:
    """vCPUs as a quantity, rounded down to 100m."""
    milli = math.floor(vcpus * 10) * 100
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def memory_quantity(gib: float) -> str:
    """GiB as a quantity, rounded down to 256 MiB (to whole GiB from 16 GiB up)."""
    if gib >= 16:
        return f"{math.floor(gib)}Gi"
    mib = math.floor(gib * 4) * 256
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def format_amount(resource: str, amount: float) -> str:
    """A request amount for messages ('12', '7.5 GiB', '1.5')."""
    if resource == "memory":
        return f"{amount / GIB:g} GiB"
    return f"{amount:g}"
