"""Tags on a bring-your-own VPC's subnets (issue 25, item 2): llmctl manages only the tags that
were absent (and those its own marker lists), leaves another cluster's tags alone, and refuses a
discovery tag that names another cluster instead of overwriting it."""

from __future__ import annotations

import pytest

from llmctl.errors import CloudError
from llmctl.infra.plan.offline import OfflineMocks, Registered, run_offline
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.manifests import DISCOVERY_TAG
from llmctl.infra.platform.network import ELB_TAG, INTERNAL_ELB_TAG, managed_tags_key, subnet_tag_plan

VPC = {
    "existing_vpc_id": "vpc-1",
    "private_subnet_ids": ["subnet-p1", "subnet-p2"],
    "public_subnet_ids": ["subnet-u1"],
}


def config() -> PlatformConfig:
    return PlatformConfig.for_blueprints([], vpc=VPC)


def subnet_tags(current: dict[str, dict[str, str]]) -> set[tuple[str, str, str]]:
    from llmctl.infra.platform.program import build_platform

    made: list[Registered] = run_offline(
        lambda: build_platform(config()), mocks=OfflineMocks(subnet_tags=current)
    )
    return {
        (r.inputs["resourceId"], r.inputs["key"], r.inputs["value"])
        for r in made
        if r.type == "aws:ec2/tag:Tag" and r.inputs["resourceId"].startswith("subnet-")
    }


def test_a_role_tag_another_cluster_set_is_not_managed_so_down_keeps_it() -> None:
    # another cluster's public load balancers use subnet-u1 and subnet-p1 already
    current = {"subnet-u1": {ELB_TAG: "1"}, "subnet-p1": {INTERNAL_ELB_TAG: ""}}
    tags = subnet_tags(current)
    cluster = config().cluster_name
    marker = managed_tags_key(cluster)
    assert tags == {
        ("subnet-p1", DISCOVERY_TAG, cluster),
        ("subnet-p1", marker, DISCOVERY_TAG),
        ("subnet-p2", DISCOVERY_TAG, cluster),
        ("subnet-p2", INTERNAL_ELB_TAG, "1"),
        ("subnet-p2", marker, f"{DISCOVERY_TAG} {INTERNAL_ELB_TAG}"),
    }


def test_tags_this_cluster_added_stay_managed_on_the_next_up() -> None:
    cluster = config().cluster_name
    first = subnet_tags({})
    # the subnets as the first `up` left them: every tag it managed is now there
    after: dict[str, dict[str, str]] = {}
    for subnet, key, value in first:
        after.setdefault(subnet, {})[key] = value
    assert subnet_tags(after) == first
    assert ("subnet-u1", ELB_TAG, "1") in first and ("subnet-p1", DISCOVERY_TAG, cluster) in first


def test_another_clusters_discovery_tag_is_refused_not_overwritten() -> None:
    plan_input = [("subnet-p1", DISCOVERY_TAG, "llmctl-dev")]
    with pytest.raises(CloudError) as err:
        subnet_tag_plan("llmctl-dev", plan_input, {"subnet-p1": {DISCOVERY_TAG: "team-b"}})
    assert "subnet-p1 carries karpenter.sh/discovery=team-b" in str(err.value)
    assert "does not change another cluster's tags" in (err.value.hint or "")


def test_the_plan_says_which_tags_are_managed_and_which_were_found() -> None:
    plan = subnet_tag_plan(
        "llmctl-dev",
        [("subnet-u1", ELB_TAG, "1"), ("subnet-p1", DISCOVERY_TAG, "llmctl-dev")],
        {"subnet-u1": {ELB_TAG: ""}},
    )
    assert [(t.describe(), t.found is None) for t in plan] == [
        ("subnet-u1 kubernetes.io/role/elb=", False),
        ("subnet-p1 karpenter.sh/discovery=llmctl-dev", True),
    ]
