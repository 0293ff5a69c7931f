"""Properties of the reservation rule: for any blueprints of the catalog on one platform, any of them
naming capacity reservations with either fallback, a blueprint's reservation changes only its own
pods. The pool keeps its own capacity types; a blueprint without a reservation never selects
`reserved`; one with `fallback: none` always does; one with `fallback: on-demand` selects nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.pools import CAPACITY_TYPE_LABEL, pool
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.manifests import pool_capacity_types
from llmctl.infra.workload.builders.placement import capacity_selector, serving_pool
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.scheduling.pool_facts import PoolFacts

# reservations are on-demand capacity: a spot blueprint cannot name one (the schema refuses it)
RESERVABLE = [n for n in catalog_names() if load_blueprint(n).compute.capacity_type != "spot"]


def _with(name: str, fallback: str | None) -> Blueprint:
    bp = load_blueprint(name)
    if fallback is None:
        return bp
    data = bp.model_dump(mode="json")
    data["capacity"] = {"reservations": ["cr-0123456789abcdef0"], "fallback": fallback}
    return Blueprint.model_validate(data)


@settings()  # the profile of tests/conftest.py
@given(
    st.lists(
        st.tuples(st.sampled_from(RESERVABLE), st.sampled_from([None, "none", "on-demand"])),
        min_size=1,
        max_size=4,
        unique_by=lambda pair: pair[0],
    )
)
def test_a_reservation_binds_only_the_blueprint_that_names_it(chosen: list[tuple[str, str | None]]) -> None:
    blueprints = [_with(name, fallback) for name, fallback in chosen]
    config = PlatformConfig.for_blueprints(blueprints, stack="ci")
    # the platform's pools as the plan and the platform's outputs give them to the workloads
    pools = [
        PoolFacts.from_spec(pool(name)).model_copy(
            update={
                "capacity_types": list(
                    pool_capacity_types(pool(name), config.capacity_reservations.get(name))
                )
            }
        )
        for name in config.pools
    ]
    for name in config.pools:
        assert set(pool(name).capacity_types) <= set(
            pool_capacity_types(pool(name), config.capacity_reservations.get(name))
        )
    for bp in blueprints:
        facts = PlatformFacts.for_blueprint(bp, stack="ci").model_copy(update={"pools": pools})
        workload = WorkloadConfig(blueprint=bp, platform=facts)
        selected = capacity_selector(workload, serving_pool(workload)).get(CAPACITY_TYPE_LABEL)
        if bp.capacity is None:
            assert selected != "reserved"
        else:
            assert selected == ("reserved" if bp.capacity.fallback == "none" else None)
