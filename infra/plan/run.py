"""`llmctl plan --offline`: what the platform program and each blueprint's workload program would
register, before anyone has credentials, the hourly cost, and the policy verdict on the platform.

The JSON document (every input, secrets redacted) is built in :mod:`llmctl.infra.plan.doc`; the
human tree shows only key inputs (`KEY_INPUTS`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.inter_node import inter_node
from llmctl.blueprints.pricing import blueprint_cost
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BlueprintError, LlmctlError
from llmctl.infra.lifecycle.cold_start import at_zero
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.plan.doc import SECRET, canonical, full_inputs, header, placeholders, stack_entry
from llmctl.infra.plan.node_drift import drift_lines
from llmctl.infra.plan.offline import OfflineMocks, Registered, run_offline
from llmctl.infra.plan.policy import Violation, check_policy, errors
from llmctl.infra.plan.workload import WorkloadPlan, run_workload_offline
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.program import build_platform
from llmctl.infra.platform.regions import check_region_flag
from llmctl.infra.targets.base import check_names

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


class PlanInputError(LlmctlError):
    """A bad --stack or --workload name: exit 2 like a bad blueprint, since exit 1 of `plan` means
    "policy failed, the JSON is printed all the same" (CI accepts it)."""

    exit_code = 2


@dataclass
class PlanResult:
    """The offline plan: config, the platform's resources (every input, secrets redacted), each
    blueprint's workload stack, the hourly cost and the policy verdict."""

    config: PlatformConfig
    resources: list[Registered]
    violations: list[Violation]
    workloads: list[WorkloadPlan] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    workload: str | None = None  # the named workload (`--workload`) the workload stacks are planned as
    missing: list[str] = field(default_factory=list)  # blueprints left out (`--skip-missing`)
    # against the deployed stacks (not with --offline): each one's day-two plan, and what was not compared
    day_two: list[Any] = field(default_factory=list)
    day_two_notes: list[str] = field(default_factory=list)
    drift: list[Any] = field(default_factory=list)  # node_drift.PoolDrift: the deployed platform's pools

    @property
    def ok(self) -> bool:
        """True when no policy error was found (warnings do not fail)."""
        return not errors(self.violations)

    def drift_lines(self) -> list[str]:
        """What the next `up` of the platform does to the running nodes of its Karpenter pools."""
        heading = (
            f"platform {PLATFORM_PROJECT}/{self.config.stack}: the next `up` changes these Karpenter pools"
        )
        return drift_lines(self.drift, heading)

    def counts(self) -> dict[str, int]:
        """Resources per type."""
        counts: dict[str, int] = {}
        for res in self.resources:
            counts[res.type] = counts.get(res.type, 0) + 1
        return dict(sorted(counts.items()))

    def stacks(self) -> list[dict[str, Any]]:
        """The platform stack, then one workload stack per blueprint (in blueprint-name order)."""
        stacks = [stack_entry("platform", PLATFORM_PROJECT, self.config.stack, self.resources)]
        for work in sorted(self.workloads, key=lambda w: w.blueprint.name):
            entry = stack_entry("workload", work.project, work.stack, work.resources, work.blueprint.name)
            stacks.append({**entry, "namespace": work.namespace})
        return stacks

    def to_dict(self) -> dict[str, Any]:
        """The plan document of `llmctl plan --offline --json` (see docs/platform.md)."""
        stacks = self.stacks()
        document = {
            **header(),
            "ok": self.ok,
            "stack": self.config.stack,
            "workload": self.workload,
            "cluster_name": self.config.cluster_name,
            "region": self.config.region,
            "pools": self.config.pools,
            "blueprints": sorted(w.blueprint.name for w in self.workloads),
            "missing_blueprints": sorted(self.missing),
            "cost": self.cost,
            "resource_count": sum(s["resource_count"] for s in stacks),
            "stacks": stacks,
            "violations": sorted(
                (v.to_dict() for v in self.violations), key=lambda v: (v["urn"], v["rule"], v["message"])
            ),
            # what the next `up` does to each deployed workload (empty offline or when none is deployed)
            "rollouts": [plan.to_dict() for plan in sorted(self.day_two, key=lambda p: p.blueprint)],
            "rollout_notes": list(self.day_two_notes),
            # the deployed platform's Karpenter pools whose running nodes the next `up` replaces
            "drift": [pool.to_dict() for pool in self.drift],
            **placeholders(),
        }
        return dict(canonical(document))


def key_inputs(res: Registered) -> dict[str, Any]:
    """The inputs the human tree shows for a resource (secret inputs masked)."""
    wanted = KEY_INPUTS.get(res.type)
    keys = (
        [key for key in wanted if key in res.inputs]
        if wanted is not None
        else [k for k in res.inputs if k not in _NOISE]
    )
    secret_roots = {path.split(".")[0].split("[")[0] for path in res.secret_inputs}
    return {key: SECRET if key in secret_roots else res.inputs[key] for key in keys}


def plan_view(resources: Sequence[Registered]) -> list[Registered]:
    """The plan's view of registered resources: the same records with every input, secrets masked."""
    return [replace(res, inputs=full_inputs(res), secret_inputs=set(res.secret_inputs)) for res in resources]


