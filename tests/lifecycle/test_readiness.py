"""What `llmctl up` says it waits for, derived from real pod status and event shapes.

The events' messages are their components' own (EVENTS below, each held to the formats of
data/timeline/sources.yaml by tests/conformance/test_timeline_shapes.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from standin_support import StandinEngine

from llmctl.infra.lifecycle.kube import waiting_reason

POD = "llama-serve-head-abc"
UNSCHEDULABLE = "0/2 nodes are available: 2 Insufficient aws.amazon.com/neuron."
NOMINATED = "Pod should schedule on: nodeclaim/inferentia-inf2-x7k"
# Karpenter's PodFailedToScheduleEvent around one of its scheduling errors (scheduling/nodeclaim.go)
CANNOT_LAUNCH = (
    "Failed to schedule pod, no instance type has enough resources, "
    'requirements=karpenter.sh/nodepool In ["default"], resources={"aws.amazon.com/neuron":"1","pods":"1"}'
)
PULLING = 'Pulling image "public.ecr.aws/x:1"'
PULLED = 'Successfully pulled image "public.ecr.aws/x:1" in 2m58.1s (2m58.1s including waiting). Image size: 812 bytes.'
#: (component, reason, type, message) of every event these tests feed `waiting_reason`
EVENTS = [
    ("default-scheduler", "FailedScheduling", "Warning", UNSCHEDULABLE),
    ("karpenter", "Nominated", "Normal", NOMINATED),
    ("karpenter", "FailedScheduling", "Warning", CANNOT_LAUNCH),
    ("kubelet", "Pulling", "Normal", PULLING),
    ("kubelet", "Pulled", "Normal", PULLED),
]


def pod(status: dict[str, Any], *, neuron: bool = False) -> dict[str, Any]:
    limits = {"aws.amazon.com/neuron": "1"} if neuron else {"cpu": "2"}
    return {
        "metadata": {"name": POD},
        "spec": {"containers": [{"name": "ray-head", "resources": {"limits": limits}}]},
        "status": status,
    }


def event(reason: str, message: str, component: str, at: str) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": "Pod", "name": POD},
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "lastTimestamp": at,
    }


UNSCHEDULED = {
    "phase": "Pending",
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
        }
    ],
}


def test_pending_pod_with_a_nominated_nodeclaim_waits_for_karpenter() -> None:
    events = [
        event("FailedScheduling", UNSCHEDULABLE, "default-scheduler", "2026-01-01T00:00:00Z"),
        event("Nominated", NOMINATED, "karpenter", "2026-01-01T00:00:05Z"),
    ]
    text = waiting_reason(pod(UNSCHEDULED), events)
    assert text.startswith(f"a node from Karpenter for {POD}") and "nodeclaim/inferentia-inf2-x7k" in text


def test_karpenter_that_cannot_launch_a_node_says_why() -> None:
    events = [
        event("FailedScheduling", CANNOT_LAUNCH, "karpenter", "2026-01-01T00:00:05Z"),
        event("FailedScheduling", UNSCHEDULABLE, "default-scheduler", "2026-01-01T00:00:09Z"),
    ]
    text = waiting_reason(pod(UNSCHEDULED), events)
    assert (
        "Karpenter cannot launch one: Failed to schedule pod, no instance type has enough resources" in text
    )


def test_pending_without_events_quotes_the_scheduler() -> None:
    assert "didn't match Pod's node affinity" in waiting_reason(pod(UNSCHEDULED), [])


def test_image_pull_is_reported_only_while_the_kubelet_pulls() -> None:
    creating = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {
                "name": "ray-head",
                "image": "public.ecr.aws/x:1",
                "ready": False,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
    }
    pulling = [event("Pulling", PULLING, "kubelet", "2026-01-01T00:01:00Z")]
    assert "pulling the serving image public.ecr.aws/x:1" in waiting_reason(pod(creating), pulling)
    pulled = [*pulling, event("Pulled", PULLED, "kubelet", "2026-01-01T00:04:00Z")]
    assert "pulling" not in waiting_reason(pod(creating), pulled)


def test_pull_errors_and_crash_loops_are_named() -> None:
    back_off = {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "ray-head",
                "image": "public.ecr.aws/x:nope",
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
            }
        ],
    }
    assert "cannot pull public.ecr.aws/x:nope (ImagePullBackOff" in waiting_reason(pod(back_off))
    crashing = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "ray-head",
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
            }
        ],
    }
    text = waiting_reason(pod(crashing))
    assert "keeps crashing (4 restarts" in text and "OOMKilled code 137" in text


def test_running_but_not_ready_is_download_and_compile_on_neuron_only() -> None:
    running = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [{"name": "ray-head", "ready": False, "state": {"running": {}}}],
    }
    assert "Neuron compilation" in waiting_reason(pod(running, neuron=True))
    assert waiting_reason(pod(running)) == f"{POD}: model download and loading"


def test_a_running_init_container_is_the_download() -> None:
    init = {
        "phase": "Pending",
        "initContainerStatuses": [{"name": "fetch-model", "state": {"running": {}}}],
        "containerStatuses": [{"name": "ray-head", "state": {"waiting": {"reason": "PodInitializing"}}}],
    }
    assert waiting_reason(pod(init)) == f"{POD}: init container fetch-model is running (model download)"


def _pending_pod(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "serve-0", "namespace": namespace},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "message": "0/2 nodes are available"}],
        },
    }


def test_wait_ready_polls_until_the_pods_are_ready(engine: StandinEngine, tmp_path: Path) -> None:
    from lifecycle_support import ready_pod

    from llmctl.infra.lifecycle.kube import wait_ready

    kubeconfig = tmp_path / "kube.yaml"
    kubeconfig.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    engine.kube(_pending_pod("ns1"))
    said: list[str] = []

    def on_wait(text: str) -> None:
        said.append(text)
        engine.kube(ready_pod("ns1"))  # the node arrives while we wait

    wait_ready(kubeconfig, "ns1", timeout_s=60, on_wait=on_wait, poll_s=0.01)
    assert said == ["a node from Karpenter for serve-0 (scheduler: 0/2 nodes are available)"]
    pods = [c for c in engine.kubectl_calls() if c[2:4] == ["get", "pods"]]
    assert len(pods) == 2 and all(c[4:6] == ["-n", "ns1"] for c in pods)  # polled again after the wait


def test_wait_ready_times_out_with_what_it_waited_for(engine: StandinEngine, tmp_path: Path) -> None:
    from llmctl.errors import ServingError
    from llmctl.infra.lifecycle.kube import wait_ready

    kubeconfig = tmp_path / "kube.yaml"
    kubeconfig.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    engine.kube(_pending_pod("ns2"))
    with pytest.raises(ServingError) as info:
        wait_ready(kubeconfig, "ns2", timeout_s=0.2, on_wait=lambda text: None, poll_s=0.05)
    assert info.value.message == (
        "the workload in namespace ns2 is not ready after 0s: "
        "a node from Karpenter for serve-0 (scheduler: 0/2 nodes are available)"
    )
    assert "`llmctl up` again resumes waiting" in (info.value.hint or "")
