"""What the controllers do with a change to a deployed workload (issue 51): the pure rules.

Objects in (the Kubernetes objects as the builders render them, or as the stack's saved state holds
their inputs), :class:`Rollout` records out. No pulumi, boto3 or kubernetes import: `plan`, `up` and
the tests call it alike. Each rule names the controller source it comes from; the facts are recorded
beside the tests (tests/workload/data/rollout_sources.yaml) and held to these constants there.

- RayService (ray-project/kuberay v1.7.0, commit 59d663ae): the RayCluster spec is compared by a hash
  that mutes the worker groups' replicas, min/max replicas and workersToDelete, every template's
  tolerations and scheduling gates, and the RayCluster's own upgradeStrategy
  (ray-operator/controllers/ray/utils/util.go `GenerateHashWithoutReplicasAndWorkersToDelete`, lines
  645-668), and `suspend` (rayservice_controller.go `rayClusterSpecForHashing`, 1498-1502). Hash equal:
  nothing happens to the cluster (`shouldUpdateCluster` 1351-1377 and `shouldPrepareNewCluster`
  1409-1437 both answer no), so a replicas-only change never reaches a running cluster. Equal over
  the cluster's first N worker groups with groups appended: the active cluster is updated in place
  (`isClusterSpecHashEqual(partial=true)`, 1379-1407). Otherwise: a complete second RayCluster when
  zero-downtime upgrade is on (`isZeroDowntimeUpgradeEnabled`, 868-896: `spec.upgradeStrategy.type`
  unset or `NewCluster`), nothing at all when it is `None`. `serveConfigV2` changes are submitted to
  the serving cluster in place (`checkIfNeedSubmitServeApplications`, 1551).
- Deployment (kubernetes/kubernetes): a pod-template change rolls by `RollingUpdate`, defaulted to
  maxSurge 25% / maxUnavailable 25% (pkg/apis/apps/v1/defaults.go `SetDefaults_Deployment`, commit
  a79f3c78); maxSurge rounds up, maxUnavailable down, both 0 makes maxUnavailable 1
  (pkg/controller/deployment/util/deployment_util.go `ResolveFenceposts`, commit 277391ee).
- Job (pulumi/pulumi-kubernetes provider/pkg/provider/diff.go `forceNewProperties`, the `job` list,
  commit 00302beb): a change to spec.template, completions, parallelism or selector replaces the Job.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from llmctl.infra.workload.scheduling.pods import NodeShape, node_shape

Obj = dict[str, Any]
RolloutKind = Literal[
    "unchanged",
    "serve-config",
    "cluster-in-place",
    "new-cluster",
    "replace-cluster",
    "rolling-surge",
    "rolling-replace",
    "job-replaced",
    "updated",
]
Strategy = Literal["surge", "replace"]
STRATEGIES: tuple[Strategy, ...] = ("surge", "replace")

KUBERAY = "ray-project/kuberay v1.7.0 (59d663ae)"
RAYSERVICE_CONTROLLER = f"{KUBERAY} ray-operator/controllers/ray/rayservice_controller.go"
SOURCE_HASH = (
    f"{KUBERAY} ray-operator/controllers/ray/utils/util.go GenerateHashWithoutReplicasAndWorkersToDelete"
)
SOURCE_NEW_CLUSTER = f"{RAYSERVICE_CONTROLLER} shouldPrepareNewCluster, isZeroDowntimeUpgradeEnabled"
SOURCE_IN_PLACE = f"{RAYSERVICE_CONTROLLER} shouldUpdateCluster, isClusterSpecHashEqual(partial)"
SOURCE_SERVE = f"{RAYSERVICE_CONTROLLER} checkIfNeedSubmitServeApplications"
SOURCE_ROLLING = (
    "kubernetes/kubernetes pkg/controller/deployment/util/deployment_util.go ResolveFenceposts (277391ee); "
    "pkg/apis/apps/v1/defaults.go SetDefaults_Deployment (a79f3c78)"
)
SOURCE_JOB = "pulumi/pulumi-kubernetes provider/pkg/provider/diff.go forceNewProperties job (00302beb)"
SOURCE_REPLACE = f"llmctl upgrade.strategy replace; {RAYSERVICE_CONTROLLER} shouldPrepareNewCluster"

# RayClusterSpec fields KubeRay sets to nil before hashing (util.go 645-668, rayClusterSpecForHashing
# 1498-1502), as paths under the RayService's rayClusterConfig; `*` is every worker group.
HASH_MUTED: tuple[str, ...] = (
    "headGroupSpec.template.spec.tolerations",
    "headGroupSpec.template.spec.schedulingGates",
    "workerGroupSpecs.*.replicas",
    "workerGroupSpecs.*.maxReplicas",
    "workerGroupSpecs.*.minReplicas",
    "workerGroupSpecs.*.scaleStrategy.workersToDelete",
    "workerGroupSpecs.*.template.spec.tolerations",
    "workerGroupSpecs.*.template.spec.schedulingGates",
    "upgradeStrategy",
    "suspend",
)
# spec.upgradeStrategy.type -> zero-downtime upgrade on (isZeroDowntimeUpgradeEnabled, 868-896; the
# operator's ENABLE_ZERO_DOWNTIME env unset, as llmctl's KubeRay chart values leave it)
ZERO_DOWNTIME: dict[str | None, bool] = {None: True, "NewCluster": True, "None": False}
# Kubernetes' Deployment defaults (SetDefaults_Deployment)
DEFAULT_MAX_SURGE = "25%"
DEFAULT_MAX_UNAVAILABLE = "25%"
# Job fields whose change makes pulumi-kubernetes replace the Job (diff.go, `job`)
JOB_FORCE_NEW: tuple[str, ...] = ("completions", "parallelism", "selector", "template")


@dataclass(frozen=True)
class Rollout:
    """What one object's controller does with the change."""

    kind: RolloutKind
    object: str  # "RayService/llama2-inf2" (kind/name)
    text: str  # one line in words
    source: str  # the controller source the rule comes from
    extra_nodes: int = 0  # accelerator nodes needed beside the running ones while old and new both run
    instance_type: str | None = None
    extra_usd_per_hour: float = 0.0
    downtime: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys (`plan --json`, `up --json`)."""
        data = asdict(self)
        data["extra_usd_per_hour"] = round(self.extra_usd_per_hour, 4)
        return data


# ---- KubeRay's hash ----------------------------------------------------------------------------------
def _drop(node: Any, parts: list[str]) -> None:
    if not parts or node is None:
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        for item in node if isinstance(node, list) else []:
            _drop(item, rest)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if rest:
        _drop(node[head], rest)
        if node[head] == {} and head == "scaleStrategy":  # Go's empty struct and an absent one hash alike
            del node[head]
    else:
        del node[head]


def _numbers(node: Any) -> Any:
    """Integral floats as ints: a stack's saved inputs may hold every number as a float64 (Pulumi's
    property values; the protobuf Struct that carries them has doubles only), the builders write ints,
    and KubeRay hashes the typed Go struct, where `600` and `600.0` are the same int32."""
    if isinstance(node, dict):
        return {key: _numbers(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_numbers(value) for value in node]
    if isinstance(node, float) and node.is_integer():
        return int(node)
    return node


def hash_input(rayservice: Obj, groups: int | None = None) -> Obj:
    """The RayService's rayClusterConfig as KubeRay hashes it: the muted fields dropped; with `groups`,
    only the first `groups` worker groups (`isClusterSpecHashEqual(partial=true)`)."""
    spec: Obj = _numbers(copy.deepcopy((rayservice.get("spec") or {}).get("rayClusterConfig") or {}))
    if groups is not None:
        spec["workerGroupSpecs"] = list(spec.get("workerGroupSpecs") or [])[:groups]
    for path in HASH_MUTED:
        _drop(spec, path.split("."))
    return spec


def cluster_hash(rayservice: Obj, groups: int | None = None) -> str:
    """KubeRay's hash inputs as a stable digest (sha256 of canonical JSON, not Go's bytes: two objects
    compare equal here exactly when KubeRay's hashes of them do)."""
    text = json.dumps(hash_input(rayservice, groups), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def zero_downtime(rayservice: Obj) -> bool:
    """Whether KubeRay builds a second RayCluster for a cluster-spec change (`isZeroDowntimeUpgradeEnabled`)."""
    kind = ((rayservice.get("spec") or {}).get("upgradeStrategy") or {}).get("type")
    return ZERO_DOWNTIME.get(kind, False)  # any other type is "not NewCluster": off (feature gate off)


def desired_workers(group: Obj) -> int:
    """A worker group's pods as KubeRay starts them (`GetWorkerGroupDesiredReplicas`, util.go 389-407):
    replicas clamped to [minReplicas, maxReplicas], times numOfHosts."""
    low = int(group.get("minReplicas") or 0)
    high = group.get("maxReplicas")
    replicas = group.get("replicas")
    if group.get("suspend"):
        return 0
    count = low if replicas is None or int(replicas) < low else int(replicas)
    if high is not None:
        count = min(count, int(high))
    return count * int(group.get("numOfHosts") or 1)


# ---- Kubernetes' rolling update ---------------------------------------------------------------------
def scaled(value: int | str, total: int, round_up: bool) -> int:
    """An int-or-percent against `total` (apimachinery `GetScaledValueFromIntOrPercent`)."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    share = int(text[:-1]) * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def resolve_fenceposts(max_surge: int | str, max_unavailable: int | str, desired: int) -> tuple[int, int]:
    """(surge, unavailable) pods of a rolling update (`ResolveFenceposts`)."""
    surge = scaled(max_surge, desired, True)
    unavailable = scaled(max_unavailable, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


# ---- the rules --------------------------------------------------------------------------------------
def _key(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))


def _label(obj: Obj) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _worker_nodes(groups: Sequence[Obj]) -> tuple[int, NodeShape | None, int]:
    """(accelerator nodes, their shape, pods) of some worker groups at their desired replicas."""
    nodes, shape, pods = 0, None, 0
    for group in groups:
        count = desired_workers(group)
        pods += count
        found = node_shape(((group.get("template") or {}).get("spec")) or {})
        if found is not None:
            shape = shape or found
            nodes += found.nodes(count)
    return nodes, shape, pods


def _rayservice(old: Obj, new: Obj, strategy: Strategy) -> list[Rollout]:
    label = _label(new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    found: list[Rollout] = []
    old_cluster, new_cluster = old_spec.get("rayClusterConfig"), new_spec.get("rayClusterConfig")
    if old_cluster != new_cluster:
        found.append(_cluster_change(old, new, label, strategy))
    if old_spec.get("serveConfigV2") != new_spec.get("serveConfigV2"):
        found.append(
            Rollout(
                "serve-config",
                label,
                "the Serve application is redeployed in the running cluster (no new pods): its replicas "
                "restart and load the model again",
                SOURCE_SERVE,
            )
        )
    rest = sorted(
        key
        for key in set(old_spec) | set(new_spec)
        if key not in ("rayClusterConfig", "serveConfigV2") and old_spec.get(key) != new_spec.get(key)
    )
    if rest:
        found.append(
            Rollout(
                "updated",
                label,
                f"{', '.join(rest)} change on the RayService: no pod restarts",
                SOURCE_NEW_CLUSTER,
            )
        )
    return found


def _cluster_change(old: Obj, new: Obj, label: str, strategy: Strategy) -> Rollout:
    groups = list(((new.get("spec") or {}).get("rayClusterConfig") or {}).get("workerGroupSpecs") or [])
    old_groups = list(((old.get("spec") or {}).get("rayClusterConfig") or {}).get("workerGroupSpecs") or [])
    before = cluster_hash(old)
    if cluster_hash(new) == before:
        return Rollout(
            "unchanged",
            label,
            "only fields KubeRay leaves out of its cluster hash changed (worker replicas, min/max replicas, "
            "tolerations): the running RayCluster keeps its old values until the next cluster change",
            SOURCE_HASH,
        )
    if len(groups) > len(old_groups) and cluster_hash(new, len(old_groups)) == before:
        added = groups[len(old_groups) :]
        nodes, shape, pods = _worker_nodes(added)
        names = ", ".join(str(g.get("groupName")) for g in added)
        return Rollout(
            "cluster-in-place",
            label,
            f"worker group(s) {names} appended: the running RayCluster is updated in place, "
            f"{_plural(pods, 'new worker pod')}, no pod of the old groups restarts",
            SOURCE_IN_PLACE,
            extra_nodes=nodes,
            instance_type=shape.instance_type if shape else None,
            extra_usd_per_hour=nodes * shape.usd_per_hour if shape else 0.0,
        )
    if strategy == "replace":
        # the rebuilt cluster lands on the nodes the old one frees; only its growth needs new nodes
        nodes, shape, _ = _worker_nodes(groups)
        before_nodes, _, _ = _worker_nodes(old_groups)
        grows = max(0, nodes - before_nodes)
        more = f"; it has {grows} x {shape.instance_type} more than the old one" if grows and shape else ""
        return Rollout(
            "replace-cluster",
            label,
            "the cluster spec changed: llmctl deletes the running RayCluster after the update and KubeRay "
            f"builds the new one (upgradeStrategy None); the endpoint is down until the new cluster serves{more}",
            SOURCE_REPLACE,
            extra_nodes=grows if shape else 0,
            instance_type=shape.instance_type if shape and grows else None,
            extra_usd_per_hour=grows * shape.usd_per_hour if shape else 0.0,
            downtime=True,
        )
    if not zero_downtime(new):
        return Rollout(
            "unchanged",
            label,
            "the cluster spec changed but upgradeStrategy is None: KubeRay leaves the running RayCluster as "
            "it is until it is deleted (`llmctl up --replace` does that)",
            SOURCE_NEW_CLUSTER,
        )
    nodes, shape, pods = _worker_nodes(groups)
    what = f"{nodes} x {shape.instance_type}" if shape else _plural(pods, "worker pod")
    return Rollout(
        "new-cluster",
        label,
        f"the cluster spec changed: KubeRay builds a second RayCluster ({what} and a head pod) beside the "
        "running one, switches traffic when it is ready, then deletes the old one; both run meanwhile",
        SOURCE_NEW_CLUSTER,
        extra_nodes=nodes,
        instance_type=shape.instance_type if shape else None,
        extra_usd_per_hour=nodes * shape.usd_per_hour if shape else 0.0,
    )


def _deployment(old: Obj, new: Obj) -> list[Rollout]:
    label = _label(new)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_spec.get("template") == new_spec.get("template"):
        if old_spec.get("replicas") != new_spec.get("replicas"):
            return [
                Rollout(
                    "updated",
                    label,
                    f"replicas {old_spec.get('replicas', 1)} -> {new_spec.get('replicas', 1)}: pods are "
                    "added or removed, none restarts",
                    SOURCE_ROLLING,
                )
            ]
        return []
    replicas = int(new_spec.get("replicas", 1))
    strategy = new_spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return [
            Rollout(
                "rolling-replace",
                label,
                f"every old pod ({replicas}) stops, then the new ones start (Recreate)",
                SOURCE_ROLLING,
                downtime=True,
            )
        ]
    rolling = strategy.get("rollingUpdate") or {}
    surge, unavailable = resolve_fenceposts(
        rolling.get("maxSurge", DEFAULT_MAX_SURGE),
        rolling.get("maxUnavailable", DEFAULT_MAX_UNAVAILABLE),
        replicas,
    )
    shape = node_shape(((new_spec.get("template") or {}).get("spec")) or {})
    if surge > 0:
        nodes = shape.nodes(min(surge, replicas)) if shape else 0
        where = f" ({nodes} x {shape.instance_type} more while both run)" if shape and nodes else ""
        return [
            Rollout(
                "rolling-surge",
                label,
                f"rolling update of {_plural(replicas, 'pod')}: up to {surge} new pod(s) start beside the old "
                f"ones{where}, an old pod stops when a new one is ready (maxSurge {surge}, maxUnavailable "
                f"{unavailable})",
                SOURCE_ROLLING,
                extra_nodes=nodes,
                instance_type=shape.instance_type if shape and nodes else None,
                extra_usd_per_hour=nodes * shape.usd_per_hour if shape else 0.0,
            )
        ]
    return [
        Rollout(
            "rolling-replace",
            label,
            f"rolling update of {_plural(replicas, 'pod')}: {unavailable} old pod(s) stop before new ones start "
            f"(maxSurge 0, maxUnavailable {unavailable})",
            SOURCE_ROLLING,
            downtime=unavailable >= replicas,
        )
    ]


def _job(old: Obj, new: Obj) -> list[Rollout]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    changed = [field for field in JOB_FORCE_NEW if old_spec.get(field) != new_spec.get(field)]
    if not changed:
        return []
    return [
        Rollout(
            "job-replaced",
            _label(new),
            f"{', '.join('spec.' + f for f in changed)} changed: Pulumi deletes the Job and creates it again, "
            "so its pod runs again",
            SOURCE_JOB,
        )
    ]


def predict(old: Sequence[Obj], new: Sequence[Obj], *, strategy: Strategy) -> list[Rollout]:
    """What the controllers do when the deployed objects `old` become `new`, in `new`'s apply order.
    Objects only in `new` (created) or only in `old` (deleted) roll nothing and are left out: Pulumi's
    own preview lists them."""
    before = {_key(obj): obj for obj in old}
    found: list[Rollout] = []
    for obj in new:
        previous = before.get(_key(obj))
        if previous is None:
            continue
        kind = obj.get("kind")
        if kind == "RayService":
            found.extend(_rayservice(previous, obj, strategy))
        elif kind == "Deployment":
            found.extend(_deployment(previous, obj))
        elif kind == "Job":
            found.extend(_job(previous, obj))
    return found


def extra_nodes(rollouts: Sequence[Rollout]) -> dict[str, int]:
    """Accelerator nodes needed beside the running ones, per instance type."""
    needed: dict[str, int] = {}
    for item in rollouts:
        if item.extra_nodes and item.instance_type:
            needed[item.instance_type] = needed.get(item.instance_type, 0) + item.extra_nodes
    return needed
