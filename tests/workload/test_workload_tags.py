"""The tag keys the sweep and the leftover check read are the keys every stack resource carries
(issue 25, item 7): every taggable AWS resource of the platform and of each catalog blueprint's
workload stack has `llmctl:stack` and `llmctl:cluster`, the workload's cache role among them, and
its S3 policy is written in the account's partition."""

from __future__ import annotations

import json

import pytest
from workload_helpers import TOKEN, blueprint

from llmctl.blueprints.catalog import catalog_names
from llmctl.infra.aws.images import CLUSTER_TAG as IMAGE_REPOSITORY_TAG
from llmctl.infra.aws.sweep_kinds import BY_NAME, Candidate, Scope
from llmctl.infra.plan.offline import OfflineMocks, Registered, run_offline
from llmctl.infra.plan.policy import rule_tags
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.tags import CLUSTER_TAG, REQUIRED_TAGS, STACK_TAG
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.program import build_workload


def workload(name: str, mocks: OfflineMocks | None = None) -> tuple[WorkloadConfig, list[Registered]]:
    bp = blueprint(name)
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"cache_bucket": "llmctl-dev-us-west-2-cache"})
    config = WorkloadConfig(blueprint=bp, platform=facts)
    return config, run_offline(lambda: build_workload(config, hf_token=TOKEN), mocks=mocks)


@pytest.mark.parametrize("name", catalog_names())
def test_every_taggable_resource_of_both_stacks_carries_the_keys_the_leftover_check_reads(name: str) -> None:
    from llmctl.infra.platform.program import build_platform

    config, resources = workload(name)
    aws = [r for r in resources if r.type.startswith("aws:")]
    assert {r.type for r in aws} >= {
        "aws:iam/role:Role",
        "aws:eks/podIdentityAssociation:PodIdentityAssociation",
    }
    assert [str(v) for v in rule_tags(resources)] == []
    for res in aws:
        tags = res.inputs.get("tags")
        if tags is not None:
            assert tags[CLUSTER_TAG] == config.platform.cluster_name and tags[STACK_TAG] == config.stack
            assert not [key for key in tags if key.startswith("llmctl.dev/")]
    platform = PlatformConfig.for_blueprints([blueprint(name)])
    assert [str(v) for v in rule_tags(run_offline(lambda: build_platform(platform)))] == []
    assert REQUIRED_TAGS == (STACK_TAG, CLUSTER_TAG)


def test_the_image_repository_tag_is_the_stack_key_the_sweep_matches() -> None:
    assert IMAGE_REPOSITORY_TAG == CLUSTER_TAG
    rule = BY_NAME["ecr-repository"].owned
    scope = Scope(cluster="llmctl-dev", region="us-west-2")
    assert rule(scope, Candidate("llmctl/dev/tiny-cpu", "llmctl/dev/tiny-cpu", {CLUSTER_TAG: "llmctl-dev"}))
    assert (
        rule(
            scope,
            Candidate("llmctl/dev/tiny-cpu", "llmctl/dev/tiny-cpu", {"llmctl.dev/cluster": "llmctl-dev"}),
        )
        is None
    )


def test_the_cache_role_policy_uses_the_accounts_partition() -> None:
    _, resources = workload("llama2-inf2", OfflineMocks(region="us-gov-west-1"))
    policies = {r.name: r.inputs["policy"] for r in resources if r.type == "aws:iam/rolePolicy:RolePolicy"}
    # the serving pods', the Ray head's, the mirror Job's and the UI's
    assert sorted(policies) == ["cache-access-s3", "head-access-s3", "mirror-access-s3", "ui-access-s3"]
    assert not [text for text in policies.values() if "arn:aws:" in text]
    resources_named = [
        arn for st in json.loads(policies["cache-access-s3"])["Statement"] for arn in st["Resource"]
    ]
    assert resources_named[0] == "arn:aws-us-gov:s3:::llmctl-dev-us-west-2-cache"
    assert resources_named[1:] and all(
        arn.startswith("arn:aws-us-gov:s3:::llmctl-dev-us-west-2-cache/") for arn in resources_named[1:]
    )
    ui_named = [arn for st in json.loads(policies["ui-access-s3"])["Statement"] for arn in st["Resource"]]
    assert ui_named[0] == "arn:aws-us-gov:s3:::llmctl-dev-us-west-2-cache"
    assert ui_named[1].startswith("arn:aws-us-gov:s3:::llmctl-dev-us-west-2-cache/llmctl/wheelhouse/")
