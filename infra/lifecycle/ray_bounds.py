"""A Ray blueprint's scaling bounds carried to the running RayCluster, which KubeRay does not do (issue 51).

Why: KubeRay v1.7.0 (ray-project/kuberay, 59d663ae) compares a RayService's cluster spec with its
RayCluster by a hash that mutes every worker group's `replicas`, `minReplicas` and `maxReplicas`
(ray-operator/controllers/ray/utils/util.go `GenerateHashWithoutReplicasAndWorkersToDelete`, 645-668).
With the hash equal, `shouldUpdateCluster` (rayservice_controller.go 1351-1377) answers no for the
active and the pending cluster, and `reconcileRayCluster` (1200-1252) updates neither; nor does
`shouldPrepareNewCluster` (1409-1437) build a new one. So a change of `scaling.min_replicas` /
`max_replicas` alone reaches the RayService and the Serve application's autoscaling config
(`serveConfigV2`, in place) but never the RayCluster. And it is the RayCluster's bounds that decide the
pods: Ray's autoscaler for KubeRay reads each worker group's `minReplicas` / `maxReplicas` from the
RayCluster CR as the group's `min_workers` / `max_workers` (ray 2.58.0
python/ray/autoscaler/_private/kuberay/autoscaling_config.py `_node_type_from_group_spec`, 204-207)
and caps its replica patches at the CR's `maxReplicas` (node_provider.py `_worker_group_max_replicas`
235-244, `_scale_request_to_patch_payload` 519-524; autoscaler v2 reads the same config,
v2/instance_manager/config.py 20 and 490, and caps the same way,
v2/instance_manager/cloud_providers/kuberay/cloud_provider.py 372-384); the RayCluster controller clamps `replicas` into
them (utils/util.go `GetWorkerGroupDesiredReplicas`, 389-407). Raising `max_replicas` never got a
worker pod more; lowering `min_replicas` never freed a node.

So `up`, after the workload stack's update, patches the bounds of the RayService's active cluster
(and a pending one) where they differ from what it rendered, with `replicas` clamped into them (the
autoscaler owns `replicas` inside the bounds: left alone). KubeRay does not undo it: the muted fields
keep the hash equal, so the RayService controller does not touch the cluster; where it does rewrite
the cluster (a KubeRay version change, worker groups appended: `modifyRayCluster`, 1442-1469) it
writes the RayService's spec, whose bounds are the patched ones.

The patch is a JSON patch (RFC 6902): each group addressed by its index with a `test` of its
`groupName` first, so a reordered list fails instead of patching the wrong group. A merge patch would
replace the whole `workerGroupSpecs` list (the autoscaler's `workersToDelete` with it), and a
strategic merge patch is not accepted for custom resources.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.infra.lifecycle.kube import kubectl_json, kubectl_text

Obj = dict[str, Any]
# a worker group's `replicas` when absent: the RayCluster CRD's default (the API server fills it in;
# ray-operator/apis/ray/v1/raycluster_types.go 445, `+kubebuilder:default:=0`)
DEFAULT_REPLICAS = 0
# the rollouts after which KubeRay itself writes the new spec into a RayCluster (rollout.py kinds)
CLUSTER_WRITTEN = ("new-cluster", "replace-cluster", "cluster-in-place")
PLAN_LINE = "the running RayCluster's bounds are patched by llmctl: KubeRay does not carry them"


@dataclass(frozen=True)
class GroupBounds:
    """One worker group's bounds as rendered (`was_*`: as deployed, None when not deployed)."""

    rayservice: str
    group: str
    min_replicas: int
    max_replicas: int
    was_min_replicas: int | None = None
    was_max_replicas: int | None = None

    @property
    def moved(self) -> bool:
        return (self.was_min_replicas, self.was_max_replicas) != (self.min_replicas, self.max_replicas)

    def text(self) -> str:
        parts = [
            f"{field} {was} -> {now}"
            for field, was, now in (
                ("minReplicas", self.was_min_replicas, self.min_replicas),
                ("maxReplicas", self.was_max_replicas, self.max_replicas),
            )
            if was != now
        ]
        return f"worker group {self.group}: {', '.join(parts) or 'unchanged'}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rayservice": self.rayservice,
            "group": self.group,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "was_min_replicas": self.was_min_replicas,
            "was_max_replicas": self.was_max_replicas,
        }


