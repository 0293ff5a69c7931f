"""`up` and `plan` against a deployed workload (issue 51): the day-two plan of this change, the
account's limits on a surge's extra nodes, and the cluster replacement of strategy replace. The
rules are :mod:`llmctl.infra.workload.scheduling.rollout`'s, assembled in :mod:`llmctl.infra.lifecycle.day_two`."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from llmctl.blueprints.hf_token import hf_token
from llmctl.errors import LlmctlError
from llmctl.infra.aws.checks import Check
from llmctl.infra.lifecycle.backend import recorded_stacks, resolve_backend
from llmctl.infra.lifecycle.day_two import DayTwo, assess, deployed_objects, downtime_text, pool_limits
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec, workload_project
from llmctl.infra.lifecycle.kube import kubectl_text
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.lifecycle.ray_bounds import patch_bounds
from llmctl.infra.lifecycle.ray_upgrade import read_upgrades
from llmctl.infra.lifecycle.replace_cluster import delete_active_cluster, wait_replaced
from llmctl.infra.names import namespace, workload_stack
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.pins.model_revision import recorded_model_pin
from llmctl.infra.workload.prepare.delivery import deliver
from llmctl.infra.workload.prepare.digests import recorded_images


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
    from llmctl.infra.aws.session import new_session  # lazy: boto3, only when a surge is checked
    from llmctl.infra.aws.surge import check_surge  # lazy: boto3 as above

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


def replace_pending(
    progress: Progress, kube: Path, ns: str, day_two: DayTwo | None, *, wait: bool, timeout_s: float
) -> None:
    """`up --replace` while a second RayCluster an earlier `up` started still waits (its nodes refused):
    the active cluster is deleted, and the pending one, whose spec is the RayService's, takes the freed
    nodes and is promoted (surge_stop.py names the KubeRay lines). RayServices `replace_clusters`
    already replaced are left alone."""

    if day_two is None or not any(r.object.startswith("RayService/") for r in day_two.rollouts):
        return  # nothing deployed, or no RayService changed: no surge of an earlier `up` to replace
    done = {r.object for r in day_two.rollouts if r.kind == "replace-cluster"}
    try:
        found_upgrades = read_upgrades(kube, ns)
    except LlmctlError as exc:
        progress.note(f"could not read the RayServices for a pending cluster to replace: {exc.message}")
        return
    for upgrade in found_upgrades:
        found = upgrade.clusters
        label = f"RayService/{found.rayservice}"
        if not (found.active and found.pending) or label in done:
            continue
        with progress.phase(f"replace {label}"):
            kubectl_text(kube, "delete", "raycluster", found.active, "-n", ns, "--wait=false")
            progress.note(
                f"deleted RayCluster {found.active}: the pending RayCluster {found.pending} takes its nodes "
                "(downtime until it serves)"
            )
            if wait:
                new = wait_replaced(
                    kube, ns, found.rayservice, found.active, timeout_s=timeout_s, on_wait=progress.wait
                )
                progress.note(f"{label}: new RayCluster {new}")


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


# ---- `llmctl doctor`: would the next upgrade fit? ---------------------------------------------------
PROBE_ANNOTATION = "llmctl.dev/next-upgrade"
UPGRADE_CHECK = "upgrade capacity"


def code_changed(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deployed objects as the next change of llmctl's code makes them: every serving pod template
    changes (the pods' commands name the wheel by its digest), shown by an annotation on the head and
    Deployment templates, which KubeRay's hash and the Deployment controller both see."""
    changed = copy.deepcopy(objects)
    for obj in changed:
        spec = obj.get("spec") or {}
        if obj.get("kind") == "RayService":
            templates = [((spec.get("rayClusterConfig") or {}).get("headGroupSpec") or {}).get("template")]
        elif obj.get("kind") == "Deployment":
            templates = [spec.get("template")]
        else:
            continue
        for template in templates:
            if isinstance(template, dict):
                meta = template.setdefault("metadata", {})
                meta["annotations"] = {**(meta.get("annotations") or {}), PROBE_ANNOTATION: "doctor"}
    return changed


def next_upgrade(engine: Engine, stack: str, bp: Any, region: str) -> DayTwo | None:
    """What the next code change of the deployed blueprint needs and whether it fits today (None: not
    deployed, or no platform): the day-two plan of the deployed objects against themselves changed as
    :func:`code_changed` says, with the strategy the blueprint declares."""
    old = deployed_objects(
        engine.state_resources(StackSpec(workload_project(bp.name), workload_stack(stack, None)))
    )
    outputs = engine.outputs(StackSpec(PLATFORM_PROJECT, stack)) if old else {}
    if not outputs:
        return None
    facts = PlatformFacts.from_outputs(outputs)
    capacity = functools.partial(surge_capacity, engine, stack, bp, facts, region)
    return assess(old, code_changed(old), bp, strategy=bp.upgrade.strategy, capacity=capacity)


def upgrade_check(found: DayTwo) -> Check:
    """`llmctl doctor`'s line for :func:`next_upgrade`."""
    if found.strategy == "replace":
        return Check(
            UPGRADE_CHECK,
            True,
            "upgrade.strategy replace: a change deletes the running RayCluster first, no extra nodes; "
            f"downtime {downtime_text(found.blueprint)}",
        )
    if not found.extra:
        return Check(UPGRADE_CHECK, True, "a code change starts no extra accelerator node")
    nodes = ", ".join(f"{n} x {t}" for t, n in sorted(found.extra.items()))
    what = f"a code change starts {nodes} beside the running ones (${found.extra_usd_per_hour:,.2f}/h while both run)"
    details = "; ".join(f"{c.name}: {c.detail}" for c in found.capacity)
    if found.refused:
        fixes = "; ".join(c.fix for c in found.refused if c.fix)
        return Check(
            UPGRADE_CHECK,
            False,
            f"{what}: it does not fit today, so the next `llmctl up` after a change refuses before changing "
            f"anything: {details}",
            f"{fixes}; or upgrade with downtime and no extra nodes: `llmctl up --replace` "
            "(or upgrade.strategy: replace in the blueprint)",
        )
    if any(c.ok is None for c in found.capacity):
        return Check(UPGRADE_CHECK, None, f"{what}: not all limits could be checked: {details}")
    return Check(UPGRADE_CHECK, True, f"{what}: it fits: {details}")


def doctor_upgrade(bp: Any, *, stack: str, region: str) -> Check | None:
    """The doctor line for a deployed blueprint (None when it is not deployed in `stack`: nothing to
    upgrade). A local file backend is read from its files first, without the pulumi CLI."""

    recorded = recorded_stacks(None, stack)
    if recorded is not None and f"{workload_project(bp.name)}/{workload_stack(stack, None)}" not in recorded:
        return None
    try:
        found = next_upgrade(Engine(resolve_backend(None)), stack, bp, region)
    except LlmctlError as exc:
        return Check(UPGRADE_CHECK, None, f"could not check: {exc.message}", exc.hint)
    return None if found is None else upgrade_check(found)
