"""Day-two sequences (issue 51): what llmctl's rules predict for a change to a deployed RayService and
what KubeRay does with it (the model in kuberay_model.py), side by side.

`observe` compares one change: `predict` (llmctl/infra/workload/scheduling/rollout.py, from the `daytwo` work)
says, per RayService, whether a second RayCluster is built, the running one is updated in place, or
the Serve config is resubmitted to the running cluster; the model, fed the same objects, does one of
those (or nothing). `Ledger` keeps one RayService's model across the steps of a sequence."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kuberay_model import Operator, RayService, apply, delete_cluster, deploy, spec_hash

from llmctl.infra.workload.scheduling.rollout import Rollout, cluster_hash, predict

Obj = dict[str, Any]


def the_rayservice(objects: Sequence[Obj]) -> Obj:
    [found] = [o for o in objects if o.get("kind") == "RayService"]
    return found


@dataclass(frozen=True)
class Did:
    """What happened to one RayService's clusters: a second one built (and the switch), the running one
    updated in place, its Serve config resubmitted in place; `stale`: the cluster spec changed and
    nothing reached the running cluster (upgradeStrategy None)."""

    new_cluster: bool = False
    in_place: bool = False
    serve_config: bool = False
    stale: bool = False


def predicted(rollouts: Sequence[Rollout], old: Obj, new: Obj) -> Did:
    """`predict`'s records for the RayService `old` -> `new` as a :class:`Did`."""
    label = f"RayService/{new['metadata']['name']}"
    kinds = {r.kind for r in rollouts if r.object == label}
    built = bool(kinds & {"new-cluster", "replace-cluster"})
    moved = cluster_hash(old) != cluster_hash(new)
    return Did(
        new_cluster=built,
        in_place="cluster-in-place" in kinds,
        serve_config="serve-config" in kinds and not built,
        stale=moved and not built and "cluster-in-place" not in kinds,
    )


@dataclass
class Ledger:
    """One RayService as KubeRay's model holds it across a sequence of `up`s."""

    operator: Operator = field(default_factory=Operator)
    service: RayService | None = None
    peak: list[int] = field(default_factory=list)  # most RayClusters at once, per step

    def first(self, objects: Sequence[Obj]) -> None:
        rs = the_rayservice(objects)
        self.service = deploy(self.operator, rs["metadata"]["name"], rs["spec"])

    def change(self, objects: Sequence[Obj], *, replace: bool = False) -> Did:
        """Apply the new RayService spec (and, for llmctl's `replace`, delete the active cluster) and
        say what the model did."""
        service = self.service
        assert service is not None
        created, before_active = len(service.created), service.active
        active = service.clusters[before_active] if before_active else None
        in_place, config = (active.updated_in_place, active.serve_config) if active else (0, None)
        counting = _Peak(self.operator, service)
        apply(self.operator, service, the_rayservice(objects)["spec"])
        if replace and service.active == before_active and before_active is not None:
            delete_cluster(self.operator, service, before_active)
        counting.close()
        self.peak.append(counting.most)
        new = len(service.created) > created
        still = service.clusters.get(before_active) if before_active else None
        goal = the_rayservice(objects)["spec"].get("rayClusterConfig") or {}
        return Did(
            new_cluster=new,
            in_place=bool(still and still.updated_in_place > in_place and not new),
            serve_config=bool(still and still.serve_config != config and not new),
            stale=bool(not new and still and still.hash != spec_hash(goal)),
        )


class _Peak:
    """Counts the RayClusters after every reconcile while a change settles."""

    def __init__(self, operator: Operator, service: RayService) -> None:
        self.operator, self.most = operator, len(service.clusters)
        self._reconcile: Callable[[RayService], None] = operator.reconcile

        def counted(svc: RayService) -> None:
            self._reconcile(svc)
            self.most = max(self.most, len(svc.clusters))

        operator.reconcile = counted  # type: ignore[method-assign]

    def close(self) -> None:
        self.operator.reconcile = self._reconcile  # type: ignore[method-assign]


def observe(
    ledger: Ledger, old: Sequence[Obj], new: Sequence[Obj], strategy: str
) -> tuple[Did, Did, list[Rollout]]:
    """(what `predict` said, what the model did, the rollouts) for one change of the deployed objects."""
    rollouts = predict(old, new, strategy=strategy)  # type: ignore[arg-type]
    did = ledger.change(new, replace=any(r.kind == "replace-cluster" for r in rollouts))
    return predicted(rollouts, the_rayservice(old), the_rayservice(new)), did, rollouts
