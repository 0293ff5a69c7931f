"""`down`'s fallback when the platform destroy fails: sweep, and if an object is still stuck on a
finalizer (a Karpenter NodeClaim, NodePool or EC2NodeClass, a LoadBalancer Service) remove its
finalizers, say which and what that may leave, sweep again, then retry the destroy once.

A finalizer stuck after the sweep is usually one whose controller can no longer reach AWS (e.g. the
EC2NodeClass's `karpenter.k8s.aws/termination` with no route to EC2 and IAM). Nothing here is
silent: every removal is a note in the output and in `down --json`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.errors import EngineError, LlmctlError
from llmctl.infra.aws.sweep import sweep
from llmctl.infra.lifecycle.kube import kubectl_json, remove_finalizers
from llmctl.infra.lifecycle.teardown import is_unreachable

# (resource for kubectl, kind, namespaced), in the order their finalizers are removed.
STUCK_KINDS = (
    ("nodeclaims.karpenter.sh", "NodeClaim", False),
    ("nodepools.karpenter.sh", "NodePool", False),
    ("ec2nodeclasses.karpenter.k8s.aws", "EC2NodeClass", False),
    ("services", "Service", True),
)
LEAVES = {
    "NodeClaim": "its EC2 instance if Karpenter had not terminated it (the sweep terminates instances tagged for the cluster)",
    "NodePool": "NodeClaims and instances it still owned (the sweep terminates instances tagged for the cluster)",
    "EC2NodeClass": "its instance profile and launch templates (the sweep deletes those tagged for the cluster)",
    "Service": "its load balancer, target groups and security groups (the sweep deletes those tagged for the cluster)",
}
# How long a finalizer may still finish by itself after the sweep before it counts as stuck.
GRACE_S = 120.0
POLL_S = 10.0


@dataclass(frozen=True)
class Stuck:
    """An object being deleted (deletionTimestamp set) that still has finalizers."""

    resource: str
    kind: str
    name: str
    namespace: str
    finalizers: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def stuck_objects(kubeconfig: Path) -> list[Stuck]:
    """Objects of STUCK_KINDS that are being deleted and still wait on finalizers."""

    found = []
    for resource, kind, namespaced in STUCK_KINDS:
        try:
            items = kubectl_json(kubeconfig, "get", resource, *(["-A"] if namespaced else [])).get(
                "items", []
            )
        except LlmctlError as exc:
            if "doesn't have a resource type" in exc.message:
                continue  # the CRD is already gone, so are its objects
            raise
        for item in items:
            meta = item.get("metadata") or {}
            if meta.get("deletionTimestamp") and meta.get("finalizers"):
                found.append(
                    Stuck(
                        resource,
                        kind,
                        str(meta.get("name")),
                        str(meta.get("namespace") or "") if namespaced else "",
                        tuple(str(f) for f in meta["finalizers"]),
                    )
                )
    return found


def wait_stuck(
    kubeconfig: Path,
    *,
    grace_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Stuck]:
    """What is still stuck after giving the finalizers `grace_s` to finish by themselves."""
    deadline = clock() + grace_s
    while True:
        stuck = stuck_objects(kubeconfig)
        if not stuck or clock() >= deadline:
            return stuck
        sleep(min(POLL_S, max(deadline - clock(), 0.0)))


def release(kubeconfig: Path, stuck: list[Stuck], note: Callable[[str], None]) -> None:
    """Remove the finalizers of each stuck object, saying which and what it may leave."""

    for item in stuck:
        remove_finalizers(kubeconfig, item.resource, item.name, item.namespace or None)
        note(
            f"removed finalizer {', '.join(item.finalizers)} from {item.label} (stuck after the sweep); "
            f"it may leave {LEAVES.get(item.kind, 'what its controller would have cleaned up')}"
        )


def retry_platform_destroy(
    engine: Any,
    spec: Any,
    failure: EngineError,
    *,
    cluster: str,
    region: str,
    kubeconfig: Path | None,
    note: Callable[[str], None],
    on_event: Any = None,
    sweep_timeout_s: float = 600,
) -> bool:
    """After a failed platform destroy: sweep, release stuck finalizers (then sweep again), retry
    the destroy once. Returns what :meth:`Engine.destroy` returns; raises when the retry fails."""

    if is_unreachable(failure):
        raise failure  # no sweep under a cluster that is still there: the caller refuses
    note(f"platform destroy failed ({failure.message}); sweeping leftovers and retrying once")
    sweep(cluster, region, timeout_s=sweep_timeout_s)
    if kubeconfig is not None:
        try:
            stuck = wait_stuck(kubeconfig, grace_s=GRACE_S)
        except LlmctlError as exc:
            stuck = []
            note(f"could not look for objects stuck on a finalizer: {exc.message}")
        if stuck:
            release(kubeconfig, stuck, note)
            note("sweeping again after removing finalizers")
            sweep(cluster, region, timeout_s=sweep_timeout_s)
    else:
        note("no kubeconfig: objects stuck on a finalizer were not looked for")
    return bool(engine.destroy(spec, on_event=on_event, remove=True))
