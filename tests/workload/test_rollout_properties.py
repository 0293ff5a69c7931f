"""The RayService rules of llmctl.infra.workload.scheduling.rollout stated once and searched over generated
changes of a rendered RayService (KubeRay v1.7.0's decision, tests/workload/data/rollout_sources.yaml):

- a change of only the fields KubeRay's hash mutes never builds a cluster and never needs a node;
- a change of any hashed field of a pod template builds a second cluster under NewCluster (with the
  worker nodes of the whole new cluster), nothing under None, a replacement (no node, downtime) with
  strategy replace;
- worker groups appended to an otherwise equal cluster update it in place with only their nodes."""

from __future__ import annotations

import copy
import functools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from workload_helpers import find, rendered

from llmctl.infra.workload.scheduling import rollout
from llmctl.infra.workload.scheduling.rollout import predict

Obj = dict[str, Any]
MUTED = [path for path in rollout.HASH_MUTED]
# hashed fields of the pod templates (any of them moves the hash): where a code, image or resource change lands
HASHED = [
    "headGroupSpec.template.spec.containers.0.args",
    "headGroupSpec.template.spec.containers.0.image",
    "workerGroupSpecs.0.template.spec.containers.0.image",
    "workerGroupSpecs.0.template.spec.containers.0.env",
    "workerGroupSpecs.0.template.metadata.annotations",
    "workerGroupSpecs.0.rayStartParams",
    "rayVersion",
]


@functools.cache
def base() -> Obj:
    return find(rendered("llama2-inf2"), "RayService")


def put(cluster: Obj, path: str, value: Any) -> None:
    node: Any = cluster
    parts = path.replace("*", "0").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def changed(paths: list[str], seed: int, upgrade: str | None = None) -> Obj:
    obj = copy.deepcopy(base())
    cluster = obj["spec"]["rayClusterConfig"]
    for index, path in enumerate(paths):
        put(
            cluster,
            path,
            {"changed": f"{seed}-{index}"} if not path.endswith(("replicas", "Replicas")) else seed,
        )
    if upgrade is not None:
        obj["spec"]["upgradeStrategy"] = {"type": upgrade}
    return obj


@given(
    st.lists(st.sampled_from(MUTED), min_size=1, unique=True),
    st.integers(0, 50),
    st.sampled_from(["surge", "replace"]),
)
def test_muted_fields_alone_never_build_a_cluster(paths: list[str], seed: int, strategy: str) -> None:
    found = predict([base()], [changed(paths, seed)], strategy=strategy)  # type: ignore[arg-type]
    assert [r.kind for r in found] == ["unchanged"]
    assert not any(r.extra_nodes or r.downtime for r in found)


@given(
    st.lists(st.sampled_from(HASHED), min_size=1, unique=True),
    st.lists(st.sampled_from(MUTED), unique=True),
    st.integers(0, 50),
    st.sampled_from([None, "NewCluster", "None"]),
    st.sampled_from(["surge", "replace"]),
)
def test_a_hashed_change_follows_the_upgrade_type_and_strategy(
    hashed: list[str], muted: list[str], seed: int, upgrade: str | None, strategy: str
) -> None:
    new = changed(hashed + muted, seed, upgrade)
    [cluster, *rest] = predict([base()], [new], strategy=strategy)  # type: ignore[arg-type]
    assert all(r.kind == "updated" for r in rest)  # the upgradeStrategy field itself restarts nothing
    if strategy == "replace":  # the rebuilt cluster reuses the freed nodes: only its growth is extra

        def workers(obj: dict[str, Any]) -> int:
            return sum(
                rollout.desired_workers(g) for g in obj["spec"]["rayClusterConfig"]["workerGroupSpecs"]
            )

        grows = max(0, workers(new) - workers(base()))
        assert (cluster.kind, cluster.extra_nodes, cluster.downtime) == ("replace-cluster", grows, True)
    elif upgrade == "None":
        assert (cluster.kind, cluster.extra_nodes) == ("unchanged", 0)
    else:
        groups = new["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        workers = sum(rollout.desired_workers(g) for g in groups)
        assert (
            cluster.kind == "new-cluster" and cluster.extra_nodes == workers
        )  # one inf2.48xlarge per worker
        assert cluster.instance_type == "inf2.48xlarge" and not cluster.downtime


@given(st.integers(1, 3), st.integers(0, 4), st.lists(st.sampled_from(MUTED), unique=True))
def test_appended_groups_update_in_place_with_their_nodes_only(
    groups: int, replicas: int, muted: list[str]
) -> None:
    new = changed(muted, 7)
    cluster = new["spec"]["rayClusterConfig"]
    template = copy.deepcopy(base()["spec"]["rayClusterConfig"]["workerGroupSpecs"][0])
    for index in range(groups):
        cluster["workerGroupSpecs"].append(
            {
                **template,
                "groupName": f"extra-{index}",
                "replicas": replicas,
                "minReplicas": 0,
                "maxReplicas": 4,
            }
        )
    [found] = predict([base()], [new], strategy="surge")
    assert found.kind == "cluster-in-place" and found.extra_nodes == groups * replicas
