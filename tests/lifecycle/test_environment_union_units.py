"""The environment union's decisions, called directly (seconds): which stacks are an environment's
workloads, where each record is read from, the pools and instance types the platform is built
for, the AZs it stays in, and which records `down --blueprint/--workload` removes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from saved_backend import SavedBackend

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import BadInput, LlmctlError
from llmctl.infra.lifecycle.engine import StackSpec
from llmctl.infra.lifecycle.environment import (
    API_ACCESS_OUTPUT,
    AZ_OUTPUT,
    PINS_OUTPUT,
    RECORD_CONFIG,
    RECORD_OUTPUT,
    Environment,
    WorkloadRecord,
    adopt_pins,
    union,
)
from llmctl.state import StackPins, load_pins, save_pins

ALWAYS = ["core", "default", "ray-head"]


@pytest.fixture(autouse=True)
def api_cidrs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Who reaches the EKS API: set, as `up` requires it (its own tests below unset it)."""
    monkeypatch.setenv("LLMCTL_API_CIDRS", "203.0.113.0/24")


def record(
    blueprint: str,
    workload: str | None = None,
    pools: list[str] | None = None,
    types: list[str] | None = None,
) -> WorkloadRecord:
    """A record as `up` writes it now: its platform needs recorded (none here)."""
    return WorkloadRecord(
        blueprint=blueprint,
        workload=workload,
        pools=pools or [],
        instance_types=types or [],
        namespace=f"{blueprint}-{workload}" if workload else blueprint,
        root_volume_gib={},
        capacity_reservations={},
        queue_scaling=False,
    )


def environment(backend: SavedBackend, stack: str = "ci") -> tuple[Environment, list[str]]:
    notes: list[str] = []
    return Environment(backend, stack, notes.append), notes  # type: ignore[arg-type]


# ---- the record of one blueprint ----------------------------------------------------------------
def test_a_cpu_blueprint_needs_no_accelerator_type_and_the_default_workload_uses_its_name() -> None:
    found = WorkloadRecord.for_blueprint(load_blueprint("tiny-cpu"))
    assert found == WorkloadRecord(
        blueprint="tiny-cpu",
        workload=None,
        pools=ALWAYS,
        instance_types=[],
        namespace="tiny-cpu",
        root_volume_gib={},
        capacity_reservations={},
        queue_scaling=False,
    )
    assert found.key == ("tiny-cpu", None)
    assert found.project == "llmctl-tiny-cpu"
    assert found.stack("ci") == "ci"
    assert found.label() == "tiny-cpu"


def test_an_accelerator_blueprint_needs_its_type_and_a_named_workload_its_own_namespace() -> None:
    found = WorkloadRecord.for_blueprint(load_blueprint("llama2-inf2"), "pr-42")
    assert found.instance_types == ["inf2.48xlarge"]
    assert found.pools == [*ALWAYS, "inferentia-inf2"]
    assert found.namespace == "llama2-inf2-pr-42"
    assert found.key == ("llama2-inf2", "pr-42")
    assert found.stack("ci") == "ci.pr-42"
    assert found.label() == "llama2-inf2 (workload pr-42)"
    assert found.to_config() == {RECORD_CONFIG: found.model_dump_json()}
    assert WorkloadRecord.model_validate_json(found.to_config()[RECORD_CONFIG]) == found


def test_a_record_is_frozen_so_the_union_cannot_be_changed_behind_its_back() -> None:
    found = WorkloadRecord.for_blueprint(load_blueprint("tiny-cpu"))
    with pytest.raises(ValidationError, match="frozen"):
        found.pools = ["gpu-nvidia"]


# ---- the union ----------------------------------------------------------------------------------
def test_the_union_always_holds_the_core_pools_and_nothing_else_without_workloads() -> None:
    assert union([]) == (ALWAYS, [])


def test_the_union_is_every_pool_and_type_once_sorted_whatever_the_order() -> None:
    a = record("a", pools=["inferentia-inf2", "core"], types=["inf2.48xlarge"])
    b = record("b", "pr-1", pools=["gpu-nvidia"], types=["p4de.24xlarge", "inf2.48xlarge"])
    c = record("c")
    expected = (
        ["core", "default", "gpu-nvidia", "inferentia-inf2", "ray-head"],
        ["inf2.48xlarge", "p4de.24xlarge"],
    )
    assert union([a, b, c]) == expected
    assert union([c, b, a]) == expected
    assert union(iter([b, a])) == expected  # any iterable, read once


