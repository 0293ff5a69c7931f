"""`up` and `plan` against a deployed workload (issue 51): the day-two plan of this change, the
account's limits on a surge's extra nodes, and the cluster replacement of strategy replace. The
rules are :mod:`llmctl.infra.workload.rollout`'s, assembled in :mod:`llmctl.infra.lifecycle.day_two`."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from llmctl.blueprints.hf_token import hf_token
from llmctl.errors import LlmctlError
from llmctl.infra.aws.checks import Check
from llmctl.infra.lifecycle.day_two import DayTwo, assess, deployed_objects, pool_limits
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec, workload_project
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.lifecycle.ray_bounds import patch_bounds
from llmctl.infra.lifecycle.replace_cluster import delete_active_cluster, wait_replaced
from llmctl.infra.names import namespace, workload_stack
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.deploy_delivery import deliver
from llmctl.infra.workload.digests import recorded_images
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.model_revision import recorded_model_pin


def planned_change(
    engine: Engine, stack: str, bp: Any, *, region: str, workload: str | None = None, replace: bool = False
) -> DayTwo | None:
    """`plan` against the deployed stack: what the next `up --target eks` of the blueprint does to it
    (None when its workload stack is not deployed). The image digests and model commit are the ones
    the stack recorded (as `preview` takes them); nothing is uploaded or changed. `bp`: the loaded
    blueprint."""
    w_stack = workload_stack(stack, workload)
    config = WorkloadConfig(
        blueprint=bp,
        stack=w_stack,
        platform=PlatformFacts.for_blueprint(bp, stack=stack, region=region),
        hf_token_present=bool(hf_token(None)),
        namespace=namespace(bp.name, workload),
        image_pins=recorded_images(w_stack, bp.name),
        model_pin=recorded_model_pin(bp, w_stack),
        upgrade="replace" if replace else None,
    )
    return deployed_change(engine, stack, config, "eks", region)


def deployed_change(
    engine: Engine, stack: str, config: WorkloadConfig, target: str, region: str
) -> DayTwo | None:
    """What this `up` does to the deployed workload (None: nothing deployed yet, or no platform). The
    objects are rendered as `up` will render them, the delivery decided without uploading."""
    old = deployed_objects(
        engine.state_resources(StackSpec(workload_project(config.blueprint.name), config.stack))
    )
    if not old:
        return None
    facts = config.platform
    if target == "eks":
        outputs = engine.outputs(StackSpec(PLATFORM_PROJECT, stack))
        if not outputs:
            return None
        facts = PlatformFacts.from_outputs(outputs)
    rendered = deliver(config.model_copy(update={"platform": facts}), note=lambda _text: None, upload=False)
    new = build_manifests(rendered, hf_token=None)
    capacity = (
        functools.partial(surge_capacity, engine, stack, config.blueprint, facts, region)
        if target == "eks"
        else None
    )
    return assess(old, new, config.blueprint, strategy=rendered.upgrade_strategy, capacity=capacity)


def surge_capacity(
    engine: Engine,
    stack: str,
    bp: Any,
    facts: PlatformFacts,
    region: str,
    extra: dict[str, int],
    pool: str | None,
) -> list[Check]:
    """The account's limits on the extra nodes (quota, the NodePool's limits, reservations)."""
    from llmctl.infra.aws.session import new_session
    from llmctl.infra.aws.surge import check_surge

    limits = pool_limits(engine.state_resources(StackSpec(PLATFORM_PROJECT, stack)), pool) if pool else None
    return check_surge(
        new_session(region), region, bp, extra, cluster=facts.cluster_name, pool=pool, limits=limits
    )


def replace_clusters(
    progress: Progress, kube: Path, ns: str, day_two: DayTwo, *, wait: bool, timeout_s: float
) -> None:
    """Strategy replace: delete each changed RayService's active cluster; KubeRay builds the new one."""
    for item in day_two.rollouts:
        if item.kind != "replace-cluster":
            continue
        name = item.object.split("/", 1)[1]
        with progress.phase(f"replace {item.object}"):
            old = delete_active_cluster(kube, ns, name)
            if not old:
                progress.note(f"{item.object} names no active RayCluster: nothing to delete")
                continue
            progress.note(f"deleted RayCluster {old}: KubeRay builds the new one (downtime)")
            if wait:
                new = wait_replaced(kube, ns, name, old, timeout_s=timeout_s, on_wait=progress.wait)
                progress.note(f"{item.object}: new RayCluster {new}")


def carry_bounds(progress: Progress, kube: Path, ns: str, day_two: DayTwo) -> None:
    """After the update: the worker bounds KubeRay does not carry, patched into the running clusters
    (:mod:`llmctl.infra.lifecycle.ray_bounds`). A failed patch is said, not raised: the workload is
    updated, and the next `up` patches again."""
    if not day_two.bounds:
        return
    with progress.phase("worker bounds"):
        try:
            patch_bounds(kube, ns, day_two.bounds, progress.note)
        except LlmctlError as exc:
            progress.note(
                f"could not patch the running RayCluster's worker bounds ({exc.message}): it keeps its old "
                "minReplicas/maxReplicas until `llmctl up` runs again"
            )

