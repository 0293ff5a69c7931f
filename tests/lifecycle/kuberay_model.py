"""A model of KubeRay v1.7.0's RayService controller for tests: the RayClusters of one RayService,
stepped reconcile by reconcile, written from the Go source and independent of llmctl's own rules
(llmctl/infra/workload/scheduling/rollout.py predicts; this model is what the predictions are held to).

Source: ray-project/kuberay v1.7.0, commit 59d663aeec13760646da3db9c1cf8cfe883e30b7,
ray-operator/controllers/ray/rayservice_controller.go (lines below are of that file unless named):

- Reconcile (112-331): clean up dangling clusters (127), find/create/update the active and pending
  clusters (reconcileRayCluster, 1200-1254), submit Serve applications to the pending cluster, or
  to the active one only when there is no pending one and no new cluster is due (236-247), point the
  Services at the pending cluster once it is ready, else at the active one (282-304), then
  calculateStatus (643-783): promote the pending cluster when the Services point at it
  (reconcilePromotionAndServingStatus 583-641, the blue/green branch 624-627) and decide whether a
  new pending cluster is due (shouldPrepareNewCluster, 719-722).
- The hash: utils/util.go GenerateHashWithoutReplicasAndWorkersToDelete (645-668) mutes, for the head
  group, tolerations and schedulingGates; for each worker group replicas, maxReplicas, minReplicas,
  scaleStrategy.workersToDelete, tolerations and schedulingGates; and the RayCluster's upgradeStrategy;
  rayClusterSpecForHashing (1498-1502) also drops `suspend`. The created RayCluster carries that hash
  and its worker-group count as annotations (constructRayClusterForRayService, 1504-1549).
- isClusterSpecHashEqual (1379-1407), shouldUpdateCluster (1351-1377), shouldPrepareNewCluster
  (1409-1440), isZeroDowntimeUpgradeEnabled (868-895; the incremental-upgrade feature gate is off,
  as in llmctl's chart values).
- Dangling clusters are deleted `rayClusterDeletionDelaySeconds` (default 60, line 48) after they were
  first seen dangling (cleanUpRayClusterInstance 1256-1312).
- Serve applications are submitted when the cached config differs (checkIfNeedSubmitServeApplications
  1551-1570), to the cluster in place.

The model's dicts stand for Go structs: a field that is absent, null, or an empty list or map
serialises alike under the CRD types' `omitempty`, so those are dropped before hashing.

What the model leaves to its caller: whether a cluster's pods can get nodes (`can_launch`: the
quota, NodePool limits, a capacity reservation), and time (`tick`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KUBERAY_VERSION = "v1.7.0"
DEFAULT_DELETION_DELAY_S = 60.0  # RayClusterDeletionDelayDuration, line 48
# k8s.io/apimachinery/pkg/util/rand alphanums: what GenerateRayClusterName's suffix is drawn from
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

Spec = dict[str, Any]


def _compact(value: Any) -> Any:
    """Drop None, empty lists and empty maps (Go's omitempty), recursively."""
    if isinstance(value, dict):
        out = {k: _compact(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def hashed_spec(cluster_spec: Spec, groups: int | None = None) -> Spec:
    """A rayClusterConfig as KubeRay hashes it; `groups`: only the first so many worker groups
    (isClusterSpecHashEqual with partial=true, 1391-1402)."""
    spec = copy.deepcopy(cluster_spec)
    spec.pop("suspend", None)  # rayClusterSpecForHashing
    spec.pop("upgradeStrategy", None)  # util.go 664
    head = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec")
    if isinstance(head, dict):
        head.pop("tolerations", None)
        head.pop("schedulingGates", None)
    workers = list(spec.get("workerGroupSpecs") or [])
    if groups is not None:
        workers = workers[:groups]
    for group in workers:
        for key in ("replicas", "maxReplicas", "minReplicas"):
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
        pod = (group.get("template") or {}).get("spec")
        if isinstance(pod, dict):
            pod.pop("tolerations", None)
            pod.pop("schedulingGates", None)
    spec["workerGroupSpecs"] = workers
    return _compact(spec)  # type: ignore[no-any-return]


def spec_hash(cluster_spec: Spec, groups: int | None = None) -> str:
    text = json.dumps(hashed_spec(cluster_spec, groups), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def zero_downtime_enabled(upgrade_strategy: dict[str, Any] | None, env: str | None = None) -> bool:
    """isZeroDowntimeUpgradeEnabled (868-895) with the feature gate off: a set `type` decides
    (NewCluster on, anything else off); unset, ENABLE_ZERO_DOWNTIME=false (any case) turns it off."""
    kind = (upgrade_strategy or {}).get("type")
    if kind is not None:
        return bool(kind == "NewCluster")
    return (env or "").lower() != "false"


@dataclass
class RayCluster:
    """A RayCluster the RayService owns: its annotations (hash, worker groups, KubeRay version),
    its spec, the Serve config last submitted to it, and whether its pods got nodes."""

    name: str
    hash: str
    worker_groups: int
    kuberay_version: str
    spec: Spec
    serve_config: str | None = None
    launched: bool = False
    updated_in_place: int = 0
    starting: int = 1  # reconciles before its head answers (its pods start between two passes)


def construct(name: str, service_spec: Spec, version: str) -> RayCluster:
    """constructRayClusterForRayService (1504-1549)."""
    cluster = copy.deepcopy(service_spec.get("rayClusterConfig") or {})
    return RayCluster(
        name=name,
        hash=spec_hash(cluster),
        worker_groups=len(cluster.get("workerGroupSpecs") or []),
        kuberay_version=version,
        spec=cluster,
    )


def hash_equal(service_spec: Spec, cluster: RayCluster, partial: bool) -> bool:
    """isClusterSpecHashEqual (1379-1407)."""
    goal = service_spec.get("rayClusterConfig") or {}
    if not partial:
        return cluster.hash == spec_hash(goal)
    if len(goal.get("workerGroupSpecs") or []) < cluster.worker_groups:
        return cluster.hash == ""  # goalClusterHash stays "": never equal to a real hash
    return cluster.hash == spec_hash(goal, cluster.worker_groups)


@dataclass
class RayService:
    """One RayService and the RayClusters it owns, as the API server holds them."""

    name: str
    spec: Spec
    active: str | None = None  # status.activeServiceStatus.rayClusterName
    pending: str | None = None  # status.pendingServiceStatus.rayClusterName
    clusters: dict[str, RayCluster] = field(default_factory=dict)
    serving: str | None = None  # the cluster the head and serve Services select
    dangling_since: dict[str, float] = field(default_factory=dict)  # RayClusterDeletionTimestamps
    upgrade_in_progress: bool = False
    created: list[str] = field(default_factory=list)  # every RayCluster ever created, in order
    deleted: list[str] = field(default_factory=list)


@dataclass
class Operator:
    """The KubeRay operator: its version, its ENABLE_ZERO_DOWNTIME env, and the world it runs in."""

    version: str = KUBERAY_VERSION
    env_zero_downtime: str | None = None
    can_launch: Callable[[RayService, RayCluster], bool] = lambda service, cluster: True
    now: float = 0.0
    names: int = 0

    def new_name(self, service: RayService) -> str:
        """GenerateRayClusterName (util.go 369-371): the RayService's name and 5 random letters
        (deterministic here: a counter in that alphabet)."""
        self.names += 1
        n, suffix = self.names, ""
        for _ in range(5):
            n, rest = divmod(n, len(SUFFIX_ALPHABET))
            suffix = SUFFIX_ALPHABET[rest] + suffix
        assert set(suffix) <= set(SUFFIX_ALPHABET + string.digits)
        return f"{service.name}-{suffix}"

    # ---- the decisions ---------------------------------------------------------------------
    def should_update(self, service: RayService, cluster: RayCluster | None, active: bool) -> bool:
        """shouldUpdateCluster (1351-1377)."""
        if cluster is None:
            return False
        if active:
            if service.upgrade_in_progress:
                return False
            if cluster.kuberay_version != self.version:
                return True
        if hash_equal(service.spec, cluster, partial=False):
            return False
        return hash_equal(service.spec, cluster, partial=True)

    def should_prepare(
        self,
        service: RayService,
        active: RayCluster | None,
        pending: RayCluster | None,
        pending_serving: bool,
    ) -> bool:
        """shouldPrepareNewCluster (1409-1440) (no rollback: incremental upgrades are off)."""
        if pending_serving:
            return False
        if active is None and pending is None:
            return True
        cluster = pending if pending is not None else active
        assert cluster is not None
        if hash_equal(service.spec, cluster, partial=False):
            return False
        if hash_equal(service.spec, cluster, partial=True):
            return False
        return zero_downtime_enabled(service.spec.get("upgradeStrategy"), self.env_zero_downtime)

    # ---- one reconcile -------------------------------------------------------------------------
    def reconcile(self, service: RayService) -> None:
        """One pass of Reconcile (112-331) for a RayService that is not being deleted."""
        self._clean_up(service)
        active, pending = self._reconcile_clusters(service)
        pending_ready = False
        if pending is not None:
            pending_ready = self._serve(service, pending)
        active_ready = False
        if active is not None and pending is None and not self.should_prepare(service, active, None, False):
            active_ready = self._serve(service, active)
        if pending_ready:  # 282-304: the Services select the pending cluster once it is ready
            service.serving = pending.name if pending else None
        elif active_ready:
            service.serving = active.name if active else None
        self._calculate_status(service, active, pending, pending_ready or active_ready)

    def _clean_up(self, service: RayService) -> None:
        """cleanUpRayClusterInstance (1256-1312): a cluster that is neither active nor pending is
        deleted once `rayClusterDeletionDelaySeconds` passed since it was first seen so."""
        delay = service.spec.get("rayClusterDeletionDelaySeconds")
        delay_s = DEFAULT_DELETION_DELAY_S if delay is None else float(delay)
        for name in list(service.clusters):
            if name in (service.active, service.pending):
                continue
            since = service.dangling_since.get(name)
            if since is None:
                service.dangling_since[name] = self.now + delay_s
            elif self.now > since:
                del service.clusters[name]
                service.deleted.append(name)
                if service.serving == name:
                    service.serving = None

    def _reconcile_clusters(self, service: RayService) -> tuple[RayCluster | None, RayCluster | None]:
        """reconcileRayCluster (1200-1254)."""
        active = service.clusters.get(service.active) if service.active else None
        pending = service.clusters.get(service.pending) if service.pending else None
        if service.pending is not None and pending is None:
            created = construct(service.pending, service.spec, self.version)
            created.launched = self.can_launch(service, created)
            service.clusters[created.name] = created
            service.created.append(created.name)
            return active, created  # 1216-1219: the new pending cluster is returned, not yet ready
        for cluster, is_active in ((active, True), (pending, False)):
            if cluster is not None and self.should_update(service, cluster, is_active):
                goal = construct(cluster.name, service.spec, self.version)  # modifyRayCluster 1442-1469
                cluster.spec, cluster.hash = goal.spec, goal.hash
                cluster.worker_groups, cluster.kuberay_version = goal.worker_groups, goal.kuberay_version
                cluster.updated_in_place += 1
                cluster.launched = self.can_launch(service, cluster)
        return active, pending

    def _serve(self, service: RayService, cluster: RayCluster) -> bool:
        """reconcileServe (1987-2072): submit serveConfigV2 when it differs from what the cluster
        has (checkIfNeedSubmitServeApplications); ready once its pods run the applications."""
        if not cluster.launched:
            return False
        if cluster.starting > 0:
            cluster.starting -= 1
            return False
        wanted = service.spec.get("serveConfigV2")
        if cluster.serve_config != wanted:
            cluster.serve_config = wanted
        return True

    def _calculate_status(
        self, service: RayService, active: RayCluster | None, pending: RayCluster | None, services: bool
    ) -> None:
        """calculateStatus (643-783) and calculateConditions (785-818), blue/green only; `services`:
        the Services were reconciled this pass (a cluster was ready), the only case 671-699 promotes."""
        pending_serving = False
        if services and service.serving is not None:
            pending_name = service.pending
            if service.serving != service.active:  # 624-627: promotion
                service.active, service.pending = service.pending, None
            pending_serving = service.serving == pending_name
        if self.should_prepare(service, active, pending, pending_serving):
            service.pending = self.new_name(service)
        service.upgrade_in_progress = service.active is not None and service.pending is not None

    # ---- outside the controller ----------------------------------------------------------------
    def tick(self, seconds: float) -> None:
        self.now += seconds


# ---- driving it ------------------------------------------------------------------------------------
def deploy(operator: Operator, name: str, spec: Spec) -> RayService:
    """A new RayService reconciled until it serves (or cannot: its pods get no nodes)."""
    service = RayService(name=name, spec=copy.deepcopy(spec))
    settle(operator, service)
    return service


def apply(operator: Operator, service: RayService, spec: Spec) -> None:
    """`kubectl apply` (what `up`'s workload stack does) of a new RayService spec, then reconciles."""
    service.spec = copy.deepcopy(spec)
    settle(operator, service)


def delete_cluster(operator: Operator, service: RayService, name: str) -> None:
    """Someone deletes a RayCluster (llmctl's `replace` strategy deletes the active one)."""
    service.clusters.pop(name, None)
    service.deleted.append(name)
    if service.serving == name:
        service.serving = None
    settle(operator, service)


def settle(operator: Operator, service: RayService, *, step_s: float = 10.0, limit: int = 200) -> None:
    """Reconcile every `step_s` seconds (ServiceDefaultRequeueDuration is 2 s; coarser steps reach
    the same states) until nothing changes and no dangling cluster waits for its deletion."""
    last = None
    for _ in range(limit):
        operator.reconcile(service)
        state = snapshot(service)
        if state == last and not service.dangling_since.keys() & service.clusters.keys():
            return
        last = state
        operator.tick(step_s)
    # a pending cluster whose pods never get nodes never settles: leave it as it is


def snapshot(service: RayService) -> tuple[Any, ...]:
    return (
        service.active,
        service.pending,
        service.serving,
        tuple(
            sorted(
                (n, c.hash, c.serve_config, c.launched, c.updated_in_place)
                for n, c in service.clusters.items()
            )
        ),
    )
