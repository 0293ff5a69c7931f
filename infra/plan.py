"""`llmctl plan --offline`: what the platform program would register, before anyone has
credentials, plus the policy verdict on that graph."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmctl.errors import BlueprintError
from llmctl.infra.offline import UNKNOWN, OfflineMocks, Registered, run_offline
from llmctl.infra.platform.config import PROJECT, PlatformConfig
from llmctl.infra.policy import Violation, check_policy, errors

# Inputs worth showing per resource type (all others: every input except tags and noise).
KEY_INPUTS: dict[str, tuple[str, ...]] = {
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/subnet:Subnet": ("cidrBlock", "availabilityZone", "tags"),
    "eks:index:Cluster": (
        "name", "version", "authenticationMode", "endpointPublicAccess", "publicAccessCidrs",
        "encryptionConfigKeyArn", "enabledClusterLogTypes", "skipDefaultNodeGroup",
    ),
    "aws:eks/nodeGroup:NodeGroup": ("amiType", "instanceTypes", "scalingConfig", "labels", "launchTemplate"),
    "aws:eks/addon:Addon": ("addonName", "addonVersion"),
    "kubernetes:helm.sh/v3:Release": ("chart", "version", "namespace", "repositoryOpts"),
    "kubernetes:karpenter.sh/v1:NodePool": ("metadata", "spec"),
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": ("metadata", "spec"),
    "aws:s3/bucket:Bucket": ("bucketPrefix", "forceDestroy"),
}  # fmt: skip
_NOISE = {"tags", "__defaults", "policy", "assumeRolePolicy", "values", "configurationValues"}


@dataclass
class PlanResult:
    """The offline plan: config, resource tree and policy verdict."""

    config: PlatformConfig
    resources: list[Registered]
    violations: list[Violation]

    @property
    def ok(self) -> bool:
        """True when no policy error was found (warnings do not fail)."""
        return not errors(self.violations)

    def counts(self) -> dict[str, int]:
        """Resources per type."""
        counts: dict[str, int] = {}
        for res in self.resources:
            counts[res.type] = counts.get(res.type, 0) + 1
        return dict(sorted(counts.items()))

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape for `llmctl plan --json`."""
        return {
            "ok": self.ok,
            "stack": self.config.stack,
            "cluster_name": self.config.cluster_name,
            "region": self.config.region,
            "pools": self.config.pools,
            "resource_count": len(self.resources),
            "resources": [res.to_dict() for res in self.resources],
            "violations": [v.to_dict() for v in self.violations],
            "unknown": UNKNOWN,
        }


SECRET = "[secret]"


def _key_inputs(res: Registered) -> dict[str, Any]:
    wanted = KEY_INPUTS.get(res.type)
    keys = (
        [key for key in wanted if key in res.inputs]
        if wanted is not None
        else [k for k in res.inputs if k not in _NOISE]
    )
    secret_roots = {path.split(".")[0].split("[")[0] for path in res.secret_inputs}
    return {key: SECRET if key in secret_roots else res.inputs[key] for key in keys}


def plan_view(resources: Sequence[Registered]) -> list[Registered]:
    """The plan's view of registered resources: the same records with only their key inputs
    (secrets masked)."""
    return [replace(res, inputs=_key_inputs(res)) for res in resources]


def run_platform_offline(config: PlatformConfig, *, preview: bool = True) -> list[Registered]:
    """Run the platform program for `config` under mocks (as a preview: computed values unknown)."""
    from llmctl.infra.platform.program import build_platform

    return run_offline(
        lambda: build_platform(config),
        project=PROJECT,
        stack=config.stack,
        config={key: value for key, value in config.to_pulumi_config().items()},
        mocks=OfflineMocks(region=config.region, computed=not preview),
        preview=preview,
    )


def offline_plan(
    blueprint_refs: Sequence[str],
    *,
    stack: str = "dev",
    region: str = "us-west-2",
    all_pools: bool = False,
    overrides: dict[str, Any] | None = None,
) -> PlanResult:
    """Plan the platform for some blueprints without credentials or the pulumi CLI."""
    from llmctl.blueprints.catalog import load_blueprint

    if not blueprint_refs and not all_pools:
        raise BlueprintError(
            "no blueprint given", "pass --blueprint NAME (see `llmctl blueprints list`) or --all-pools"
        )
    blueprints = [load_blueprint(ref) for ref in blueprint_refs]
    config = PlatformConfig.for_blueprints(
        blueprints, stack=stack, region=region, all_pools=all_pools, **(overrides or {})
    )
    registered = run_platform_offline(config)
    return PlanResult(config=config, resources=plan_view(registered), violations=check_policy(registered))


def summarize_inputs(inputs: dict[str, Any], width: int = 90) -> str:
    """One line of key inputs for the human-readable tree."""
    text = json.dumps(inputs, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."