# ---- which stacks are the environment's workloads -----------------------------------------------
def test_stacks_are_the_llmctl_workload_stacks_of_this_environment_only() -> None:
    backend = SavedBackend()
    backend.add("llmctl-platform", "ci")  # the platform itself
    backend.add("llmctl-tiny-cpu", "ci")
    backend.add("llmctl-tiny-cpu", "ci.pr-1")
    backend.add("llmctl-llama2-inf2", "ci.pr-2")
    backend.add("llmctl-tiny-cpu", "cix")  # another environment whose name starts the same
    backend.add("llmctl-tiny-cpu", "dev.pr-1")  # another environment
    backend.add("platform-tools", "ci")  # not an llmctl project
    env, _ = environment(backend)
    assert env.stacks() == [
        ("llmctl-llama2-inf2", "ci.pr-2"),
        ("llmctl-tiny-cpu", "ci"),
        ("llmctl-tiny-cpu", "ci.pr-1"),
    ]


def test_an_environment_without_workloads_has_no_stacks() -> None:
    backend = SavedBackend()
    backend.add("llmctl-platform", "ci")
    env, _ = environment(backend)
    assert env.stacks() == [] and env.records() == []


# ---- where each record comes from ---------------------------------------------------------------
def test_the_output_record_wins_over_the_config_and_the_catalog() -> None:
    saved = record("tiny-cpu", "pr-1", pools=["gpu-nvidia"], types=["p4de.24xlarge"])
    other = record("tiny-cpu", "pr-1", pools=["inferentia-inf2"])
    backend = SavedBackend()
    backend.add(
        "llmctl-tiny-cpu",
        "ci.pr-1",
        outputs={RECORD_OUTPUT: saved.model_dump(mode="json")},
        config=other.to_config(),
    )
    env, notes = environment(backend)
    assert env.records() == [saved]
    assert notes == []
    assert ("config", "llmctl-tiny-cpu", "ci.pr-1") not in backend.reads  # the output was enough


def test_an_output_record_may_be_a_json_string() -> None:
    saved = record("tiny-cpu", None, pools=["gpu-nvidia"])
    backend = SavedBackend()
    backend.add("llmctl-tiny-cpu", "ci", outputs={RECORD_OUTPUT: saved.model_dump_json()})
    env, notes = environment(backend)
    assert env.records() == [saved] and notes == []


@pytest.mark.parametrize("outputs", [None, {}, {"endpoint": "x"}])
def test_without_an_output_record_the_config_record_is_read(outputs: dict[str, Any] | None) -> None:
    saved = record("llama2-inf2", "pr-3", pools=["gpu-nvidia"], types=["g5.xlarge"])
    backend = SavedBackend()
    backend.add("llmctl-llama2-inf2", "ci.pr-3", outputs=outputs, config=saved.to_config())
    env, notes = environment(backend)
    assert env.records() == [saved] and notes == []


@pytest.mark.parametrize(
    "raw",
    ["{not json", json.dumps({"blueprint": "tiny-cpu", "namespace": "n", "surprise": 1}), {"pools": ["x"]}],
)
def test_an_unreadable_record_falls_back_to_the_catalog_blueprint_and_says_so(raw: Any) -> None:
    backend = SavedBackend()
    backend.add("llmctl-llama2-inf2", "ci.pr-4", outputs={RECORD_OUTPUT: raw})
    env, notes = environment(backend)
    assert env.records() == [WorkloadRecord.for_blueprint(load_blueprint("llama2-inf2"), "pr-4")]
    assert notes == ["the record of llmctl-llama2-inf2/ci.pr-4 is unreadable; using the catalog blueprint"]


def test_no_record_at_all_is_rebuilt_from_the_catalog_without_a_note() -> None:
    backend = SavedBackend()
    backend.add("llmctl-llama2-inf2", "ci")
    env, notes = environment(backend)
    assert env.records() == [WorkloadRecord.for_blueprint(load_blueprint("llama2-inf2"))]
    assert notes == []


@pytest.mark.parametrize(("stack", "workload"), [("ci", None), ("ci.pr-5", "pr-5")])
def test_no_record_and_no_catalog_blueprint_keeps_no_pools_and_says_so(
    stack: str, workload: str | None
) -> None:
    backend = SavedBackend()
    backend.add("llmctl-gone-bp", stack)
    env, notes = environment(backend)
    assert env.records() == [
        WorkloadRecord(
            blueprint="gone-bp",
            workload=workload,
            pools=[],
            instance_types=[],
            namespace=f"gone-bp-{workload}" if workload else "gone-bp",
        )
    ]
    assert notes == [f"llmctl-gone-bp/{stack} has no record and no catalog blueprint: its pools are not kept"]


