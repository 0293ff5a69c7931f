"""Properties of environments (`infra/lifecycle/environment.py`), for any set of workload stacks.

The rules, from the module's docstring: an environment's workloads are the stacks
`llmctl-<blueprint>/<env>` and `llmctl-<blueprint>/<env>.<workload>`; the platform is built for the
union of their records, so the order of `up`s does not matter and a later `up` never removes a pool
another workload uses; a workload's record is its output, else its stack config, else rebuilt from
the catalog; `down --blueprint/--workload` removes exactly the records matching both filters and
refuses a filter that matches none. So for any stacks of several environments whose names share
prefixes (`ci`, `ci2`, `c`), platforms and stacks of other projects, and any records:

- an environment lists exactly its own workload stacks (never a platform, another project or
  another environment whose name starts the same);
- the union holds the always-on pools and every record's pools and types, sorted and once each,
  whatever the order, and adding a record never removes anything;
- the record read is the output when readable, else the config when readable, else the catalog's
  (an unreadable output went to the catalog even with a readable config: kept as an example);
- `select` returns exactly the matching records, or refuses naming what is deployed.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from saved_backend import SavedBackend

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.pools import ALWAYS_POOLS
from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.lifecycle.environment import (
    RECORD_CONFIG,
    RECORD_OUTPUT,
    Environment,
    WorkloadRecord,
    union,
)

ENVS = ("ci", "ci2", "c")
PROJECTS = (PLATFORM_PROJECT, "llmctl-tiny-cpu", "llmctl-llama2-inf2", "other-project")
WORKLOADS = (None, "pr-1", "pr-12")
BLUEPRINTS = ("tiny-cpu", "llama2-inf2")

record_st = st.builds(
    lambda bp, workload, pools, types: WorkloadRecord(  # as written now: the platform needs recorded
        blueprint=bp,
        workload=workload,
        pools=pools,
        instance_types=types,
        namespace=bp,
        root_volume_gib={},
        capacity_reservations={},
        queue_scaling=False,
    ),
    st.sampled_from(BLUEPRINTS),
    st.sampled_from(WORKLOADS),
    st.lists(st.sampled_from(("cpu", "inf2", "gpu", "default")), max_size=3),
    st.lists(st.sampled_from(("inf2.xlarge", "g5.xlarge")), max_size=2),
)


@given(
    st.lists(
        st.tuples(st.sampled_from(PROJECTS), st.sampled_from(ENVS), st.sampled_from(WORKLOADS)), max_size=10
    ),
    st.sampled_from(ENVS),
)
def test_an_environment_lists_exactly_its_own_workload_stacks(
    stacks: list[tuple[str, str, str | None]], env: str
) -> None:
    backend = SavedBackend()
    names = sorted({(p, e if w is None or p == PLATFORM_PROJECT else f"{e}.{w}") for p, e, w in stacks})
    for project, stack in names:
        backend.add(project, stack)
    expected = [
        (p, s) for p, s in names if p not in (PLATFORM_PROJECT, "other-project") and s.split(".")[0] == env
    ]
    assert Environment(backend, env).stacks() == expected  # type: ignore[arg-type]


@given(st.lists(record_st, max_size=4), st.lists(record_st, max_size=2), st.randoms(use_true_random=False))
def test_the_union_holds_every_need_once_in_any_order_and_grows_only(
    records: list[WorkloadRecord], more: list[WorkloadRecord], rng: object
) -> None:
    pools, types = union(records)
    shuffled = list(records)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert union(shuffled) == (pools, types)
    assert pools == sorted(set(pools)) and types == sorted(set(types))
    assert set(ALWAYS_POOLS) <= set(pools)
    assert {p for r in records for p in r.pools} <= set(pools)
    assert {t for r in records for t in r.instance_types} == set(types)
    grown_pools, grown_types = union([*records, *more])
    assert set(pools) <= set(grown_pools) and set(types) <= set(grown_types)


RECORD = WorkloadRecord(
    blueprint="tiny-cpu",
    workload="pr-1",
    pools=["cpu"],
    namespace="tiny-cpu",
    root_volume_gib={},
    capacity_reservations={},
    queue_scaling=False,
)
source_st = st.sampled_from(("absent", "valid", "unreadable"))


@given(record_st, record_st, source_st, source_st, st.booleans())
@example(RECORD, RECORD.model_copy(update={"pools": ["inf2"]}), "unreadable", "valid", True)
def test_the_record_is_the_output_else_the_config_else_the_catalog(
    out_record: WorkloadRecord, config_record: WorkloadRecord, output: str, config: str, as_text: bool
) -> None:
    backend = SavedBackend()
    stack = "ci.pr-1"
    outputs = {}
    if output != "absent":
        data = out_record.model_dump(mode="json") if output == "valid" else {"blueprint": 3}
        outputs[RECORD_OUTPUT] = json.dumps(data) if as_text else data
    configs = {}
    if config != "absent":
        configs[RECORD_CONFIG] = config_record.model_dump_json() if config == "valid" else "{not json"
    backend.add("llmctl-tiny-cpu", stack, outputs=outputs, config=configs)
    notes: list[str] = []
    [record] = Environment(backend, "ci", notes.append).records()  # type: ignore[arg-type]
    if output == "valid":
        assert record == out_record
    elif config == "valid":  # an unreadable output fell through to the catalog
        assert record == config_record
        assert (notes != []) is (output == "unreadable")
    else:
        assert record == WorkloadRecord.for_blueprint(load_blueprint("tiny-cpu"), "pr-1")
        assert (notes != []) is (output == "unreadable" or config == "unreadable")


@given(
    st.lists(record_st, max_size=4, unique_by=lambda r: r.key),
    st.sampled_from((None, *BLUEPRINTS, "llama2-7b-cpu")),
    st.sampled_from(WORKLOADS),
)
def test_select_takes_exactly_the_matching_records_or_refuses_naming_what_is_there(
    records: list[WorkloadRecord], blueprint: str | None, workload: str | None
) -> None:
    env = Environment(SavedBackend(), "ci")  # type: ignore[arg-type]
    expected = [r for r in records if blueprint in (None, r.blueprint) and workload in (None, r.workload)]
    if blueprint is None and workload is None:
        assert env.select(records, None, None) == records
    elif expected:
        assert env.select(records, blueprint, workload) == expected
    else:
        with pytest.raises(LlmctlError) as info:
            env.select(records, blueprint, workload)
        assert "nothing was changed" in (info.value.hint or "")
        assert all(r.label() in info.value.message for r in records)