def plan_cost(blueprints: Sequence[Blueprint]) -> dict[str, Any]:
    """Hourly cost of the environment: the platform once, plus each blueprint's serving nodes
    (on-demand catalog prices, as `llmctl cost`)."""

    catalog = hardware()
    platform = catalog.platform_hourly()
    rows: list[dict[str, Any]] = []
    for bp in sorted(blueprints, key=lambda b: b.name):
        report = blueprint_cost(bp, catalog)
        rows.append(
            {
                "blueprint": bp.name,
                "instance_type": report.instance_type,
                "nodes": report.nodes,
                "node_hourly_usd": round(report.node_hourly_usd, 4),
                "serving_hourly_usd": round(report.serving_hourly_usd, 4),
                "price_source": report.price_source,
            }
        )
        if report.nodes_per_replica > 1:  # a replica over several nodes is priced whole
            rows[-1]["nodes_per_replica"] = report.nodes_per_replica
            rows[-1]["replica_hourly_usd"] = round(report.node_hourly_usd * report.nodes_per_replica, 4)
            network = inter_node(bp)
            if network is not None:  # what NCCL runs over between them: EFA or TCP, by the image
                rows[-1]["inter_node_transport"] = network.line()
        zero = at_zero(bp, report)
        if zero is not None:  # a blueprint that scales to zero: the saving and the cold start it costs
            rows[-1]["at_zero"] = zero
    serving = sum(row["serving_hourly_usd"] for row in rows)
    return {
        "pricing": "on-demand",
        "platform_hourly_usd": round(platform, 4),
        "serving_hourly_usd": round(serving, 4),  # every blueprint's serving nodes, added up
        "workloads": rows,
        "hourly_usd": round(platform + serving, 4),
    }


def run_platform_offline(config: PlatformConfig, *, preview: bool = True) -> list[Registered]:
    """Run the platform program for `config` under mocks (as a preview: computed values unknown)."""

    return run_offline(
        lambda: build_platform(config),
        project=PLATFORM_PROJECT,  # as `llmctl up` runs it: the URNs match the real stack's
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
    workload: str | None = None,
    skip_missing: bool = False,
    deployed: bool = False,
    backend: str | None = None,
) -> PlanResult:
    """Plan the platform for some blueprints without credentials or the pulumi CLI; each blueprint's
    workload stack as `up --stack STACK [--workload NAME]` would name it. With `skip_missing`, a
    blueprint file or catalog name that does not exist (e.g. one a pull request adds, planned on
    its base revision) is left out and listed in the document, so the plan is the environment
    without it (the platform alone when none is left). With `deployed`, each blueprint whose workload
    stack exists in the backend is also compared with what is deployed (:mod:`llmctl.infra.plan.deployed`)."""

    try:
        check_names(stack, workload)
        check_region_flag(region)  # a typo is refused, not planned (subnets in us-wset-2a)
    except LlmctlError as exc:
        raise PlanInputError(exc.message, exc.hint) from None
    missing = [ref for ref in blueprint_refs if not blueprint_exists(ref)] if skip_missing else []
    blueprint_refs = [ref for ref in blueprint_refs if ref not in missing]
    if not blueprint_refs and not all_pools and not missing:
        raise BlueprintError(
            "no blueprint given", "pass --blueprint NAME (see `llmctl blueprints list`) or --all-pools"
        )
    blueprints = [load_blueprint(ref) for ref in blueprint_refs]
    config = PlatformConfig.for_blueprints(
        blueprints, stack=stack, region=region, all_pools=all_pools, **(overrides or {})
    )
    registered = run_platform_offline(config)
    viewed = plan_view(registered)
    unique = {bp.name: bp for bp in blueprints}.values()
    found = None
    if deployed:
        # lazy: the backend's code, not for --offline
        from llmctl.infra.plan.deployed import deployed_rollouts

        found = deployed_rollouts(
            list(unique),
            stack=stack,
            region=region,
            workload=workload,
            backend=backend,
            platform=[res.inputs for res in viewed],
        )
    return PlanResult(
        config=config,
        resources=viewed,
        violations=check_policy(registered),
        workloads=[_viewed(run_workload_offline(bp, config, workload)) for bp in unique],
        cost=plan_cost(list(unique)),
        workload=workload,
        missing=missing,
        day_two=found.plans if found else [],
        day_two_notes=found.notes if found else [],
        drift=found.drift if found else [],
    )


def blueprint_exists(ref: str) -> bool:
    """Whether a blueprint reference names an existing file or a catalog blueprint (a file that
    exists but does not parse still counts: it fails the plan with its own error)."""
    from pathlib import Path

    path = Path(ref).expanduser()
    if ref.endswith((".yaml", ".yml")) or "/" in ref or path.exists():
        return path.exists()
    return ref in catalog_names()


def _viewed(work: WorkloadPlan) -> WorkloadPlan:
    return replace(work, resources=plan_view(work.resources))


def _decoded(value: Any) -> Any:
    """A provider input that carries JSON as a string (the aws provider's `defaultTags`) as the value
    it holds, so the tree shows it once, not escaped twice."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _input_text(value: Any, room: int) -> str:
    """One input's value in a few characters: a scalar as it is, an object or list as compact JSON
    when it fits `room`, else as its size (`{3 keys}`, `[2 items]`); never cut inside."""
    if isinstance(value, str):
        return value
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    if len(text) <= room or not isinstance(value, (dict, list)):
        return text
    count, word = len(value), "key" if isinstance(value, dict) else "item"
    size = f"{count} {word}{'' if count == 1 else 's'}"
    return f"{{{size}}}" if isinstance(value, dict) else f"[{size}]"


def summarize_inputs(inputs: dict[str, Any], width: int = 60) -> str:
    """The key inputs of a resource for the human-readable tree: `name=value` pairs, each whole, as
    many as fit `width` characters, then how many more there are (`--json` lists them all)."""
    parts: list[str] = []
    used = 0
    for key in sorted(inputs):
        part = f"{key}={_input_text(_decoded(inputs[key]), max(width - used - len(key) - 1, 12))}"
        if parts and used + len(part) + 1 > width:
            break
        parts.append(part)
        used += len(part) + 1
    rest = len(inputs) - len(parts)
    return " ".join(parts) + (f" (+{rest} more)" if rest else "")