def test_records_are_sorted_by_blueprint_then_workload_the_default_first() -> None:
    backend = SavedBackend()
    for bp, stack, workload in [
        ("b", "ci.x", "x"),
        ("a", "ci.z", "z"),
        ("b", "ci", None),
        ("a", "ci.y", "y"),
    ]:
        backend.add(
            f"llmctl-{bp}", stack, outputs={RECORD_OUTPUT: record(bp, workload).model_dump(mode="json")}
        )
    env, _ = environment(backend)
    assert [r.key for r in env.records()] == [("a", "y"), ("a", "z"), ("b", None), ("b", "x")]


# ---- the platform they need together ------------------------------------------------------------
def test_pinned_az_ids_are_the_platform_output_else_none() -> None:
    backend = SavedBackend()
    env, _ = environment(backend)
    assert env.pinned_az_ids() == []  # no platform yet
    backend.add("llmctl-platform", "ci", outputs={"cluster_name": "llmctl-ci"})
    assert env.pinned_az_ids() == []  # a platform that recorded no AZs
    backend.saved_outputs[("llmctl-platform", "ci")] = {AZ_OUTPUT: ["usw2-az2", "usw2-az1"]}
    assert env.pinned_az_ids() == ["usw2-az2", "usw2-az1"]
    assert ("outputs", "llmctl-platform", "ci") in backend.reads


def test_the_platform_config_is_the_union_in_the_pinned_azs_unless_reselecting() -> None:
    backend = SavedBackend()
    backend.add("llmctl-platform", "ci", outputs={AZ_OUTPUT: ["usw2-az3", "usw2-az4"]})
    env, _ = environment(backend)
    records = [record("a", pools=["gpu-nvidia"], types=["g5.xlarge"]), record("b", "w", pools=["core"])]
    config = env.platform_config(records, region="us-west-2")
    assert (config.stack, config.region) == ("ci", "us-west-2")
    assert config.pools == ["core", "default", "ray-head", "gpu-nvidia"]  # the platform's own pool order
    assert config.instance_types == ["g5.xlarge"]
    assert config.pinned_az_ids == ["usw2-az3", "usw2-az4"]
    assert env.platform_config(records, region="us-west-2", reselect_azs=True).pinned_az_ids == []


def test_a_first_platform_config_pins_nothing() -> None:
    env, _ = environment(SavedBackend(), "dev")
    config = env.platform_config([], region="eu-west-1")
    assert (config.stack, config.region, config.pools, config.pinned_az_ids) == (
        "dev",
        "eu-west-1",
        ALWAYS,
        [],
    )


def test_the_api_endpoint_is_never_open_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """No setting and no platform yet: refused with the fix; `private` or named ranges; a later run
    without the variable keeps what the platform stack was made with."""
    monkeypatch.delenv("LLMCTL_API_CIDRS")
    backend = SavedBackend()
    env, _ = environment(backend)
    with pytest.raises(LlmctlError) as refused:
        env.platform_config([], region="us-west-2")
    assert refused.value.message == "who may reach the EKS API of environment 'ci' is not set"
    assert "LLMCTL_API_CIDRS=203.0.113.7/32" in (refused.value.hint or "")
    assert "LLMCTL_API_CIDRS=private" in (refused.value.hint or "")
    monkeypatch.setenv("LLMCTL_API_CIDRS", "private")
    endpoint = env.platform_config([], region="us-west-2").endpoint
    assert (endpoint.public, endpoint.public_cidrs) == (False, [])
    monkeypatch.setenv("LLMCTL_API_CIDRS", " 203.0.113.7/32, 198.51.100.0/24 ")
    endpoint = env.platform_config([], region="us-west-2").endpoint
    assert (endpoint.public, endpoint.public_cidrs) == (True, ["203.0.113.7/32", "198.51.100.0/24"])
    monkeypatch.setenv("LLMCTL_API_CIDRS", "my-office")
    with pytest.raises(LlmctlError) as bad:
        env.platform_config([], region="us-west-2")
    assert (
        bad.value.message
        == "LLMCTL_API_CIDRS='my-office': 'my-office' is not a network CIDR like '10.1.0.0/21'"
    )
    monkeypatch.delenv("LLMCTL_API_CIDRS")
    backend.add(
        "llmctl-platform",
        "ci",
        outputs={API_ACCESS_OUTPUT: {"public": True, "public_cidrs": ["192.0.2.0/24"]}},
    )
    env, _ = environment(backend)
    assert env.platform_config([], region="us-west-2").endpoint.public_cidrs == ["192.0.2.0/24"]


