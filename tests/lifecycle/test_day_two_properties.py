"""The day-two property (issue 51), searched by Hypothesis over sequences of changes to a deployed
llama2-inf2 (a code change, a moved image digest, a new model revision, replicas up and down, an
engine argument, the KubeRay operator's version) under an accelerator quota of 1 to 4
inf2.48xlarge, with either upgrade strategy:

- what `predict` says for each change is what KubeRay does with it (kuberay_model.py, from KubeRay
  v1.7.0's source), and
- no sequence leaves two RayClusters of the RayService once KubeRay has settled (which is when `up`
  returns: it waits for the switch and the old cluster's deletion, ray_upgrade.wait_switched), nor a second cluster
  the quota could not launch: a change whose extra nodes do not fit is refused before anything
  changes, the way `up` refuses it (the quota rule of docs/day-two.md: the nodes already
  running plus `predict`'s extra nodes against the quota), and every change that goes ahead settles
  on one cluster.

The objects are the builders' own (what the workload stack applies), rendered for each state; the
stand-in sequence (test_day_two.py) runs the same changes through `plan` and `up`."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Literal

from day_two_support import Ledger, predicted, the_rayservice
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.workload.config import Delivery, PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.scheduling.rollout import extra_nodes, predict

BP = "llama2-inf2"
NODE = "inf2.48xlarge"  # one serving pod per node: tensor parallel 24 takes all 12 Neuron devices
CHANGES = ("code", "image", "revision", "replicas up", "replicas down", "engine", "kuberay")
Obj = dict[str, Any]


@functools.cache
def blueprint(strategy: str) -> Blueprint:
    bp = load_blueprint(BP)
    return bp.model_copy(update={"upgrade": bp.upgrade.model_copy(update={"strategy": strategy})})


@dataclass(frozen=True)
class Deployed:
    """What a stack's `up` renders from: the code's digest, the image's, the model's revision, the
    replicas, one engine argument, the KubeRay operator's version."""

    strategy: Literal["surge", "replace"]
    code: int = 1
    image: int = 1
    revision: int = 0
    replicas: int = 1
    max_concurrent: int = 8
    kuberay: int = 0

    def changed(self, change: str) -> Deployed:
        if change == "code":
            return replace(self, code=self.code + 1)
        if change == "image":
            return replace(self, image=self.image + 1)
        if change == "revision":
            return replace(self, revision=self.revision + 1)
        if change == "replicas up":
            return replace(self, replicas=min(self.replicas + 1, 3))
        if change == "replicas down":
            return replace(self, replicas=max(self.replicas - 1, 1))
        if change == "engine":
            return replace(self, max_concurrent=self.max_concurrent * 2)
        assert change == "kuberay"
        return replace(self, kuberay=self.kuberay + 1)

    def objects(self) -> list[Obj]:
        bp = blueprint(self.strategy)
        model = bp.model.model_copy(
            update={"revision": "main" if not self.revision else f"{self.revision:040x}"}
        )
        scaling = bp.scaling.model_copy(
            update={"replicas": self.replicas, "min_replicas": 1, "max_replicas": self.replicas}
        )
        serving = bp.serving.model_copy(update={"max_concurrent_requests": self.max_concurrent})
        bp = bp.model_copy(update={"model": model, "scaling": scaling, "serving": serving})
        digest = f"{self.code:064x}"
        config = WorkloadConfig(
            blueprint=bp,
            platform=PlatformFacts.for_blueprint(bp),
            image_pins={bp.image.base: f"sha256:{self.image:064x}"},
            delivery=Delivery(
                mode="wheel",
                image=bp.image.base,
                wheel_uri=f"s3://llmctl-dev-us-west-2-cache/llmctl/wheels/{digest}/llmctl_eks-0.1.0-py3-none-any.whl",
                wheel_sha256=digest,
                reason="test",
                decided=True,
            ),
        )
        return build_manifests(config, hf_token=None)


