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


def _platform_for(blueprint: str, offerings: dict[str, list[str]]) -> list[str]:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.plan.offline import OfflineMocks, run_offline
    from llmctl.infra.platform.config import PlatformConfig
    from llmctl.infra.platform.program import build_platform

    config = PlatformConfig.for_blueprints([load_blueprint(blueprint)], stack="t", region="us-west-2")
    made = run_offline(lambda: build_platform(config), mocks=OfflineMocks(offerings=offerings))
    return sorted(
        r.inputs["availabilityZone"]
        for r in made
        if r.type == "aws:ec2/subnet:Subnet" and r.name.startswith("network-nodes-")
    )


def test_the_program_places_nodes_where_ec2_offers_the_type() -> None:
    # EC2's answer lists only the zones that offer the type; the program's node subnets follow it
    assert _platform_for("llama2-inf2", {"inf2.48xlarge": ["us-west-2c", "us-west-2d"]}) == [
        "us-west-2c",
        "us-west-2d",
    ]


def test_the_program_refuses_a_type_ec2_offers_nowhere() -> None:
    # EC2 answers with no rows when no zone offers the type: that is "offered nowhere", not "unknown"
    with pytest.raises(CloudError, match=r"inf2\.48xlarge is not offered in any of the chosen zones"):
        _platform_for("llama2-inf2", {"inf2.48xlarge": []})
