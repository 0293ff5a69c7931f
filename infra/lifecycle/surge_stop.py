"""The launch watch's stop while KubeRay builds a second RayCluster beside a serving one (issue 51).

A final finding (the vCPU quota, no offering, a permission) during a surge does not mean the workload
is down: the old cluster still serves. What it means, read from ray-project/kuberay v1.7.0 (59d663ae)
ray-operator/controllers/ray/rayservice_controller.go:

- The pending cluster stays until it serves: the RayService's `pendingServiceStatus` is cleared only by
  the promotion (`reconcilePromotionAndServingStatus`, 631-637), a suspend (428-429) or an incremental
  rollback (709); a deleted pending RayCluster is created again while the status names it
  (`reconcileRayCluster`, 1215-1219). Its pods stay Pending and Karpenter keeps trying to launch their
  nodes, so nodes of it that did launch bill meanwhile.
- Going back to the previous code is no way out: with a pending cluster, `shouldPrepareNewCluster`
  compares the RayService with the pending cluster, not the active one (1419-1436), so the reverted
  spec makes KubeRay prepare yet another cluster of the same nodes (the rollback of 2330-2375 runs for
  incremental upgrades only, 203-216).
- `llmctl up --replace` is: upgradeStrategy None, and llmctl deletes the active cluster; the pending
  one, whose spec is the RayService's (upgradeStrategy is not hashed), gets the freed nodes and is
  promoted (:func:`llmctl.infra.lifecycle.upgrade.replace_clusters`, `replace_pending`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmctl.errors import LlmctlError, ServingError
from llmctl.infra.lifecycle.day_two import downtime_text

SOURCE = "ray-project/kuberay v1.7.0 rayservice_controller.go shouldPrepareNewCluster 1419-1436"


@dataclass(frozen=True)
class SurgeStop:
    """What `up` knows of the surge under way: to say a final launch finding for what it is."""

    blueprint: str
    namespace: str
    rayservices: tuple[str, ...]  # the RayServices KubeRay builds a second cluster for
    downtime: str  # what `--replace` costs (day_two.downtime_text)
    workload: str | None = None
    read: Callable[[], Sequence[Any]] | None = None  # ray_upgrade.read_upgrades for the namespace

    def _upgrades(self) -> list[Any]:
        if self.read is None:
            return []
        try:
            return [u for u in self.read() if u.clusters.rayservice in self.rayservices]
        except LlmctlError:
            return []  # the cluster did not answer: the message still says what is known

    def error(self, finding: Any) -> ServingError:
        """The stop: the finding, what still serves, what waits and bills, and the ways out."""
        parts = []
        for upgrade in self._upgrades() or [None]:
            parts.append(self._cluster_words(upgrade))
        named = f" --workload {self.workload}" if self.workload else ""
        hint = "; ".join(
            part
            for part in (
                finding.hint,
                f"then `llmctl up{named}` again: it waits for the pending cluster until it serves",
                f"or replace instead: `llmctl up{named} --replace` deletes the running cluster first "
                f"(downtime: {self.downtime}; the pending cluster takes its nodes)",
                "a rollback to the previous code is no way out: KubeRay compares the RayService with the "
                f"pending cluster and builds another one of the same nodes from the previous spec ({SOURCE})",
            )
            if part
        )
        return ServingError(
            f"the upgrade of {self.blueprint} cannot finish: {finding.text}. " + " ".join(parts), hint
        )

    def _cluster_words(self, upgrade: Any) -> str:
        if upgrade is None:
            return (
                f"The old RayCluster still serves {self.blueprint}; the pending one cannot get its nodes, and "
                "KubeRay keeps it and retries for ever while its pods stay Pending (`llmctl status` shows "
                "its nodes and their cost)."
            )
        clusters, pending = upgrade.clusters, upgrade.pending
        waiting = (
            f", {pending.unscheduled} pod(s) waiting for a node" if pending and pending.unscheduled else ""
        )
        nodes = upgrade.pending_only_nodes
        if nodes:
            billing = "Its nodes that did launch bill meanwhile: " + ", ".join(
                f"{n.name} ({n.instance_type or 'unknown type'}"
                + (f", ${n.usd_per_hour:,.2f}/h" if n.usd_per_hour is not None else "")
                + ")"
                for n in nodes
            )
            billing += f", about ${sum(n.usd_per_hour or 0.0 for n in nodes):,.2f}/h in all."
        else:
            billing = "None of its nodes launched: it bills nothing yet."
        return (
            f"The old RayCluster {clusters.active or '(none named)'} still serves {self.blueprint}; the pending "
            f"RayCluster {clusters.pending or '(not named yet)'} of RayService {clusters.namespace}/"
            f"{clusters.rayservice} cannot get its nodes{waiting}, and KubeRay keeps it and retries for ever "
            f"while its pods stay Pending. {billing}"
        )


def surge_stop(
    day_two: Any, namespace: str, workload: str | None, read: Callable[[], Sequence[Any]] | None
) -> SurgeStop | None:
    """The surge under way in this `up` (None: this change builds no second RayCluster)."""
    if day_two is None:
        return None
    names = tuple(
        r.object.split("/", 1)[1]
        for r in day_two.rollouts
        if r.kind == "new-cluster" and r.object.startswith("RayService/")
    )
    if not names:
        return None

    return SurgeStop(day_two.blueprint, namespace, names, downtime_text(day_two.blueprint), workload, read)
