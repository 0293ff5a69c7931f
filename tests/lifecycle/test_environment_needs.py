"""The platform needs beyond pools that each workload record carries (root volumes, capacity
reservations, queue scaling), called directly: recorded by `for_blueprint` with the functions `plan`
uses (`infra/platform/needs.py`), read back from old records without them (completed from the catalog
blueprint, else none with a note), and merged by `Environment.platform_config` as
`PlatformConfig.for_blueprints` merges blueprints. Before this change `up` lost all three: the
405B blueprint's GPU nodes got 500 GiB roots instead of 1000, and Triton's ScaledObject had no KEDA."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from saved_backend import SavedBackend

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.lifecycle.environment import RECORD_CONFIG, RECORD_OUTPUT, Environment, WorkloadRecord
from llmctl.infra.platform.config import PlatformConfig

BIG, TRITON, TINY = "llama31-405b-vllm-gpu", "llama2-triton-vllm-gpu", "tiny-cpu"
CATALOG = (BIG, TRITON, TINY, "llama2-70b-vllm-gpu", "llama2-inf2", "llama2-torchserve-inf2")
NEEDS = ("root_volume_gib", "capacity_reservations", "queue_scaling")


@pytest.fixture(autouse=True)
def api_cidrs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Who reaches the EKS API: set, as `up` requires it."""
    monkeypatch.setenv("LLMCTL_API_CIDRS", "203.0.113.0/24")


def reserved(name: str, reservations: list[Any], fallback: str) -> Blueprint:
    """A catalog blueprint with a `capacity` section (no catalog blueprint has one uncommented)."""
    data = load_blueprint(name).model_dump(mode="json")
    data["capacity"] = {"reservations": reservations, "fallback": fallback}
    return Blueprint.model_validate(data)


def old_record(name: str, workload: str | None = None, **kept: Any) -> dict[str, Any]:
    """A record as llmctl wrote it before the platform needs were recorded (no such keys)."""
    data = WorkloadRecord.for_blueprint(load_blueprint(name), workload).model_dump(mode="json")
    return {key: value for key, value in data.items() if key not in NEEDS} | kept


def environment(backend: SavedBackend) -> tuple[Environment, list[str]]:
    notes: list[str] = []
    return Environment(backend, "ci", notes.append), notes  # type: ignore[arg-type]


def needs_of(config: PlatformConfig) -> tuple[Any, ...]:
    return (config.root_volume_gib, config.capacity_reservations, config.queue_scaling)


# ---- what a record holds ------------------------------------------------------------------------
def test_the_405b_record_holds_its_1000_gib_gpu_root_and_round_trips_through_output_and_config() -> None:
    found = WorkloadRecord.for_blueprint(load_blueprint(BIG), "pr-7")
    assert (found.root_volume_gib, found.capacity_reservations, found.queue_scaling) == (
        {"gpu-nvidia-efa": 1000},  # its own pool: a replica over several nodes (pools.pool_for_blueprint)
        {},
        False,
    )
    assert WorkloadRecord.model_validate(found.model_dump(mode="json")) == found  # the stack output
    assert WorkloadRecord.model_validate_json(found.to_config()[RECORD_CONFIG]) == found  # the config


def test_a_reserved_blueprint_s_record_carries_its_reservations_and_round_trips() -> None:
    terms = ["cr-0123456789abcdef0", {"team": "llm"}]
    found = WorkloadRecord.for_blueprint(reserved("llama2-70b-vllm-gpu", terms, "none"))
    [(pool, spec)] = (found.capacity_reservations or {}).items()
    assert (pool, spec.reservations, spec.fallback) == ("gpu-nvidia", terms, "none")
    assert WorkloadRecord.model_validate_json(found.model_dump_json()) == found


def test_a_triton_record_scales_on_its_queue_and_a_cpu_record_needs_nothing() -> None:
    assert WorkloadRecord.for_blueprint(load_blueprint(TRITON)).queue_scaling is True
    tiny = WorkloadRecord.for_blueprint(load_blueprint(TINY))
    assert (tiny.root_volume_gib, tiny.capacity_reservations, tiny.queue_scaling) == ({}, {}, False)


# ---- reading old records ------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["output", "config"])
def test_an_old_record_is_read_and_completed_from_the_catalog_blueprint(where: str) -> None:
    raw = old_record(BIG, "pr-1", pools=["core", "default", "ray-head", "gpu-nvidia-efa"])
    backend = SavedBackend()
    if where == "output":
        backend.add(f"llmctl-{BIG}", "ci.pr-1", outputs={RECORD_OUTPUT: raw})
    else:
        backend.add(
            f"llmctl-{BIG}", "ci.pr-1", config={RECORD_CONFIG: WorkloadRecord(**raw).model_dump_json()}
        )
    env, notes = environment(backend)
    [found] = env.records()
    assert found == WorkloadRecord.for_blueprint(load_blueprint(BIG), "pr-1")
    assert found.root_volume_gib == {"gpu-nvidia-efa": 1000} and notes == []


