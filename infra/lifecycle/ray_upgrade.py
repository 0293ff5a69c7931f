"""A RayService's active and pending RayClusters as KubeRay v1.7.0 reports them, with their pods,
nodes and hourly cost: what `llmctl status` shows during an upgrade and what `llmctl down` counts.

Read from ray-project/kuberay v1.7.0 (59d663ae):

- ray-operator/apis/ray/v1/rayservice_types.go 133-186: `status.activeServiceStatus.rayClusterName`
  and `status.pendingServiceStatus.rayClusterName` name the serving cluster and the one being built;
  210-238: the conditions `Ready`, `UpgradeInProgress` and `RollbackInProgress` and their reasons.
- ray-operator/controllers/ray/rayservice_controller.go calculateConditions (785-818):
  `UpgradeInProgress` is True with reason `BothActivePendingClustersExist` exactly while both names
  are set, False `NoPendingCluster` with only the active one; `RayServiceInitializing` while the first
  cluster is pending (no active one yet: that is a first start, not an upgrade).
- A RayCluster's pods carry the label `ray.io/cluster=<cluster name>` (utils/constant.go 19,
  common/pod.go 1170): that is how a pod is told to be the pending cluster's.
- Deleting the RayService deletes both clusters: its finalizer `ray.io/rayservice-finalizer`
  (utils/constant.go 350) stays until cleanUpRayClusterInstance (1256-1312) has deleted every
  RayCluster labelled for it, with no delay once the RayService is being deleted (1271-1272), and
  each RayCluster names the RayService as its controller owner (constructRayClusterForRayService,
  1544), its pods the RayCluster (raycluster_controller.go 1753, 1800). So `down` needs no step of
  its own for a pending cluster's objects; its nodes are Karpenter's, terminated by Karpenter or the
  sweep like every other node tagged for the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmctl.errors import LlmctlError, ServingError
from llmctl.infra.lifecycle.kube import kubectl_json

CLUSTER_LABEL = "ray.io/cluster"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class RayServiceClusters:
    """What a RayService's status says about its clusters."""

    rayservice: str
    namespace: str
    active: str | None
    pending: str | None
    upgrade_in_progress: bool  # UpgradeInProgress is True (both clusters exist)
    upgrade_reason: str  # that condition's reason ("" when KubeRay has not set it)
    ready: bool  # Ready is True: the Serve service has endpoints
    rollback: bool  # RollbackInProgress is True (incremental upgrades only)


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def read_rayservice(obj: dict[str, Any]) -> RayServiceClusters:
    """A RayService object (as `kubectl get rayservices -o json` lists it) in those terms."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    upgrade = _condition(status, "UpgradeInProgress")
    return RayServiceClusters(
        rayservice=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        active=((status.get("activeServiceStatus") or {}).get("rayClusterName")) or None,
        pending=((status.get("pendingServiceStatus") or {}).get("rayClusterName")) or None,
        upgrade_in_progress=upgrade.get("status") == "True",
        upgrade_reason=str(upgrade.get("reason") or ""),
        ready=_condition(status, "Ready").get("status") == "True",
        rollback=_condition(status, "RollbackInProgress").get("status") == "True",
    )


@dataclass(frozen=True)
class Node:
    """A node that runs (or ran) a pod of one of the clusters."""

    name: str
    instance_type: str | None
    instance_id: str | None  # from `spec.providerID` (aws:///<zone>/<instance id>)
    usd_per_hour: float | None  # on-demand, from the hardware catalog; None when not in it


@dataclass(frozen=True)
class ClusterUse:
    """One RayCluster's pods and the nodes they run on."""

    name: str
    pods: int
    unscheduled: int  # pods with no node yet (waiting for Karpenter, or for a quota that refuses)
    nodes: tuple[Node, ...]

    @property
    def usd_per_hour(self) -> float:
        return sum(node.usd_per_hour or 0.0 for node in self.nodes)


