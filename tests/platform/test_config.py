from __future__ import annotations

import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.versions import versions
from llmctl.errors import BlueprintError
from llmctl.infra.platform.config import PlatformConfig


def test_defaults() -> None:
    config = PlatformConfig()
    assert config.cluster_name == "llmctl-dev"
    assert config.kubernetes_version == versions().eks.kubernetes_version.value
    assert config.az_ids == ["usw2-az4", "usw2-az1"]
    assert config.pools == ["core", "default", "ray-head"]
    assert config.vpc.cidr == "10.1.0.0/21" and config.vpc.pods_cidr == "100.64.0.0/16"


@pytest.mark.parametrize(
    ("region", "ids"),
    [("us-east-1", ["use1-az6", "use1-az5"]), ("us-east-2", ["use2-az3", "use2-az1"]), ("eu-west-1", [])],
)
def test_az_id_defaults_per_region(region: str, ids: list[str]) -> None:
    assert PlatformConfig(region=region).az_ids == ids


def test_for_blueprints_picks_pools_and_instance_types() -> None:
    config = PlatformConfig.for_blueprints(
        [load_blueprint("llama2-inf2"), load_blueprint("llama2-70b-vllm-gpu"), load_blueprint("tiny-cpu")],
        stack="prod",
        region="us-east-1",
    )
    assert config.pools == ["core", "default", "ray-head", "inferentia-inf2", "gpu-nvidia"]
    assert config.instance_types == ["inf2.48xlarge", "p4de.24xlarge"]
    assert config.cluster_name == "llmctl-prod"
    assert config.region == "us-east-1"


def test_for_blueprints_all_pools_and_overrides() -> None:
    config = PlatformConfig.for_blueprints([], all_pools=True, cluster_name="team-a", tags={"team": "ml"})
    assert "trainium-trn2" in config.pools and "gpu-nvidia" in config.pools
    assert config.cluster_name == "team-a"
    assert config.tags == {"team": "ml"}


def test_pulumi_config_round_trip() -> None:
    config = PlatformConfig.for_blueprints(
        [load_blueprint("llama3-vllm-inf2")],
        stack="qa",
        endpoint={"public": True, "public_cidrs": ["203.0.113.0/24"]},
        tags={"owner": "me"},
    )
    values = config.to_pulumi_config()
    assert values["aws:region"] == "us-west-2"
    assert values["llmctl:stack"] == "qa"
    assert all(isinstance(v, str) for v in values.values())
    assert PlatformConfig.from_pulumi_config(values) == config


def test_from_pulumi_config_minimal_uses_aws_region() -> None:
    config = PlatformConfig.from_pulumi_config({"aws:region": "us-east-2", "llmctl:stack": "dev"})
    assert config.region == "us-east-2"
    assert config.az_ids == ["use2-az3", "use2-az1"]


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        ({"pools": ["inferentia-inf3"]}, "pools", "unknown pool"),
        ({"region": "mars-1"}, "region", "not an AWS region"),
        ({"vpc": {"cidr": "10.1.0.0/24"}}, "vpc", "too small"),
        ({"vpc": {"existing_vpc_id": "vpc-1", "private_subnet_ids": ["subnet-1"]}}, "vpc", "two private"),
        ({"endpoint": {"public_cidrs": ["nope"]}}, "endpoint.public_cidrs", "not a network CIDR"),
        ({"surprise": 1}, "surprise", "Extra inputs"),
    ],
)
def test_bad_config_names_the_field(data: dict[str, object], path: str, fragment: str) -> None:
    with pytest.raises(BlueprintError) as info:
        PlatformConfig.for_blueprints([], **data)
    problems = dict(info.value.problems)
    assert path in problems, problems
    assert fragment in problems[path]


def test_bad_json_in_stack_config() -> None:
    with pytest.raises(BlueprintError, match="not valid JSON"):
        PlatformConfig.from_pulumi_config({"llmctl:pools": "[core"})