def test_only_what_an_old_record_lacks_is_taken_from_the_catalog() -> None:
    # recorded: no root volume, no reservations; not recorded: queue scaling (Triton's is on)
    raw = old_record(TRITON, root_volume_gib={}, capacity_reservations={})
    backend = SavedBackend()
    backend.add(f"llmctl-{TRITON}", "ci", outputs={RECORD_OUTPUT: raw})
    [found] = environment(backend)[0].records()
    assert (found.root_volume_gib, found.capacity_reservations, found.queue_scaling) == ({}, {}, True)


def test_a_record_that_says_none_is_not_replaced_by_the_catalog() -> None:
    raw = old_record(BIG, root_volume_gib={}, capacity_reservations={}, queue_scaling=False)
    backend = SavedBackend()
    backend.add(f"llmctl-{BIG}", "ci", outputs={RECORD_OUTPUT: raw})
    env, notes = environment(backend)
    [found] = env.records()
    assert found.root_volume_gib == {} and notes == []
    assert env.platform_config([found], region="us-west-2").root_volume_gib == {}


def test_the_catalog_completes_an_old_record_on_its_own_pools_only() -> None:
    """An old record whose pools lack the catalog blueprint's pool (the blueprint moved since): no
    root volume for a pool the platform would not make (PlatformConfig refuses one)."""
    raw = old_record(BIG, pools=["core", "default", "ray-head"])
    backend = SavedBackend()
    backend.add(f"llmctl-{BIG}", "ci", outputs={RECORD_OUTPUT: raw})
    env, _ = environment(backend)
    [found] = env.records()
    assert found.root_volume_gib == {}
    assert env.platform_config([found], region="us-west-2").root_volume_gib == {}


def test_an_old_record_without_a_catalog_blueprint_needs_none_and_says_so() -> None:
    raw = {"blueprint": "gone-bp", "workload": None, "pools": ["gpu-nvidia"], "namespace": "gone-bp"}
    backend = SavedBackend()
    backend.add("llmctl-gone-bp", "ci", outputs={RECORD_OUTPUT: raw})
    env, notes = environment(backend)
    [found] = env.records()
    assert found == WorkloadRecord(**raw)
    assert found.unrecorded() == list(NEEDS)
    assert notes == [
        "llmctl-gone-bp/ci does not record its root volume, capacity reservations, queue scaling (an "
        "older llmctl wrote it) and has no catalog blueprint: the platform keeps none for it"
    ]
    assert needs_of(env.platform_config([found], region="us-west-2")) == ({}, {}, False)


# ---- the platform they need together ------------------------------------------------------------
def test_the_platform_of_a_405b_and_a_tiny_cpu_record_has_the_1000_gib_gpu_root() -> None:
    env, _ = environment(SavedBackend())
    records = [WorkloadRecord.for_blueprint(load_blueprint(name)) for name in (BIG, TINY)]
    config = env.platform_config(records, region="us-west-2")
    assert config.root_volume_gib == {"gpu-nvidia-efa": 1000}
    assert (config.capacity_reservations, config.queue_scaling) == ({}, False)
    assert "keda" not in config.chart_keys()


def test_a_triton_record_turns_queue_scaling_and_keda_on() -> None:
    env, _ = environment(SavedBackend())
    records = [WorkloadRecord.for_blueprint(load_blueprint(name)) for name in (TINY, TRITON)]
    config = env.platform_config(records, region="us-west-2")
    assert config.queue_scaling is True and "keda" in config.chart_keys()


def test_reservations_of_two_records_on_one_pool_merge_as_the_blueprints_do() -> None:
    first = reserved("llama2-70b-vllm-gpu", ["cr-0123456789abcdef0", {"team": "llm"}], "none")
    second = reserved(TRITON, ["cr-0fedcba9876543210", "cr-0123456789abcdef0"], "on-demand")
    env, _ = environment(SavedBackend())
    config = env.platform_config(
        [WorkloadRecord.for_blueprint(first), WorkloadRecord.for_blueprint(second, "pr-2")],
        region="us-west-2",
    )
    merged = config.capacity_reservations["gpu-nvidia"]
    assert merged.reservations == ["cr-0123456789abcdef0", {"team": "llm"}, "cr-0fedcba9876543210"]
    assert merged.fallback == "on-demand"  # one of them allows on-demand
    assert (
        config.capacity_reservations == PlatformConfig.for_blueprints([first, second]).capacity_reservations
    )


@pytest.mark.parametrize(
    "names", [names for size in (1, 2, 3) for names in itertools.combinations(CATALOG, size)]
)
def test_up_s_platform_needs_are_plan_s_for_any_catalog_blueprints(names: tuple[str, ...]) -> None:
    """The records' merge and `for_blueprints` agree (one code path: infra/platform/needs.py)."""
    blueprints = [load_blueprint(name) for name in names]
    env, _ = environment(SavedBackend())
    records = [WorkloadRecord.for_blueprint(bp) for bp in blueprints]
    assert needs_of(env.platform_config(records, region="us-west-2")) == needs_of(
        PlatformConfig.for_blueprints(blueprints)
    )
