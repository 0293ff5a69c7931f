"""`up` shows why a node does not come: Karpenter's events and NodeClaims, built as Karpenter builds
them (karpenter_shapes.py from data/karpenter/launch_signals.yaml, each piece with its upstream file
and commit), replayed through the stand-in kubectl while `wait_ready` polls, with what it prints and
how it ends.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from karpenter_shapes import (
    NS,
    capacity_event,
    fleet_error,
    launched_unknown,
    pending,
    pod_event,
    requirements,
)
from lifecycle_support import ready_pod
from standin_support import StandinEngine

from llmctl.errors import ServingError
from llmctl.infra.lifecycle.kube import launch_findings, wait_ready
from llmctl.infra.lifecycle.launches import findings

STOP = "the platform bills about $30.00/h; `llmctl down --stack dev --yes`"
NOTE = "`up` waits for the node (up to 60 min); meanwhile the platform bills about $0.31/h"
ICE_2B = fleet_error("ice", instance_type="p4de.24xlarge", zone="us-west-2b", others="us-west-2a, us-west-2c")
# Karpenter's resources= for the inf2 pod (resources.String of its requests plus the DaemonSets')
INF2_RESOURCES = '{"aws.amazon.com/neuron":"12","cpu":"187986m","memory":"753025Mi","pods":"7"}'


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kube.yaml"
    path.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    return path


def _watch(kubeconfig: Path, instance_type: str) -> Any:
    return lambda: launch_findings(
        kubeconfig, NS, region="us-west-2", instance_type=instance_type, blueprint="llama2-inf2"
    )


def _stopped(
    engine: StandinEngine, tmp_path: Path, instance_type: str, *objects: dict[str, Any]
) -> ServingError:
    """`wait_ready` over the objects; the stop it raises (a short deadline: a wait that does not stop
    at the finding ends in the timeout error instead, which the callers' assertions tell apart)."""
    kubeconfig = _kubeconfig(tmp_path)
    engine.kube(*objects)
    with pytest.raises(ServingError) as stopped:
        wait_ready(
            kubeconfig,
            NS,
            timeout_s=1,
            on_wait=lambda text: None,
            poll_s=0.01,
            watch=_watch(kubeconfig, instance_type),
            stop_hint=STOP,
        )
    return stopped.value


def _inf2_pod_event(
    engine: StandinEngine, tmp_path: Path, sentence: str, memory: str, cpu: str
) -> ServingError:
    """The stop (or deadline) of an inf2.48xlarge pod that Karpenter's scheduler says `sentence` about."""
    return _stopped(
        engine,
        tmp_path,
        "inf2.48xlarge",
        pending("inf2.48xlarge", memory, cpu, pool="inferentia-inf2"),
        pod_event("serve-0", sentence, requirements("inferentia-inf2", "inf2.48xlarge"), INF2_RESOURCES),
    )


def test_ice_in_one_zone_is_shown_with_what_bills_then_the_node_comes(
    engine: StandinEngine, tmp_path: Path
) -> None:
    """No NodeClaim is left to read: Karpenter deletes it and says it in an event (launch.go)."""
    kubeconfig = _kubeconfig(tmp_path)
    engine.kube(pending("p4de.24xlarge", "162Gi", "20", pool="gpu-nvidia"))
    steps = [
        # the first try fails in us-west-2b; Karpenter marks that offering unavailable and tries us-west-2a
        [capacity_event("gpu-nvidia-abc12", ICE_2B)],
        [ready_pod(NS)],
    ]
    said: list[str] = []

    def on_wait(text: str) -> None:
        said.append(text)
        if steps:  # the next recorded step happens while `up` waits
            engine.kube(*steps.pop(0))

    wait_ready(
        kubeconfig,
        NS,
        timeout_s=60,
        on_wait=on_wait,
        poll_s=0.01,
        watch=_watch(kubeconfig, "p4de.24xlarge"),
        stop_hint=STOP,
        wait_note=NOTE,
    )
    assert said == [
        "a node from Karpenter for serve-0 (scheduler: 0/3 nodes are available)",
        "Karpenter: InsufficientInstanceCapacity for p4de.24xlarge in us-west-2b: EC2 has none free there now; "
        f"Karpenter skips that offering for 3 minutes, tries the others and retries; {NOTE}",
    ]


def test_no_instance_type_has_enough_resources_stops_the_wait_at_once(
    engine: StandinEngine, tmp_path: Path
) -> None:
    error = _inf2_pod_event(engine, tmp_path, "resources", "735Gi", "187600m")
    # the pod's own request against what one inf2.48xlarge offers a pod (718602 MiB, 190714m)
    assert error.message == (
        f"the workload in namespace {NS} cannot start: no instance type satisfied resources (pod asks 735Gi, "
        "inf2.48xlarge offers 701Gi; pod asks 187600m, inf2.48xlarge offers 190714m): Karpenter will not launch "
        "a node for serve-0"
    )
    assert error.hint and error.hint.endswith(STOP) and "llmctl validate" in error.hint


def test_a_vcpu_quota_refusal_is_final_though_karpenter_calls_it_insufficient_capacity(
    engine: StandinEngine, tmp_path: Path
) -> None:
    """VcpuLimitExceeded is one of the provider's unfulfillable-capacity codes, so the event says
    "insufficient capacity": the code, not those words, makes it a quota finding."""
    error = _stopped(
        engine,
        tmp_path,
        "inf2.48xlarge",
        pending("inf2.48xlarge", "68Gi", "171600m", pool="inferentia-inf2"),
        capacity_event("inferentia-inf2-x7k2p", fleet_error("vcpu_quota", limit="0")),
    )
    assert (
        "cannot start: the EC2 vCPU quota refuses inf2.48xlarge (limit 0 vCPUs): quota L-1945791B"
        in error.message
    )
    assert error.hint and "--service-code ec2 --quota-code L-1945791B" in error.hint
    assert (
        "`llmctl doctor --blueprint llama2-inf2 --region us-west-2` shows it on its 'vCPU quota L-1945791B' line"
        in error.hint
    )
    assert "--region us-west-2" in error.hint and STOP in error.hint


def test_a_spot_count_refusal_is_final_with_the_spot_quota(engine: StandinEngine, tmp_path: Path) -> None:
    error = _stopped(
        engine,
        tmp_path,
        "inf2.xlarge",
        pending("inf2.xlarge", "8Gi", "2", pool="inferentia-inf2"),
        capacity_event("inferentia-inf2-s9q2z", fleet_error("spot_quota")),
    )
    assert "the EC2 spot instance quota refuses inf2.xlarge: quota L-B5D1601B" in error.message


def test_no_offering_right_after_a_refusal_is_waited_on(engine: StandinEngine, tmp_path: Path) -> None:
    """After the ICE the offering is unavailable for 3 minutes and the scheduler says "no instance type
    has the required offering": Karpenter will retry, so `up` waits (to its deadline here)."""
    error = _stopped(
        engine,
        tmp_path,
        "p4de.24xlarge",
        pending("p4de.24xlarge", "162Gi", "20", pool="gpu-nvidia"),
        capacity_event("gpu-nvidia-abc12", ICE_2B, at="2026-11-26T20:00:03Z"),
        pod_event(
            "serve-0",
            "offering",
            requirements("gpu-nvidia", "p4de.24xlarge"),
            '{"cpu":"20","memory":"162Gi"}',
        ),
    )
    assert "is not ready after 1s" in error.message  # the deadline, not a stop


def test_no_offering_without_any_refusal_is_final_with_the_doctor_line(
    engine: StandinEngine, tmp_path: Path
) -> None:
    error = _inf2_pod_event(engine, tmp_path, "offering", "68Gi", "171600m")
    assert "cannot start: inf2.48xlarge has no offering that serve-0's pool may launch" in error.message
    assert (
        error.hint
        and "'inf2.48xlarge in AZs' line" in error.hint
        and "llmctl doctor --blueprint llama2-inf2" in error.hint
    )


def test_unauthorized_launch_is_final(engine: StandinEngine, tmp_path: Path) -> None:
    """Karpenter leaves Launched Unknown with the provider's reason; it never writes Launched=False."""
    error = _stopped(
        engine,
        tmp_path,
        "g5.2xlarge",
        pending("g5.2xlarge", "20Gi", "6", pool="gpu-nvidia"),
        launched_unknown("gpu-nvidia-q8r4t", "unauthorized"),
    )
    assert error.message.endswith(
        "EC2 refuses Karpenter's launch of g5.2xlarge: Error creating fleet request: User is not authorized to "
        "perform this operation because no identity-based policy allows it (Unauthorized)"
    )
    assert error.hint and "Karpenter controller role" in error.hint


def test_each_finding_is_said_once_and_unrelated_pods_and_pools_are_ignored() -> None:
    other_pod = pod_event(
        "someone-else", "resources", requirements("cpu", "m5.xlarge"), "{}", at="2026-11-26T20:00:01Z"
    )
    ice = capacity_event("gpu-nvidia-c1", ICE_2B)
    again = capacity_event("gpu-nvidia-c1", ICE_2B, at="2026-11-26T20:00:04Z")
    # another blueprint's pool on the same platform refused for its quota: not this workload's finding
    elsewhere = capacity_event("inferentia-inf2-z1", fleet_error("vcpu_quota", limit="0"))
    found = findings(
        [],
        [other_pod, ice, again, elsewhere],
        [pending("p4de.24xlarge", "1Gi", "1", pool="gpu-nvidia")],
        region="us-west-2",
        instance_type="p4de.24xlarge",
    )
    assert [f.key for f in found] == ["capacity:p4de.24xlarge in us-west-2b"]
    assert not found[0].final


def test_a_scheduled_pod_s_old_offering_event_is_not_a_finding() -> None:
    pod = pending("inf2.48xlarge", "68Gi", "171600m", pool="inferentia-inf2")
    pod["status"]["phase"] = "Running"
    said = pod_event("serve-0", "offering", requirements("inferentia-inf2", "inf2.48xlarge"), INF2_RESOURCES)
    assert findings([], [said], [pod], region="us-west-2", instance_type="inf2.48xlarge") == []


def test_up_stops_waiting_and_prints_the_cost_and_down_command() -> None:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.pricing import blueprint_cost
    from llmctl.infra.lifecycle.orchestrate import _stop_hint, _wait_note

    cost = blueprint_cost(load_blueprint("llama2-inf2"), hardware())
    hint = _stop_hint("dev", cost, None)
    assert f"${cost.platform_hourly_usd + cost.serving_hourly_usd:.2f}/h" in hint
    assert "`llmctl down --stack dev --yes`" in hint
    assert "`llmctl down --stack pr-7 --workload chat --yes`" in _stop_hint("pr-7", cost, "chat")
    # a shortage Karpenter retries: how long `up` waits and what bills meanwhile (no serving node yet)
    note = _wait_note(cost, "up to 60 min")
    assert f"the platform bills about ${cost.platform_hourly_usd:.2f}/h" in note and "up to 60 min" in note
    assert f"no serving node bills until one launches (then about ${cost.serving_hourly_usd:.2f}/h)" in note


def test_the_stop_is_a_serving_error_with_its_exit_code() -> None:
    assert ServingError("x").exit_code == 6  # `up` exits 6 when it stops waiting (docs/up.md)


def test_up_stops_the_workload_update_at_once_when_no_node_can_ever_hold_the_pod(
    engine: StandinEngine, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pulumi awaits the serving RayService (the stand-in hangs there, as a first start would), and
    `up` reads Karpenter meanwhile: Karpenter's event arrives during the update, the final finding
    stops it (SIGINT, as Ctrl-C would) and `up` exits 6 with it."""
    import threading
    import time

    from typer.testing import CliRunner

    from llmctl.cli.app import app
    from llmctl.infra.lifecycle import orchestrate
    from llmctl.infra.lifecycle.engine import workload_project

    monkeypatch.setattr(orchestrate, "LAUNCH_POLL_S", 0.2)

    pod = pending("m5.xlarge", "20Gi", "5", pool="cpu", ns="tiny-cpu")
    event = pod_event(
        "serve-0",
        "resources",
        requirements("cpu", "m5.xlarge"),
        '{"cpu":"5","memory":"20Gi","pods":"3"}',
        ns="tiny-cpu",
    )
    engine.control(hang_on="tiny-cpu/tiny-cpu")
    marker = engine.root / "hanging"

    def karpenter_says_no() -> None:  # once the update hangs on the RayService
        deadline = time.monotonic() + 300  # a bound for a busy machine; it ends when the marker shows
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        engine.kube(pod, event)

    karpenter = threading.Thread(target=karpenter_says_no, daemon=True)
    karpenter.start()
    result = CliRunner().invoke(app, ["up", "--blueprint", "tiny-cpu", "--yes", "--progress", "plain"])
    karpenter.join(timeout=5)
    said = result.stdout + result.stderr
    assert marker.exists(), said
    assert result.exit_code == 6, said
    assert "Karpenter: no instance type satisfied resources (pod asks 20Gi, m5.xlarge offers" in said
    assert "the workload in namespace tiny-cpu cannot start: no instance type satisfied resources" in said
    assert "`llmctl down --stack dev --yes`" in said and "/h" in said
    # the update was stopped the way Ctrl-C stops it: a failed update on record, its lock released
    assert engine.history(workload_project("tiny-cpu"), "dev")[-1]["result"] == "failed"
    assert not list((engine.backend / ".pulumi" / "locks").rglob("*.json"))


def test_a_node_that_never_joins_is_followed_through_two_relaunches_then_up_stops_with_its_cost(
    engine: StandinEngine, tmp_path: Path
) -> None:
    """Issue 51: the stand-in kubectl replays, one step per poll of the NodeClaims, what Karpenter
    v1.14.1 does with an inf2.48xlarge whose node never registers (registration_signals.yaml): the
    NodeClaim waits NodeNotFound, is deleted 15 minutes after its creation (deletionTimestamp,
    InstanceTerminating), Karpenter nominates the pod to a new one, and the same again. `up`'s wait
    says each not-joined node's age against the deadline, the first relaunch with its cost, and
    stops at the second. The clock is the replay's: each step's time."""
    import json

    from karpenter_shapes import finalized, nodeclaim, nominated

    from llmctl.blueprints.hardware import hardware
    from llmctl.infra.lifecycle.registrations import JoinWatch

    pool = "inferentia-inf2"
    a, b, c = f"{pool}-a1b2c", f"{pool}-d3e4f", f"{pool}-g5h6j"
    ids = {a: "i-0a1b2c3d4e5f60718", b: "i-0d3e4f5a6b7c80912", c: "i-0f6a7b8c9d0e1f234"}

    def claim(name: str, created: str, launched: str | None = None, **kw: str) -> dict[str, Any]:
        day = "2026-11-26T"
        return nodeclaim(
            name,
            created=f"{day}{created}Z",
            launched=f"{day}{launched}Z" if launched else None,
            instance_id=ids[name],
            **{k: f"{day}{v}Z" for k, v in kw.items()},
        )

    steps = [  # (the time of the poll, what the cluster holds then)
        ("20:04:00", [claim(a, "20:00:00", "20:00:40"), nominated("serve-0", a, "2026-11-26T20:00:02Z")]),
        ("20:10:00", [claim(a, "20:00:00", "20:00:40"), nominated("serve-0", a, "2026-11-26T20:00:02Z")]),
        (
            "20:15:20",
            [
                claim(a, "20:00:00", "20:00:40", deleting="20:15:01", terminating_at="20:15:02"),
                claim(b, "20:15:03"),
                nominated("serve-0", b, "2026-11-26T20:15:05Z"),
            ],
        ),
        (
            "20:19:00",
            [
                claim(b, "20:15:03", "20:15:41"),
                nominated("serve-0", b, "2026-11-26T20:15:05Z"),
                finalized(a, "2026-11-26T20:15:09Z"),
            ],
        ),
        ("20:30:40", [claim(c, "20:30:05", "20:30:44"), nominated("serve-0", c, "2026-11-26T20:30:07Z")]),
    ]
    root = engine.root
    (root / "kube-sequence.json").write_text(
        json.dumps({"advance_on": "NodeClaim", "steps": [objects for _, objects in steps]})
    )
    engine.kube(pending("inf2.48xlarge", "68Gi", "171600m", pool=pool))

    def clock() -> datetime:  # the time of the step the stand-in serves now
        pos = root / "kube-sequence.pos"
        calls = int(pos.read_text()) if pos.exists() else 0
        at = steps[max(0, min(calls - 1, len(steps) - 1))][0]
        return datetime.fromisoformat(f"2026-11-26T{at}+00:00")

    joins = JoinWatch(cluster="llmctl-dev", region="us-west-2", clock=clock)
    kubeconfig = _kubeconfig(tmp_path)
    said: list[str] = []
    with pytest.raises(ServingError) as stopped:
        wait_ready(
            kubeconfig,
            NS,
            timeout_s=120,  # a bound for a busy machine: the stop comes at the fifth poll
            on_wait=said.append,
            poll_s=0.01,
            watch=lambda: launch_findings(
                kubeconfig, NS, region="us-west-2", instance_type="inf2.48xlarge", joins=joins
            ),
            stop_hint=STOP,
            wait_note=NOTE,
            clock=clock,
        )
    price = hardware().instance("inf2.48xlarge").on_demand_usd
    a_cost, b_cost = price * (14 * 60 + 21) / 3600, price * (14 * 60 + 59) / 3600
    where = {name: f"inf2.48xlarge in us-west-2d, {ids[name]}" for name in ids}
    late = "not joined after 3 min: Karpenter deletes a node not joined 15 min after it created it and launches another"
    stop = (
        f"2 nodes of NodePool {pool} launched and never joined the "
        f"cluster: {a} ({where[a]}) ran 14 min 21 s, about ${a_cost:.2f}; {b} ({where[b]}) ran 14 min 59 s, about "
        f"${b_cost:.2f} (together about ${a_cost + b_cost:.2f}); Karpenter deleted each 15 min after it was created "
        f"and relaunched 2 times: `up` stops here rather than pay for a third; {c} ({where[c]}) runs now at about "
        f"${price:.2f}/h, and Karpenter launches another every 15 min while the workload's pods wait"
    )
    assert said == [
        f"Karpenter: node {a} ({where[a]}) has not joined the cluster 4 min after Karpenter created it, Registered "
        "NodeNotFound: Node not registered with cluster; Karpenter deletes it and launches another if it has not "
        "joined 15 min after it was created (11 min left)",
        f"a node from Karpenter for serve-0 (Pod should schedule on: nodeclaim/{a}; {late})",
        f"Karpenter: node {a} ({where[a]}) has not joined the cluster 10 min after Karpenter created it, Registered "
        "NodeNotFound: Node not registered with cluster; Karpenter deletes it and launches another if it has not "
        "joined 15 min after it was created (5 min left)",
        f"Karpenter: node {a} ({where[a]}) ran 14 min 21 s, about ${a_cost:.2f}, and never joined the cluster: "
        f"Karpenter deleted it 15 min after it was created; Karpenter launched {b} for the same pods (relaunch 1; "
        "`up` stops at relaunch 2 rather than pay for another); a node that launches but never joins usually has an "
        "AMI that does not suit the instance (the EC2NodeClass's amiSelectorTerms alias or variant: AL2023's NVIDIA "
        "or Neuron variant for an accelerator), no EKS access entry of type EC2_LINUX for its role "
        "llmctl-dev-karpenter-node (`aws eks list-access-entries --cluster-name llmctl-dev --region us-west-2` lists "
        "it), broken user data, or a subnet without a route to the cluster API (NAT gateway or private endpoint); "
        f"`aws ec2 get-console-output --instance-id {ids[a]} --region us-west-2 --latest` shows the last node's boot "
        "log (nodeadm, kubelet)",
        f"Karpenter: node {b} ({where[b]}; relaunch 1) has not joined the cluster 3 min after Karpenter created it, "
        "Registered NodeNotFound: Node not registered with cluster; Karpenter deletes it and launches another if it "
        "has not joined 15 min after it was created (11 min left)",
        # the pod's line is read before the NodeClaims in each poll: it shows the nomination one step later
        f"a node from Karpenter for serve-0 (Pod should schedule on: nodeclaim/{b}; new nodes take 1-3 min)",
        f"Karpenter: {stop}",
    ]
    error = stopped.value
    assert error.exit_code == 6
    assert error.message == f"the workload in namespace {NS} cannot start: {stop}"
    assert error.hint is not None and error.hint.endswith(STOP)
    assert f"--instance-id {ids[b]}" in error.hint and "EC2_LINUX" in error.hint
