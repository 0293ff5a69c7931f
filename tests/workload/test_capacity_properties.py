"""Properties of `infra/workload/scheduling/capacity.py`, for any input.

The rules, from its docstrings and Kubernetes' quantity grammar (kubernetes/kubernetes@
d572249d3056b06877dff30c8ddbe30e75d3d353, staging/src/k8s.io/apimachinery/pkg/api/resource/
quantity.go: a number, then a binary suffix Ki..Ei, a decimal suffix m, "", k..E, or a decimal
exponent e/E with a signed integer):

- `parse_quantity` reads every quantity of that grammar (non-negative: a request cannot be less
  than zero) to its value, and refuses anything else with one message naming it;
- `cpu_quantity` rounds down to 100m and `memory_quantity` to 256 MiB (whole GiB from 16 GiB up):
  what they write reads back as at most the amount and less than one step below it;
- `allocatable` of every catalog row is Karpenter's figure less the DaemonSets: positive, below the
  instance's own vCPUs and memory, with the Neuron and NVIDIA devices only on their instances.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from llmctl.blueprints.allocatable import node_allocatable
from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.scheduling.capacity import (
    GIB,
    allocatable,
    cpu_quantity,
    memory_quantity,
    parse_quantity,
)

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
    "m": Decimal("1e-3"),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}

number_st = st.one_of(
    st.integers(0, 10**6).map(str),
    st.tuples(st.integers(0, 9999), st.integers(0, 999)).map(lambda p: f"{p[0]}.{p[1]}"),
    st.integers(0, 999).map(lambda n: f".{n}"),
    st.integers(0, 999).map(lambda n: f"{n}."),
)
suffix_st = st.one_of(
    st.sampled_from(sorted(BINARY) + sorted(DECIMAL)),
    st.tuples(st.sampled_from("eE"), st.sampled_from(("", "+", "-")), st.integers(0, 12)).map(
        lambda p: f"{p[0]}{p[1]}{p[2]}"
    ),
)


def _value(number: str, suffix: str) -> Decimal:
    base = Decimal(number if not number.endswith(".") else number[:-1])
    if suffix in BINARY:
        return base * BINARY[suffix]
    if suffix in DECIMAL:
        return base * Decimal(DECIMAL[suffix])
    return base * Decimal(10) ** int(suffix[1:])


@given(number_st, suffix_st, st.booleans())
@example("1", "e3", False)  # Kubernetes' decimal exponent was refused
@example("2", "Pi", False)  # and the P, E, Pi and Ei suffixes
@example("1", "E", False)  # `E` alone is exa, not an exponent
@example("12", "", True)  # an explicit `+`
def test_every_quantity_of_the_grammar_is_read_to_its_value(number: str, suffix: str, plus: bool) -> None:
    text = f"{'+' if plus else ''}{number}{suffix}"
    assert parse_quantity(text) == pytest.approx(float(_value(number, suffix)), rel=1e-12, abs=1e-12)


@given(st.text(alphabet="0123456789.+-eEkKmMGiTPx ", min_size=0, max_size=6))
def test_anything_read_is_of_the_grammar_and_anything_else_is_refused_naming_it(text: str) -> None:
    try:
        value = parse_quantity(text)
    except ValueError as error:
        assert str(error) == f"{text!r} is not a Kubernetes quantity"
        return
    assert value >= 0
    body = text.strip().removeprefix("+")
    assert body and body[0] in "0123456789." and " " not in body


@given(st.floats(0.1, 1024, allow_nan=False))
def test_cpu_quantity_rounds_down_to_a_tenth(vcpus: float) -> None:
    written = parse_quantity(cpu_quantity(vcpus))
    assert written <= vcpus + 1e-9 and vcpus - written < 0.1 + 1e-9
    assert round(written * 10) == pytest.approx(written * 10)


@given(st.floats(0.25, 4096, allow_nan=False))
def test_memory_quantity_rounds_down_to_256_mib_then_whole_gib(gib: float) -> None:
    written = parse_quantity(memory_quantity(gib)) / GIB
    step = 1.0 if gib >= 16 else 0.25
    assert written <= gib + 1e-9 and gib - written < step + 1e-9
    assert (written / step) == pytest.approx(round(written / step))


@given(st.sampled_from(sorted(hardware().instances)))
def test_allocatable_of_every_row_is_positive_and_below_the_instance(name: str) -> None:
    row = hardware().instance(name)
    node = allocatable(row)
    karpenter = node_allocatable(row)  # Karpenter's figure less the DaemonSets, in its own units
    assert (node.cpu * 1000, node.memory_gib * 1024) == (karpenter.cpu_m, karpenter.pod_memory_mib)
    assert 0 < node.cpu < row.vcpu and 0 < node.memory_gib < row.memory_gib
    assert node.of("memory") == node.memory_gib * GIB
    assert node.neuron_cores == row.neuron_cores
    assert (node.neuron_devices > 0) is (row.neuron_cores > 0)
    assert (node.gpus > 0) is (row.accelerator == "nvidia" and row.accelerator_count > 0)
