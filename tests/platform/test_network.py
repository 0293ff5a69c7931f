from __future__ import annotations

import pytest

from llmctl.errors import CloudError
from llmctl.infra.platform.network import Zone, choose_zones, plan_subnets

ZONES = [
    Zone("us-west-2a", "usw2-az1"),
    Zone("us-west-2b", "usw2-az2"),
    Zone("us-west-2c", "usw2-az3"),
    Zone("us-west-2d", "usw2-az4"),
]


def test_preferred_az_ids_win_without_accelerators() -> None:
    chosen = choose_zones(ZONES, ["usw2-az4", "usw2-az1"], 2)
    assert [z.id for z in chosen] == ["usw2-az1", "usw2-az4"]


def test_offering_beats_preference() -> None:
    offered = {"inf2.48xlarge": {"us-west-2b", "us-west-2c"}}
    chosen = choose_zones(ZONES, ["usw2-az4", "usw2-az1"], 2, offered)
    assert [z.id for z in chosen] == ["usw2-az2", "usw2-az3"]


def test_partial_offering_still_covers_every_type() -> None:
    offered = {"inf2.48xlarge": {"us-west-2d"}, "p4de.24xlarge": {"us-west-2b"}}
    chosen = choose_zones(ZONES, ["usw2-az4", "usw2-az1"], 2, offered)
    assert {z.name for z in chosen} == {"us-west-2d", "us-west-2b"}


def test_instance_type_offered_nowhere_is_a_cloud_error() -> None:
    with pytest.raises(CloudError, match=r"trn2\.48xlarge is not offered"):
        choose_zones(ZONES, [], 2, {"trn2.48xlarge": set()})


def test_too_few_zones() -> None:
    with pytest.raises(CloudError, match="2 are needed"):
        choose_zones(ZONES[:1], [], 2)


def test_subnet_plan_matches_the_seed_layout() -> None:
    plan = plan_subnets("10.1.0.0/21", "100.64.0.0/16", 2)
    assert plan.private == ["10.1.0.0/24", "10.1.1.0/24"]
    assert plan.public == ["10.1.2.0/26", "10.1.2.64/26"]
    assert plan.nodes == ["100.64.0.0/17", "100.64.128.0/17"]
    three = plan_subnets("10.1.0.0/21", "100.64.0.0/16", 3)
    assert three.nodes == ["100.64.0.0/18", "100.64.64.0/18", "100.64.128.0/18"]
