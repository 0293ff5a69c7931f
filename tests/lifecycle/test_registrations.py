"""Nodes that launch but never join (issue 51): the join watch over NodeClaims built as Karpenter
v1.14.1 writes them (karpenter_shapes.py from data/karpenter/registration_signals.yaml, each piece
with its file and lines): each Registered and Initialized state, the liveness check's deletion and
what tells it from any other, the relaunch, and the stop at the second relaunch with its cost."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import karpenter_shapes as shapes
import pytest

from llmctl.blueprints.hardware import hardware
from llmctl.infra.lifecycle.kube import waiting_reason
from llmctl.infra.lifecycle.launches import LaunchWatch, findings
from llmctl.infra.lifecycle.registrations import JoinWatch

POOL = "inferentia-inf2"
A, B, C = f"{POOL}-a1b2c", f"{POOL}-d3e4f", f"{POOL}-g5h6j"
INF2 = hardware().instance("inf2.48xlarge").on_demand_usd


def _at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-26T{text}+00:00")


class Clock:
    def __init__(self, at: str) -> None:
        self.now = _at(at)

    def __call__(self) -> datetime:
        return self.now


def _watch(at: str) -> tuple[JoinWatch, Clock]:
    clock = Clock(at)
    return JoinWatch(cluster="llmctl-dev", region="us-west-2", clock=clock), clock


def _found(watch: JoinWatch, *claims: dict[str, Any]) -> list[Any]:
    """What `up`'s launch watch says about the claims (the workload's pod selects the pool)."""
    pod = shapes.pending("inf2.48xlarge", "68Gi", "171600m", pool=POOL)
    return findings(list(claims), [], [pod], region="us-west-2", instance_type="inf2.48xlarge", joins=watch)


def _claim(name: str, created: str, **kw: Any) -> dict[str, Any]:
    launched = kw.pop("launched", None)
    ids = {A: "i-0a1b2c3d4e5f60718", B: "i-0d3e4f5a6b7c80912", C: "i-0f6a7b8c9d0e1f234"}
    return shapes.nodeclaim(
        name,
        created=f"2026-11-26T{created}Z",
        launched=f"2026-11-26T{launched}Z" if launched else None,
        instance_id=ids.get(name, "i-0123456789abcdef0"),
        **kw,
    )


def _reason(claim: dict[str, Any], kind: str) -> str:
    (cond,) = [c for c in claim["status"]["conditions"] if c["type"] == kind]
    return str(cond["reason"])


def test_a_node_not_joined_gets_a_note_with_its_age_against_the_ttl_every_three_minutes() -> None:
    watch, clock = _watch("20:02:30")
    claim = _claim(A, "20:00:00", launched="20:00:40")
    assert _found(watch, claim) == []  # a new node: nothing yet (EC2 nodes join in 1-3 min)
    said = []
    for at in ("20:04:00", "20:05:59", "20:06:10", "20:13:00", "20:15:10"):
        clock.now = _at(at)
        said += [(f.key, f.text, f.final) for f in _found(watch, claim)]
    keys = [key for key, _, _ in said]
    assert keys == [f"joining:{A}:1", f"joining:{A}:1", f"joining:{A}:2", f"joining:{A}:4", f"joining:{A}:5"]
    assert not any(final for _, _, final in said)
    assert said[0][1] == (
        f"node {A} (inf2.48xlarge in us-west-2d, i-0a1b2c3d4e5f60718) has not joined the cluster 4 min after "
        "Karpenter created it, Registered NodeNotFound: Node not registered with cluster; Karpenter deletes it and "
        "launches another if it has not joined 15 min after it was created (11 min left)"
    )
    assert said[3][1].endswith("(2 min left)")
    assert said[4][1].endswith("past Karpenter's 15-min deadline: it deletes it and launches another")


def test_the_launch_watch_says_each_note_once_without_the_shortage_note() -> None:
    """LaunchWatch dedupes by key (one note per 3 minutes), and a launched node's note does not get
    the "no serving node bills until one launches" note: this node bills already."""
    watch, clock = _watch("20:04:00")
    said: list[str] = []
    launches = LaunchWatch(
        lambda: _found(watch, _claim(A, "20:00:00", launched="20:00:40")), POOL, said.append, "", "NOTE"
    )
    for at in ("20:04:00", "20:05:00", "20:06:00"):
        clock.now = _at(at)
        assert launches.check() is None
    assert len(said) == 2 and not any("NOTE" in text for text in said)


@pytest.mark.parametrize(
    ("state", "values", "said"),
    [
        ("awaiting", {}, "Registered AwaitingReconciliation: object is awaiting reconciliation"),
        ("node_not_found", {}, "Registered NodeNotFound: Node not registered with cluster"),
        ("hook_pending", {"hooks": "placementgroup"}, "Registered RegistrationHookPending: placementgroup"),
        ("multiple_nodes", {}, "Registered MultipleNodesFound: Invariant violated, matched multiple nodes"),
    ],
)
def test_each_registered_state_karpenter_writes_is_named(
    state: str, values: dict[str, str], said: str
) -> None:
    watch, _ = _watch("20:07:00")
    (found,) = _found(watch, _claim(A, "20:00:00", launched="20:00:40", registered=state, **values))
    assert f"has not joined the cluster 7 min after Karpenter created it, {said}; " in found.text


@pytest.mark.parametrize(
    ("state", "values", "said"),
    [
        ("node_not_ready", {}, "Node status is NotReady (NodeNotReady: the kubelet does not report Ready"),
        (
            "startup_taints",
            {"taint": "node.cilium.io/agent-not-ready:NoExecute"},
            'StartupTaint "node.cilium.io/agent-not-ready:NoExecute" still exists (StartupTaintsExist: a startup',
        ),
        (
            "ephemeral_taints",
            {"taint": "node.kubernetes.io/not-ready:NoSchedule"},
            'KnownEphemeralTaint "node.kubernetes.io/not-ready:NoSchedule" still exists (KnownEphemeralTaintsExist',
        ),
        (
            "resource_not_registered",
            {"resource": "aws.amazon.com/neuron"},
            'Resource "aws.amazon.com/neuron" was requested but not registered (ResourceNotRegistered: the device '
            "plugin has not advertised the accelerator yet)",
        ),
        (
            "dra_pools",
            {"driver": "neuron.aws.com"},
            'DRA driver "neuron.aws.com" has not published a complete resource pool (DRADriverPoolsNotPublished',
        ),
    ],
)
def test_a_joined_node_not_initialized_is_said_with_karpenter_s_reason(
    state: str, values: dict[str, str], said: str
) -> None:
    watch, _ = _watch("20:09:00")
    claim = _claim(
        A,
        "20:00:00",
        launched="20:00:40",
        registered="true",
        registered_at="2026-11-26T20:03:10Z",
        initialized=state,
        initialized_at="2026-11-26T20:03:12Z",
        **values,
    )
    (found,) = _found(watch, claim)
    assert not found.final and found.key == f"initializing:{A}:{_reason(claim, 'Initialized')}"
    assert (
        f"node {A} (inf2.48xlarge in us-west-2d, i-0a1b2c3d4e5f60718) joined the cluster but is not initialized: "
        in found.text
    )
    assert said in found.text


def test_a_joined_and_initialized_node_says_nothing_and_is_not_counted_when_deleted() -> None:
    watch, clock = _watch("20:20:00")
    ready = _claim(
        A,
        "20:00:00",
        launched="20:00:40",
        registered="true",
        registered_at="2026-11-26T20:03:10Z",
        initialized="true",
        initialized_at="2026-11-26T20:04:00Z",
    )
    assert _found(watch, ready) == []
    clock.now = _at("20:40:00")  # consolidation removed it later: not a node that never joined
    assert _found(watch) == [] and watch.failed == {}


def test_a_node_deleted_before_its_deadline_is_not_the_liveness_check() -> None:
    """Something else deleted it (a person, `llmctl down`, consolidation of an empty node): Karpenter's
    liveness check deletes only at 15 minutes (liveness.go 94), so no relaunch is counted."""
    watch, clock = _watch("20:05:00")
    _found(watch, _claim(A, "20:00:00", launched="20:00:40"))
    clock.now = _at("20:09:00")
    assert [
        f.key
        for f in _found(watch, _claim(A, "20:00:00", launched="20:00:40", deleting="2026-11-26T20:08:30Z"))
    ] == []
    clock.now = _at("20:16:00")  # gone, past its deadline now, but deleted at 20:08:30
    assert _found(watch) == [] and watch.failed == {}


def test_a_node_never_launched_is_left_to_the_launched_condition() -> None:
    """Launched not True: the launch findings of launches.py (and Karpenter's 5-minute launch timeout)."""
    watch, _ = _watch("20:10:00")
    assert _found(watch, _claim(A, "20:00:00")) == []


def test_the_first_deletion_is_a_relaunch_note_with_its_cost_and_the_replacement() -> None:
    watch, clock = _watch("20:10:00")
    _found(watch, _claim(A, "20:00:00", launched="20:00:40"))
    clock.now = _at("20:15:20")
    deleting = _claim(
        A,
        "20:00:00",
        launched="20:00:40",
        deleting="2026-11-26T20:15:01Z",
        terminating_at="2026-11-26T20:15:02Z",
    )
    replacement = _claim(B, "20:15:03")  # created, not launched yet
    (found,) = [f for f in _found(watch, deleting, replacement) if f.key.startswith("never-joined")]
    cost = INF2 * (14 * 60 + 21) / 3600
    assert not found.final and found.kind == "registration"
    assert found.text.startswith(
        f"node {A} (inf2.48xlarge in us-west-2d, i-0a1b2c3d4e5f60718) ran 14 min 21 s, about ${cost:.2f}, and never "
        f"joined the cluster: Karpenter deleted it 15 min after it was created; Karpenter launched {B} for the same "
        "pods (relaunch 1; `up` stops at relaunch 2 rather than pay for another); "
    )
    assert "no EKS access entry of type EC2_LINUX for its role llmctl-dev-karpenter-node" in found.text
    assert (
        "`aws ec2 get-console-output --instance-id i-0a1b2c3d4e5f60718 --region us-west-2 --latest`"
        in found.text
    )
    clock.now = _at("20:15:40")  # gone now: counted once
    assert [f.key for f in _found(watch, replacement)] == []


def test_the_second_relaunch_stops_up_with_both_nodes_costs_and_what_still_runs() -> None:
    watch, clock = _watch("20:14:00")
    _found(watch, _claim(A, "20:00:00", launched="20:00:40"))
    clock.now = _at("20:15:30")  # A went between two polls: ended at the latest now
    _found(watch, _claim(B, "20:15:03", launched="20:15:41"))
    clock.now = _at("20:29:00")
    _found(watch, _claim(B, "20:15:03", launched="20:15:41"))
    clock.now = _at("20:30:40")
    gone_b = _claim(
        B,
        "20:15:03",
        launched="20:15:41",
        deleting="2026-11-26T20:30:04Z",
        terminating_at="2026-11-26T20:30:05Z",
    )
    final = [f for f in _found(watch, gone_b, _claim(C, "20:30:05", launched="20:30:44")) if f.final]
    (stop,) = final
    a_cost, b_cost = INF2 * (14 * 60 + 50) / 3600, INF2 * (14 * 60 + 23) / 3600
    assert stop.kind == "registration" and stop.key == f"never-joined-stop:{POOL}"
    assert stop.text == (
        f"2 nodes of NodePool {POOL} launched and never joined the cluster: {A} (inf2.48xlarge in us-west-2d, "
        f"i-0a1b2c3d4e5f60718) ran 14 min 50 s, about ${a_cost:.2f}; {B} (inf2.48xlarge in us-west-2d, "
        f"i-0d3e4f5a6b7c80912) ran 14 min 23 s, about ${b_cost:.2f} (together about ${a_cost + b_cost:.2f}); "
        "Karpenter deleted each 15 min after it was created and relaunched 2 times: `up` stops here rather than pay "
        f"for a third; {C} (inf2.48xlarge in us-west-2d, i-0f6a7b8c9d0e1f234) runs now at about ${INF2:.2f}/h, and "
        "Karpenter launches another every 15 min while the workload's pods wait"
    )
    assert "--instance-id i-0d3e4f5a6b7c80912" in stop.hint and "EC2_LINUX" in stop.hint


def test_a_spot_node_costs_its_spot_price_and_an_unknown_type_says_so() -> None:
    watch, clock = _watch("20:14:00")
    spot = {"capacity_type": "spot", "instance_type": "g5.2xlarge"}
    _found(watch, _claim(A, "20:00:00", launched="20:00:40", **spot))
    clock.now = _at("20:16:00")
    (found,) = [f for f in _found(watch) if f.key.startswith("never-joined")]
    g5 = hardware().instance("g5.2xlarge")
    price = g5.spot_usd if g5.spot_usd is not None else g5.on_demand_usd
    assert f"ran 15 min 20 s, about ${price * (15 * 60 + 20) / 3600:.2f}" in found.text

    watch, clock = _watch("20:14:00")
    _found(watch, _claim(A, "20:00:00", launched="20:00:40", instance_type="x9.unknown"))
    clock.now = _at("20:16:00")
    (found,) = [f for f in _found(watch) if f.key.startswith("never-joined")]
    assert "ran 15 min 20 s, cost not known" in found.text


def test_another_pool_s_nodeclaims_are_not_this_workload_s() -> None:
    watch, clock = _watch("20:10:00")
    assert _found(watch, _claim("gpu-nvidia-x1y2z", "20:00:00", launched="20:00:40")) == []
    clock.now = _at("20:16:00")
    assert _found(watch) == [] and watch.failed == {}


def _pod_waiting(at: str) -> str:
    pod = shapes.pending("inf2.48xlarge", "68Gi", "171600m", pool=POOL)
    return waiting_reason(pod, [shapes.nominated("serve-0", A, "2026-11-26T20:00:02Z")], _at(at))


def test_the_pod_line_says_new_nodes_take_minutes_only_while_the_node_is_new() -> None:
    """kube._unscheduled: "new nodes take 1-3 min" was said for as long as the pod waited (issue 51)."""
    assert _pod_waiting("20:02:00") == (
        f"a node from Karpenter for serve-0 (Pod should schedule on: nodeclaim/{A}; new nodes take 1-3 min)"
    )
    late = _pod_waiting("20:03:10")
    assert "1-3 min" not in late and late == _pod_waiting("20:12:00")  # said once, not every poll
    assert late == (
        f"a node from Karpenter for serve-0 (Pod should schedule on: nodeclaim/{A}; not joined after 3 min: "
        "Karpenter deletes a node not joined 15 min after it created it and launches another)"
    )


def test_a_node_gone_between_polls_is_dated_by_its_finalized_event() -> None:
    """operatorpkg's `Finalized karpenter.sh/termination` event says when it went: gone at 20:14:50,
    before its 20:15:00 deadline, it was not the liveness check, though the poll came at 20:15:10."""
    watch, clock = _watch("20:14:40")
    _found(watch, _claim(A, "20:00:00", launched="20:00:40"))
    clock.now = _at("20:15:10")
    pod = shapes.pending("inf2.48xlarge", "68Gi", "171600m", pool=POOL)
    event = shapes.finalized(A, "2026-11-26T20:14:50Z")
    assert findings([], [event], [pod], region="us-west-2", instance_type="inf2.48xlarge", joins=watch) == []
    assert watch.failed == {}
    # the same without the event (best effort): gone by the poll after the deadline, counted then
    watch, clock = _watch("20:14:40")
    _found(watch, _claim(A, "20:00:00", launched="20:00:40"))
    clock.now = _at("20:15:10")
    assert [f.key for f in _found(watch)] == [f"never-joined:{A}"]


def test_up_s_polls_carry_the_join_record_they_are_given() -> None:
    """`up` makes one JoinWatch and hands it to the workload update's watch and the readiness wait, so a
    node deleted during the update counts at the readiness wait (orchestrate._launch_poll)."""
    from functools import partial
    from pathlib import Path

    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.lifecycle.orchestrate import _launch_poll

    joins = JoinWatch()
    poll = _launch_poll(Path("kube.yaml"), "llama2-inf2", "us-west-2", load_blueprint("llama2-inf2"), joins)
    assert isinstance(poll, partial) and poll.keywords["joins"] is joins
    assert poll.keywords["instance_type"] == "inf2.48xlarge"