def _groups(rayservice: Obj) -> list[Obj]:
    return list(((rayservice.get("spec") or {}).get("rayClusterConfig") or {}).get("workerGroupSpecs") or [])


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def wanted_bounds(old: Sequence[Obj], new: Sequence[Obj], rollouts: Sequence[Any]) -> list[GroupBounds]:
    """The worker groups' bounds `up` carries to the running clusters: every group of each deployed
    RayService whose change KubeRay does not write into a RayCluster itself (no new, replaced or
    in-place updated cluster), with the deployed bounds beside them."""
    written = {r.object for r in rollouts if r.kind in CLUSTER_WRITTEN}
    before = {_name(o): o for o in old if o.get("kind") == "RayService"}
    found = []
    for obj in new:
        name = _name(obj)
        if obj.get("kind") != "RayService" or name not in before or f"RayService/{name}" in written:
            continue
        deployed = {str(g.get("groupName")): g for g in _groups(before[name])}
        for group in _groups(obj):
            was = deployed.get(str(group.get("groupName"))) or {}
            found.append(
                GroupBounds(
                    name,
                    str(group.get("groupName")),
                    int(group.get("minReplicas") or 0),
                    int(group["maxReplicas"]),
                    int(was.get("minReplicas") or 0) if was else None,
                    int(was["maxReplicas"]) if was.get("maxReplicas") is not None else None,
                )
            )
    return found


def patch_ops(cluster: Obj, wanted: Sequence[GroupBounds]) -> tuple[list[Obj], list[str]]:
    """The JSON patch that gives a live RayCluster the wanted bounds (empty: it has them), and what it
    changes, in words."""
    ops: list[Obj] = []
    said: list[str] = []
    by_group = {b.group: b for b in wanted}
    for index, group in enumerate((cluster.get("spec") or {}).get("workerGroupSpecs") or []):
        bounds = by_group.get(str(group.get("groupName")))
        if bounds is None:
            continue
        now = {  # ints (a number read back from a stack's state may be a float64)
            "minReplicas": int(group.get("minReplicas") or 0),
            "maxReplicas": None if group.get("maxReplicas") is None else int(group["maxReplicas"]),
            "replicas": int(group.get("replicas", DEFAULT_REPLICAS)),
        }
        replicas = min(max(int(now["replicas"] or 0), bounds.min_replicas), bounds.max_replicas)
        goal = {"minReplicas": bounds.min_replicas, "maxReplicas": bounds.max_replicas, "replicas": replicas}
        moved = [key for key in ("minReplicas", "maxReplicas", "replicas") if now[key] != goal[key]]
        if not moved:
            continue
        base = f"/spec/workerGroupSpecs/{index}"
        ops.append({"op": "test", "path": f"{base}/groupName", "value": bounds.group})
        ops += [{"op": "add", "path": f"{base}/{key}", "value": goal[key]} for key in moved]
        said.append(f"{bounds.group}: " + ", ".join(f"{key} {now[key]} -> {goal[key]}" for key in moved))
    return ops, said


def clusters_of(kubeconfig: Path | str | None, namespace: str, rayservice: str) -> list[tuple[str, str]]:
    """(role, name) of the RayService's active and pending RayClusters, as its status names them
    (ray-operator/apis/ray/v1/rayservice_types.go: `activeServiceStatus` / `pendingServiceStatus`)."""
    obj: Any = kubectl_json(kubeconfig, "get", "rayservice", rayservice, "-n", namespace)
    status = obj.get("status") or {}
    found = []
    for role, key in (("active", "activeServiceStatus"), ("pending", "pendingServiceStatus")):
        name = (status.get(key) or {}).get("rayClusterName")
        if name:
            found.append((role, str(name)))
    return found


def patch_bounds(
    kubeconfig: Path | str | None, namespace: str, wanted: Sequence[GroupBounds], note: Callable[[str], None]
) -> list[str]:
    """Give the running clusters of each RayService the wanted bounds; the clusters patched."""
    patched = []
    for rayservice in sorted({b.rayservice for b in wanted}):
        mine = [b for b in wanted if b.rayservice == rayservice]
        for role, name in clusters_of(kubeconfig, namespace, rayservice):
            cluster: Any = kubectl_json(kubeconfig, "get", "raycluster", name, "-n", namespace)
            ops, said = patch_ops(cluster, mine)
            if not ops:
                continue
            kubectl_text(
                kubeconfig, "patch", "raycluster", name, "-n", namespace, "--type=json", "-p", json.dumps(ops)
            )
            note(
                f"patched the {role} RayCluster {name} of RayService {rayservice} ({'; '.join(said)}): "
                "KubeRay leaves worker bounds out of its cluster hash and does not carry them"
            )
            patched.append(name)
    return patched
