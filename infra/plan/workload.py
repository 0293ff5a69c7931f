"""The workload stacks of `llmctl plan --offline`: each blueprint's workload program run under
Pulumi's mocks on the platform the plan builds (no credentials, no cluster, no token)."""

from __future__ import annotations

from dataclasses import dataclass

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import pool
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.lifecycle.engine import workload_project
from llmctl.infra.names import namespace, workload_stack
from llmctl.infra.plan.offline import OfflineMocks, Registered, run_offline
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.manifests import pool_capacity_types
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.program import build_workload
from llmctl.infra.workload.scheduling.pool_facts import PoolFacts

# Handed to the program in place of a Hugging Face token: it only lands in a Kubernetes Secret,
# whose data the plan shows redacted, so the plan never depends on the caller's token.
PLACEHOLDER_HF_TOKEN = "hf_offline_plan_placeholder"


@dataclass
class WorkloadPlan:
    """One blueprint's workload stack in an offline plan."""

    blueprint: Blueprint
    project: str
    stack: str
    resources: list[Registered]
    namespace: str = ""


def run_workload_offline(
    blueprint: Blueprint, platform: PlatformConfig, workload: str | None = None
) -> WorkloadPlan:
    """Run the blueprint's workload program under mocks, as a preview, on `platform`'s pools: the
    stack `up` would deploy (`<env>` or, for a named workload, `<env>.<workload>` in namespace
    `<blueprint>-<workload>`)."""

    core_type = str(hardware().platform_fixed.core_nodes["instance_type"])
    facts = PlatformFacts.for_blueprint(blueprint, stack=platform.stack, region=platform.region)
    # The environment's platform is the union of its workloads' needs: every pool of the plan, with
    # the capacity types its NodePool allows (`reserved` added where a blueprint reserves capacity),
    # as the platform stack exports them.
    facts = facts.model_copy(
        update={
            "cluster_name": platform.cluster_name,
            "pools": [
                PoolFacts.from_spec(pool(name), core_type).model_copy(
                    update={
                        "capacity_types": list(
                            pool_capacity_types(pool(name), platform.capacity_reservations.get(name))
                        )
                    }
                )
                for name in platform.pools
            ],
        }
    )
    stack = workload_stack(platform.stack, workload)
    config = WorkloadConfig(
        blueprint=blueprint,
        stack=stack,
        platform=facts,
        hf_token_present=True,
        namespace=namespace(blueprint.name, workload),
    )
    registered = run_offline(
        lambda: build_workload(config, PLACEHOLDER_HF_TOKEN),
        project=workload_project(blueprint.name),
        stack=stack,
        mocks=OfflineMocks(region=platform.region, computed=False),
        preview=True,
    )
    return WorkloadPlan(blueprint, workload_project(blueprint.name), stack, registered, config.ns)