# ---- what `down` removes ------------------------------------------------------------------------
RECORDS = [record("a"), record("a", "pr-1"), record("b", "pr-1"), record("b", "pr-2")]


def test_select_without_a_filter_is_every_record() -> None:
    env, _ = environment(SavedBackend())
    assert env.select(RECORDS, None, None) == RECORDS


@pytest.mark.parametrize(
    ("blueprint", "workload", "keys"),
    [
        ("a", None, [("a", None), ("a", "pr-1")]),
        (None, "pr-1", [("a", "pr-1"), ("b", "pr-1")]),
        ("b", "pr-1", [("b", "pr-1")]),
        ("b", "pr-2", [("b", "pr-2")]),
    ],
)
def test_select_keeps_the_records_matching_every_filter_given(
    blueprint: str | None, workload: str | None, keys: list[tuple[str, str | None]]
) -> None:
    env, _ = environment(SavedBackend())
    assert [r.key for r in env.select(RECORDS, blueprint, workload)] == keys


@pytest.mark.parametrize(
    ("blueprint", "workload", "wanted"),
    [("c", None, "blueprint c"), (None, "pr-9", "workload pr-9"), ("a", "pr-2", "blueprint a workload pr-2")],
)
def test_select_matching_nothing_names_what_is_deployed(
    blueprint: str | None, workload: str | None, wanted: str
) -> None:
    env, _ = environment(SavedBackend())
    with pytest.raises(LlmctlError) as info:
        env.select(RECORDS, blueprint, workload)
    assert info.value.message == (
        f"no {wanted} in environment 'ci'; deployed there: a, a (workload pr-1), b (workload pr-1), b (workload pr-2)"
    )
    assert info.value.hint and "nothing was changed" in info.value.hint


def test_select_in_an_empty_environment_says_none_is_deployed() -> None:
    env, _ = environment(SavedBackend())
    with pytest.raises(LlmctlError) as info:
        env.select([], "a", None)
    assert info.value.message.endswith("deployed there: none")


def test_select_refuses_an_invalid_workload_name_before_matching() -> None:
    env, _ = environment(SavedBackend())
    with pytest.raises(BadInput, match="invalid workload name 'PR_1'"):
        env.select(RECORDS, "a", "PR_1")


# ---- the pins a first `up` on this machine takes from the backend -------------------------------
D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64
SPEC = StackSpec("llmctl-tiny-cpu", "ci.pr-1")


@pytest.mark.parametrize(
    "raw",
    [
        {"images": {"ray:1": D1}, "wheels": {"torch.whl": "ab"}},
        {"images": {"ray:1": D1}},
        {"wheels": {"torch.whl": "ab"}, "images": None},
    ],
)
def test_a_first_up_here_takes_the_pins_the_backend_holds(raw: dict[str, Any]) -> None:
    backend = SavedBackend()
    backend.add(SPEC.project, SPEC.stack, outputs={PINS_OUTPUT: raw})
    notes: list[str] = []
    adopt_pins(backend, SPEC, "tiny-cpu", notes.append)  # type: ignore[arg-type]
    assert load_pins("ci.pr-1", "tiny-cpu") == StackPins(
        images=dict(raw.get("images") or {}), wheels=dict(raw.get("wheels") or {})
    )
    assert notes == [
        "    pins of llmctl-tiny-cpu/ci.pr-1 taken from its state in the backend (an earlier `up`)"
    ]


@pytest.mark.parametrize(
    "outputs", [None, {}, {PINS_OUTPUT: "x"}, {PINS_OUTPUT: {"images": {}, "wheels": {}}}]
)
def test_no_pins_in_the_backend_leave_nothing_recorded(outputs: dict[str, Any] | None) -> None:
    backend = SavedBackend()
    backend.add(SPEC.project, SPEC.stack, outputs=outputs)
    notes: list[str] = []
    adopt_pins(backend, SPEC, "tiny-cpu", notes.append)  # type: ignore[arg-type]
    assert load_pins("ci.pr-1", "tiny-cpu") == StackPins() and notes == []


def test_pins_recorded_here_are_never_replaced_by_the_backend_s() -> None:
    save_pins("ci.pr-1", "tiny-cpu", StackPins(images={"ray:1": D2}))
    backend = SavedBackend()
    backend.add(SPEC.project, SPEC.stack, outputs={PINS_OUTPUT: {"images": {"ray:1": D1}}})
    notes: list[str] = []
    adopt_pins(backend, SPEC, "tiny-cpu", notes.append)  # type: ignore[arg-type]
    assert load_pins("ci.pr-1", "tiny-cpu") == StackPins(images={"ray:1": D2}) and notes == []