def worker_nodes(cluster_spec: Obj) -> int:
    """The accelerator nodes a RayCluster's workers take: each group's replicas (clamped to its
    min/max, as KubeRay starts them), one pod per node."""
    nodes = 0
    for group in cluster_spec.get("workerGroupSpecs") or []:
        selector = ((group.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        if selector.get("node.kubernetes.io/instance-type") != NODE:
            continue
        low, high = int(group.get("minReplicas") or 0), group.get("maxReplicas")
        count = max(int(group.get("replicas") if group.get("replicas") is not None else low), low)
        nodes += min(count, int(high)) if high is not None else count
    return nodes


def growth(old: list[Obj], new: list[Obj]) -> int:
    """How many more nodes the new RayCluster takes than the running one."""
    before = worker_nodes(the_rayservice(old)["spec"]["rayClusterConfig"])
    return max(0, worker_nodes(the_rayservice(new)["spec"]["rayClusterConfig"]) - before)


def running(ledger: Ledger) -> int:
    service = ledger.service
    assert service is not None
    return sum(worker_nodes(c.spec) for c in service.clusters.values() if c.launched)


def with_quota(ledger: Ledger, quota: int) -> None:
    """KubeRay's pods get nodes only while the quota holds every launched cluster's nodes and theirs."""

    def can_launch(service: Any, cluster: Any) -> bool:
        others = sum(
            worker_nodes(c.spec) for c in service.clusters.values() if c.launched and c is not cluster
        )
        return others + worker_nodes(cluster.spec) <= quota

    ledger.operator.can_launch = can_launch


@settings(max_examples=25, deadline=None)
@given(
    strategy=st.sampled_from(["surge", "replace"]),
    quota=st.integers(1, 4),
    changes=st.lists(st.sampled_from(CHANGES), min_size=1, max_size=5),
)
@example(strategy="surge", quota=1, changes=["code"])  # a second inf2.48xlarge the quota refuses
@example(strategy="surge", quota=2, changes=["replicas up", "code"])  # 2 running + 2 more > 2
@example(strategy="replace", quota=1, changes=["code", "replicas up"])  # replace needs no extra node
@example(strategy="surge", quota=1, changes=["engine", "kuberay"])  # in place: no extra node
def test_no_sequence_leaves_two_clusters_or_one_the_quota_cannot_launch(
    strategy: Literal["surge", "replace"], quota: int, changes: list[str]
) -> None:
    ledger = Ledger()
    with_quota(ledger, quota)
    state = Deployed(strategy)
    objects = state.objects()
    ledger.first(objects)
    service = ledger.service
    assert service is not None and service.active is not None  # one inf2.48xlarge: every quota holds it
    for change in changes:
        after = state.changed(change)
        if after == state:
            continue
        new = after.objects()
        rollouts = predict(objects, new, strategy=strategy)
        extra = extra_nodes(rollouts).get(NODE, 0)  # a replace counts only its growth: the old nodes go first
        if running(ledger) + extra > quota:
            continue  # `up` refuses before changing anything: the deployed objects stay
        ledger.operator.version = f"v1.7.{after.kuberay}"
        did = ledger.change(new, replace=any(r.kind == "replace-cluster" for r in rollouts))
        said = predicted(rollouts, the_rayservice(objects), the_rayservice(new))
        if change == "kuberay":  # KubeRay's version stamp on the running cluster: in place, no pod restarts
            assert did.in_place and not did.new_cluster and not said.new_cluster
        else:
            assert said == did, change
        assert len(service.clusters) == 1 and service.pending is None, change  # settled on one
        assert all(c.launched for c in service.clusters.values()), change  # ... that got its nodes
        assert running(ledger) <= quota
        state, objects = after, new


# issue 51, found by the property above: a replace once said no extra node and `up` checked no quota,
# though a rebuilt RayCluster with more workers than the old one (replicas 1 -> 2) needs nodes the quota
# may not hold; KubeRay's new cluster then never launched while the old one was already gone.
def test_replace_counts_the_nodes_a_larger_rebuilt_cluster_adds() -> None:
    old = Deployed("replace").objects()
    new = Deployed("replace", replicas=2).objects()
    rollouts = predict(old, new, strategy="replace")
    assert [r.kind for r in rollouts if r.object == f"RayService/{BP}"] == ["replace-cluster", "serve-config"]
    assert growth(old, new) == 1
    assert extra_nodes(rollouts).get(NODE, 0) == growth(old, new)
