"""`up` shows why a node does not come: recorded Karpenter NodeClaim/event sequences replayed through
the stand-in kubectl while `wait_ready` polls, with what it prints and how it ends.

The messages have Karpenter's shapes: the pod event is `PodFailedToScheduleEvent` ("Failed to
schedule pod, " + InstanceTypeFilterError, kubernetes-sigs/karpenter pkg/controllers/provisioning/
scheduling/events.go and nodeclaim.go); the NodeClaim's Launched condition carries
`ToReasonMessage` of EC2's error (aws/karpenter-provider-aws pkg/errors/errors.go) or the fleet
error text (InsufficientInstanceCapacity with EC2's own sentence).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import ready_pod
from standin_support import StandinEngine

from llmctl.errors import ServingError
from llmctl.infra.lifecycle.kube import launch_findings, wait_ready
from llmctl.infra.lifecycle.launches import findings

NS = "llama"
STOP = "the platform bills about $30.00/h; `llmctl down --stack dev --yes`"


def pending(instance_type: str, memory: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serve-0", "namespace": NS},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": "x", "node.kubernetes.io/instance-type": instance_type},
            "containers": [{"name": "serve", "resources": {"requests": {"memory": memory, "cpu": cpu}}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}],
        },
    }


def karpenter_event(
    name: str, kind: str, involved: str, reason: str, message: str, at: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NS if kind == "Pod" else "default"},
        "involvedObject": {"kind": kind, "name": involved, **({"namespace": NS} if kind == "Pod" else {})},
        "reason": reason,
        "message": message,
        "source": {"component": "karpenter"},
        "lastTimestamp": at,
    }


def nodeclaim(name: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "gpu-nvidia"}},
        "status": {
            "conditions": [{"type": "Launched", "status": "False", "reason": reason, "message": message}]
        },
    }


ICE = (
    "creating instance, insufficient capacity, with fleet error(s), InsufficientInstanceCapacity: We currently do "
    "not have sufficient p4de.24xlarge capacity in the Availability Zone you requested (us-west-2b). Our system "
    "will be working on provisioning additional capacity."
)
NO_TYPE = (
    "Failed to schedule pod, no instance type has enough resources, requirements=karpenter.sh/nodepool In "
    '[inferentia-inf2], node.kubernetes.io/instance-type In [inf2.48xlarge], resources={"aws.amazon.com/neuron":"12",'
    '"cpu":"187986m","memory":"753025Mi","pods":"7"}'
)


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kube.yaml"
    path.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    return path


def _watch(kubeconfig: Path, instance_type: str) -> Any:
    return lambda: launch_findings(kubeconfig, NS, region="us-west-2", instance_type=instance_type)


def test_ice_in_one_zone_is_shown_then_the_node_comes(engine: StandinEngine, tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path)
    engine.kube(pending("p4de.24xlarge", "162Gi", "20"))
    steps = [
        # Karpenter's first try fails in us-west-2b; it marks the offering unavailable and tries us-west-2a
        [nodeclaim("gpu-nvidia-abc12", "LaunchFailed", ICE)],
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
    )
    assert said == [
        "a node from Karpenter for serve-0 (scheduler: 0/3 nodes are available)",
        "Karpenter: InsufficientInstanceCapacity for p4de.24xlarge in us-west-2b: EC2 has none free there now; "
        "Karpenter tries the other zones and retries",
    ]


def test_no_instance_type_satisfied_stops_the_wait_at_once(engine: StandinEngine, tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path)
    engine.kube(
        pending("inf2.48xlarge", "735Gi", "187600m"),
        karpenter_event("serve-0.1", "Pod", "serve-0", "FailedScheduling", NO_TYPE, "2026-11-26T20:00:05Z"),
    )
    said: list[str] = []
    with pytest.raises(ServingError) as stopped:
        wait_ready(
            kubeconfig,
            NS,
            timeout_s=3600,
            on_wait=said.append,
            poll_s=0.01,
            watch=_watch(kubeconfig, "inf2.48xlarge"),
            stop_hint=STOP,
        )
    # the pod's own request against what one inf2.48xlarge offers a pod (718602 MiB, 190714m)
    assert stopped.value.message == (
        f"the workload in namespace {NS} cannot start: no instance type satisfied resources (pod asks 735Gi, "
        "inf2.48xlarge offers 701Gi; pod asks 187600m, inf2.48xlarge offers 190714m): Karpenter will not launch "
        "a node for serve-0"
    )
    assert (
        stopped.value.hint and stopped.value.hint.endswith(STOP) and "llmctl validate" in stopped.value.hint
    )
    assert said[0].startswith("Karpenter: no instance type satisfied resources")


def test_a_vcpu_quota_refusal_stops_with_the_quota_code_and_the_increase_command(
    engine: StandinEngine, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(tmp_path)
    engine.kube(
        pending("inf2.48xlarge", "68Gi", "171600m"),
        nodeclaim(
            "inferentia-inf2-x7k2p",
            "VCPULimitExceeded",
            "An instance was requested that would exceed your VCPU quota",
        ),
    )
    with pytest.raises(ServingError) as stopped:
        wait_ready(
            kubeconfig,
            NS,
            timeout_s=3600,
            on_wait=lambda text: None,
            poll_s=0.01,
            watch=_watch(kubeconfig, "inf2.48xlarge"),
            stop_hint=STOP,
        )
    assert "the EC2 vCPU quota refuses inf2.48xlarge: quota L-1945791B" in stopped.value.message
    assert stopped.value.hint and "--service-code ec2 --quota-code L-1945791B" in stopped.value.hint
    assert "--region us-west-2" in stopped.value.hint and STOP in stopped.value.hint


def test_each_finding_is_said_once_and_unrelated_pods_are_ignored() -> None:
    other = karpenter_event("x.1", "Pod", "someone-else", "FailedScheduling", NO_TYPE, "2026-11-26T20:00:01Z")
    claim = nodeclaim("c1", "LaunchFailed", ICE)
    again = karpenter_event("c1.2", "NodeClaim", "c1", "LaunchFailed", ICE, "2026-11-26T20:00:02Z")
    found = findings(
        [claim],
        [other, again],
        [pending("p4de.24xlarge", "1Gi", "1")],
        region="us-west-2",
        instance_type="p4de.24xlarge",
    )
    assert [f.key for f in found] == ["ice:p4de.24xlarge in us-west-2b"]
    assert not found[0].final


def test_up_stops_waiting_and_prints_the_cost_and_down_command() -> None:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.pricing import blueprint_cost
    from llmctl.infra.lifecycle.orchestrate import _stop_hint

    cost = blueprint_cost(load_blueprint("llama2-inf2"), hardware())
    hint = _stop_hint("dev", cost, None)
    assert f"${cost.platform_hourly_usd + cost.serving_hourly_usd:.2f}/h" in hint
    assert "`llmctl down --stack dev --yes`" in hint
    assert "`llmctl down --stack pr-7 --workload chat --yes`" in _stop_hint("pr-7", cost, "chat")


def test_the_stop_is_a_serving_error_with_its_exit_code() -> None:
    assert ServingError("x").exit_code == 6  # `up` exits 6 when it stops waiting (docs/lifecycle.md)


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

    pod = pending("m5.xlarge", "20Gi", "5")
    pod["metadata"]["namespace"] = "tiny-cpu"
    event = karpenter_event(
        "serve-0.1",
        "Pod",
        "serve-0",
        "FailedScheduling",
        "Failed to schedule pod, no instance type has enough resources, requirements=karpenter.sh/nodepool In "
        '[cpu], node.kubernetes.io/instance-type In [m5.xlarge], resources={"cpu":"5","memory":"20Gi","pods":"3"}',
        "2026-11-26T20:00:05Z",
    )
    event["metadata"]["namespace"] = event["involvedObject"]["namespace"] = "tiny-cpu"
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
