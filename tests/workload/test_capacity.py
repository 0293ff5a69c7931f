"""The node arithmetic both the builders and the schedulability check use (infra/workload/scheduling/capacity.py):
Kubernetes quantities both ways, one node's allocatable per resource, instance selection. The
expected numbers are worked out by hand here (and the allocatable ones recorded in the module's
docstring from Karpenter's formula), not computed with the functions under test."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.scheduling.capacity import (
    NEURON_CORE,
    NEURON_DEVICE,
    NVIDIA_GPU,
    Allocatable,
    allocatable,
    cpu_quantity,
    format_amount,
    instance_types,
    memory_quantity,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", 2.0),
        ("500m", 0.5),
        ("1k", 1000.0),
        ("3M", 3_000_000.0),
        ("2G", 2_000_000_000.0),
        ("1T", 1_000_000_000_000.0),
        ("1Ki", 1024.0),
        ("2Mi", 2_097_152.0),
        ("16Gi", 17_179_869_184.0),
        ("1Ti", 1_099_511_627_776.0),
        (" 4 ", 4.0),
        ("0.5Gi", 536_870_912.0),
        # the rest of Kubernetes' grammar (refused before: found by test_capacity_properties.py)
        ("1P", 1e15),
        ("1Pi", 2.0**50),
        ("1E", 1e18),
        ("1Ei", 2.0**60),
        ("1e3", 1000.0),
        ("15E-1", 1.5),
        ("+2", 2.0),
        (7, 7.0),
        (1.5, 1.5),
    ],
)
def test_a_quantity_is_read_with_its_suffix(text: str | int | float, value: float) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["4Xi", "abc", "", "-1", "1 Gi"])
def test_what_is_not_a_quantity_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("vcpus", "quantity"),
    [
        (4.0, "4"),
        (2.0, "2"),
        (3.44, "3400m"),
        (1.99, "1900m"),
        (0.05, "0"),
        (190.7, "190700m"),
        (10.0, "10"),
        (999.0, "999"),
        (1000.0, "1000"),
    ],
)
def test_cpu_is_rounded_down_to_100m(vcpus: float, quantity: str) -> None:
    assert cpu_quantity(vcpus) == quantity


@pytest.mark.parametrize(
    ("gib", "quantity"),
    [
        (16.0, "16Gi"),
        (701.8, "701Gi"),
        (16.9, "16Gi"),
        (15.99, "16128Mi"),  # below 16 GiB: down to 256 MiB, 63 x 256
        (13.58, "13824Mi"),
        (15.0, "15Gi"),
        (2.0, "2Gi"),
        (0.3, "256Mi"),
    ],
)
def test_memory_is_rounded_down_to_256_mib_or_whole_gib_from_16(gib: float, quantity: str) -> None:
    assert memory_quantity(gib) == quantity


def test_amounts_in_messages() -> None:
    assert format_amount("memory", 7.5 * 1024**3) == "7.5 GiB"
    assert format_amount("cpu", 12.0) == "12"
    assert format_amount(NEURON_DEVICE, 1.5) == "1.5"


def test_allocatable_of_each_resource_memory_in_bytes() -> None:
    node = Allocatable("x", cpu=3.5, memory_gib=2.0, neuron_devices=3, neuron_cores=6, gpus=4)
    assert [node.of(r) for r in ("cpu", "memory", NEURON_DEVICE, NEURON_CORE, NVIDIA_GPU)] == [
        3.5,
        2.0 * 1024**3,
        3.0,
        6.0,
        4.0,
    ]
    with pytest.raises(KeyError):
        node.of("ephemeral-storage")
    with pytest.raises(FrozenInstanceError):
        node.cpu = 1.0  # type: ignore[misc]
    assert {node: 1}[Allocatable("x", 3.5, 2.0, 3, 6, 4)] == 1


def test_allocatable_counts_neuron_devices_only_on_neuron_and_gpus_only_on_nvidia() -> None:
    catalog = hardware()
    inf2 = allocatable(catalog.instance("inf2.48xlarge"))
    assert (inf2.neuron_devices, inf2.neuron_cores, inf2.gpus) == (12, 24, 0)
    assert inf2.cpu == pytest.approx(190.7, abs=0.05) and inf2.memory_gib == pytest.approx(701.8, abs=0.05)
    gpu = allocatable(catalog.instance("g5.12xlarge"))
    assert (gpu.neuron_devices, gpu.neuron_cores, gpu.gpus) == (0, 0, 4)
    cpu = allocatable(catalog.instance("m5.xlarge"))
    assert (cpu.instance, cpu.neuron_devices, cpu.neuron_cores, cpu.gpus) == ("m5.xlarge", 0, 0, 0)
    assert cpu.cpu == pytest.approx(3.44, abs=0.005) and cpu.memory_gib == pytest.approx(13.58, abs=0.005)


def test_one_neuron_core_is_enough_to_count_the_devices() -> None:
    single = hardware().instance("inf2.xlarge").model_copy(update={"neuron_cores": 1})
    node = allocatable(single)
    assert (node.neuron_devices, node.neuron_cores, node.gpus) == (single.accelerator_count, 1, 0)
    assert node.neuron_devices == 1


def test_instance_types_by_name_in_the_order_given_or_by_family_smallest_first() -> None:
    catalog = hardware()
    named = instance_types(catalog, ["inf2"], ["m5.xlarge", "inf2.8xlarge"])
    assert [row.name for row in named] == ["m5.xlarge", "inf2.8xlarge"]
    family = instance_types(catalog, ["inf2"], [])
    assert [row.name for row in family] == ["inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge"]
    assert instance_types(catalog, [], []) == []