@dataclass(frozen=True)
class Upgrade:
    """A RayService with its clusters' pods and nodes, and what they cost per hour together."""

    clusters: RayServiceClusters
    active: ClusterUse | None
    pending: ClusterUse | None
    notes: tuple[str, ...] = field(default=())

    @property
    def both_usd_per_hour(self) -> float:
        """Every node either cluster runs on, each counted once (a node may hold pods of both)."""
        nodes = {n.name: n for use in (self.active, self.pending) if use for n in use.nodes}
        return sum(node.usd_per_hour or 0.0 for node in nodes.values())

    @property
    def pending_only_nodes(self) -> tuple[Node, ...]:
        """The nodes only the pending cluster uses: what the upgrade adds."""
        shared = {n.name for n in self.active.nodes} if self.active else set()
        return tuple(n for n in (self.pending.nodes if self.pending else ()) if n.name not in shared)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys for `status --json` and `down --json`."""
        return {
            **asdict(self.clusters),
            "active_cluster": _use_dict(self.active),
            "pending_cluster": _use_dict(self.pending),
            "both_usd_per_hour": round(self.both_usd_per_hour, 4),
            "notes": list(self.notes),
        }

    def lines(self) -> list[str]:
        """What `llmctl status` prints for this RayService."""
        return upgrade_lines(self.to_dict())


def _use_dict(use: ClusterUse | None) -> dict[str, Any] | None:
    if use is None:
        return None
    return {
        "name": use.name,
        "pods": use.pods,
        "unscheduled_pods": use.unscheduled,
        "nodes": [asdict(node) for node in use.nodes],
        "usd_per_hour": round(use.usd_per_hour, 4),
    }


def _use_text(use: dict[str, Any]) -> str:
    kinds: dict[str, int] = {}
    for node in use["nodes"]:
        kind = node["instance_type"] or "unknown type"
        kinds[kind] = kinds.get(kind, 0) + 1
    nodes = ", ".join(f"{n} x {kind}" for kind, n in kinds.items()) or "no node yet"
    waiting = f", {use['unscheduled_pods']} waiting for a node" if use["unscheduled_pods"] else ""
    return f"{use['pods']} pods on {nodes}{waiting}, about ${use['usd_per_hour']:.2f}/h"


def upgrade_lines(data: dict[str, Any]) -> list[str]:
    """The lines `llmctl status` prints for one RayService (:meth:`Upgrade.to_dict`'s data)."""
    head = f"RayService {data['rayservice']}: active cluster {data['active'] or 'none'}"
    if data["pending"] is None:
        return [head]
    kind = "upgrade in progress" if data["upgrade_in_progress"] else "first cluster starting"
    if data["rollback"]:
        kind = "rollback in progress"
    out = [f"{head}, pending cluster {data['pending']} ({kind})"]
    active, pending = data["active_cluster"], data["pending_cluster"]
    for label, use in (("active", active), ("pending", pending)):
        if use is not None:
            out.append(f"  {label} {use['name']}: {_use_text(use)}")
    if active is not None and pending is not None:
        out.append(
            f"  both clusters meanwhile: about ${data['both_usd_per_hour']:.2f}/h "
            f"(${active['usd_per_hour']:.2f}/h of it the active one)"
        )
    out += [f"  {note}" for note in data["notes"]]
    return out


def instance_id(node: dict[str, Any]) -> str | None:
    """The EC2 instance id of a node's `spec.providerID` (`aws:///us-west-2a/i-0abc...`)."""
    provider = str((node.get("spec") or {}).get("providerID") or "")
    last = provider.rsplit("/", 1)[-1]
    return last if provider.startswith("aws://") and last.startswith("i-") else None


def catalog_price(instance_type: str | None) -> float | None:
    """On-demand USD per hour of an instance type in the hardware catalog (None when not there)."""
    if not instance_type:
        return None
    from llmctl.blueprints.hardware import hardware  # lazy: the catalog only when there is a node

    row = hardware().instances.get(instance_type)
    return float(row.on_demand_usd) if row is not None else None


def cluster_use(
    name: str,
    pods: Iterable[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    price: Callable[[str | None], float | None] = catalog_price,
) -> ClusterUse:
    """The pods labelled `ray.io/cluster=<name>` (finished ones left out) and their nodes."""
    mine = [
        p
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL) == name
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    placed = sorted(
        {str((p.get("spec") or {}).get("nodeName")) for p in mine if (p.get("spec") or {}).get("nodeName")}
    )
    found = []
    for node_name in placed:
        node = nodes.get(node_name, {})
        kind = ((node.get("metadata") or {}).get("labels") or {}).get(INSTANCE_TYPE_LABEL)
        found.append(Node(node_name, kind, instance_id(node), price(kind)))
    return ClusterUse(
        name,
        len(mine),
        len(mine) - sum(1 for p in mine if (p.get("spec") or {}).get("nodeName")),
        tuple(found),
    )


def upgrades(
    rayservices: Iterable[dict[str, Any]],
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    price: Callable[[str | None], float | None] = catalog_price,
) -> list[Upgrade]:
    """Each RayService with its active and pending clusters' pods and nodes (pure: the caller lists)."""
    by_name = {str((n.get("metadata") or {}).get("name")): n for n in nodes}
    found = []
    for obj in rayservices:
        clusters = read_rayservice(obj)
        notes = []
        if clusters.pending and clusters.upgrade_in_progress:
            notes.append(
                "KubeRay switches traffic to the pending cluster once it serves, then deletes the old one after "
                "rayClusterDeletionDelaySeconds; `llmctl down` deletes both (the RayService's finalizer)"
            )
        found.append(
            Upgrade(
                clusters,
                cluster_use(clusters.active, pods, by_name, price) if clusters.active else None,
                cluster_use(clusters.pending, pods, by_name, price) if clusters.pending else None,
                tuple(notes),
            )
        )
    return found


def read_upgrades(kubeconfig: Path | str | None, namespace: str) -> list[Upgrade]:
    """The namespace's RayServices with their clusters, through kubectl (the edge of :func:`upgrades`);
    the errors of :func:`~llmctl.infra.lifecycle.kube.kubectl_json`. Empty without a RayService."""
    services = kubectl_json(kubeconfig, "get", "rayservices", "-n", namespace).get("items", [])
    if not services:
        return []
    pods = kubectl_json(kubeconfig, "get", "pods", "-n", namespace).get("items", [])
    nodes = kubectl_json(kubeconfig, "get", "nodes").get("items", [])
    return upgrades(services, pods, nodes)


# ---- `llmctl down` ---------------------------------------------------------------------------------
def pending_at_down(kubeconfig: Path | str | None, namespaces: Iterable[str]) -> list[Upgrade]:
    """The RayServices of the workloads `down` removes that have a pending second cluster; empty when
    kubectl cannot tell (`down` goes on: the sweep and its final check count every node anyway)."""

    found: list[Upgrade] = []
    for namespace in namespaces:
        try:
            found += [u for u in read_upgrades(kubeconfig, namespace) if u.clusters.pending]
        except LlmctlError:
            return []
    return found


def down_lines(found: Iterable[Upgrade]) -> list[str]:
    """What `down` says about each pending cluster before it deletes anything."""
    lines = []
    for upgrade in found:
        c, pending = upgrade.clusters, upgrade.pending
        nodes = upgrade.pending_only_nodes
        count = f"{len(nodes)} node(s) of its own" + (
            f" ({', '.join(sorted({n.instance_type or 'unknown type' for n in nodes}))})" if nodes else ""
        )
        waiting = (
            f", {pending.unscheduled} pod(s) still waiting for a node"
            if pending and pending.unscheduled
            else ""
        )
        lines.append(
            f"RayService {c.namespace}/{c.rayservice} has a pending second RayCluster {c.pending} beside "
            f"{c.active or 'no active one'} ({count}{waiting}, both about ${upgrade.both_usd_per_hour:.2f}/h): "
            "deleting the RayService deletes both clusters (KubeRay's finalizer) and their pods; their nodes "
            "go with Karpenter or the sweep"
        )
    return lines


def pending_instances(found: Iterable[dict[str, Any]]) -> dict[str, str]:
    """EC2 instance id -> 'RayCluster <name> (pending, RayService <ns>/<name>)' for the nodes only a
    pending cluster uses, from :meth:`Upgrade.to_dict` data (`down`'s final check names them)."""
    out: dict[str, str] = {}
    for data in found:
        active = {n["name"] for n in (data.get("active_cluster") or {}).get("nodes") or []}
        pending = data.get("pending_cluster") or {}
        for node in pending.get("nodes") or []:
            if node.get("instance_id") and node["name"] not in active:
                out[node["instance_id"]] = (
                    f"node of the pending RayCluster {pending['name']} of RayService "
                    f"{data['namespace']}/{data['rayservice']}"
                )
    return out


# ---- `llmctl up`: until KubeRay has switched ---------------------------------------------------------
# The labels KubeRay puts on the RayClusters of a RayService (rayservice_controller.go
# constructRayClusterForRayService 1506-1509; utils/constant.go 17-18, utils/util.go 53)
ORIGIN_NAME = "ray.io/originated-from-cr-name"
ORIGIN_KIND = "ray.io/originated-from-crd"


def still_upgrading(rayservice: dict[str, Any], clusters: Iterable[dict[str, Any]]) -> str | None:
    """What KubeRay still does with a RayService after `up` changed it, in words; None once it has
    settled: it has read the latest spec (`status.observedGeneration`, set by calculateStatus 653),
    no pending cluster is left, and the RayClusters labelled for it are the active one alone (the old
    one goes `rayClusterDeletionDelaySeconds` after the switch, cleanUpRayClusterInstance)."""
    meta = rayservice.get("metadata") or {}
    status = rayservice.get("status") or {}
    name = str(meta.get("name", ""))
    if meta.get("generation") is not None and status.get("observedGeneration") != meta.get("generation"):
        return f"RayService {name}: KubeRay has not read its new spec yet"
    found = read_rayservice(rayservice)
    if found.pending:
        return (
            f"RayService {name}: KubeRay builds RayCluster {found.pending} beside {found.active or 'none'} "
            "(both run until the new one serves; `llmctl status` shows their nodes and cost)"
        )
    old = sorted(
        str((c.get("metadata") or {}).get("name"))
        for c in clusters
        if ((c.get("metadata") or {}).get("labels") or {}).get(ORIGIN_NAME) == name
        and ((c.get("metadata") or {}).get("labels") or {}).get(ORIGIN_KIND) == "RayService"
        and (c.get("metadata") or {}).get("name") != found.active
    )
    if old:
        return (
            f"RayService {name}: traffic is on {found.active}; the old RayCluster {', '.join(old)} is deleted "
            "after rayClusterDeletionDelaySeconds"
        )
    return None


def wait_switched(
    kubeconfig: Path | str | None,
    namespace: str,
    *,
    timeout_s: float,
    on_wait: Callable[[str], None],
    poll_s: float = 10,
    watch: Any = None,
    sleep: Callable[[float], None] | None = None,
    clock: Callable[[], float] | None = None,
) -> None:
    """After a change that makes KubeRay build a second RayCluster (surge): wait until every RayService
    of the namespace has switched to its new cluster and the old one is gone, so `up` does not return
    with two clusters' nodes running; ServingError on timeout. `watch` (a
    :class:`~llmctl.infra.lifecycle.launches.LaunchWatch`) says what Karpenter says about the new
    cluster's nodes and stops the wait at a final finding (the vCPU quota refuses the second node)."""
    import time

    pause, now = sleep or time.sleep, clock or time.monotonic
    deadline = now() + timeout_s
    last = ""
    while True:
        services = kubectl_json(kubeconfig, "get", "rayservices", "-n", namespace).get("items", [])
        clusters = kubectl_json(kubeconfig, "get", "rayclusters", "-n", namespace).get("items", [])
        waiting = [text for text in (still_upgrading(s, clusters) for s in services) if text]
        if not waiting:
            return
        if watch is not None and watch.check() is not None:
            raise watch.error()
        if waiting[0] != last:
            on_wait(waiting[0])
            last = waiting[0]
        if now() > deadline:
            raise ServingError(
                f"the upgrade in namespace {namespace} has not finished after {int(timeout_s)} s: {waiting[0]}",
                "`llmctl status` shows the active and pending clusters, their pods and nodes; `llmctl up` again "
                "resumes waiting, `llmctl up --replace` replaces the cluster instead",
            )
        pause(poll_s)
