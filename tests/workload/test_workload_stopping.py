"""Every serving pod of every catalog blueprint stops gracefully: preStop + a grace period sized to
one generation; the runtimes' own overload flags follow the blueprint."""

from __future__ import annotations

from typing import Any

import pytest
from workload_helpers import CATALOG, blueprint, find, manifests_for

from llmctl.blueprints.serving_limits import (
    PRESTOP_DELAY_S,
    drain_grace_s,
    queue_limit,
    request_bytes,
    termination_grace_s,
)
from llmctl.serving.drain import drain, main


def _serving_pods(name: str) -> list[tuple[str, dict[str, Any]]]:
    manifests = manifests_for(name)
    pods: list[tuple[str, dict[str, Any]]] = []
    for obj in manifests:
        if obj["kind"] == "RayService":
            cluster = obj["spec"]["rayClusterConfig"]
            pods.append(("head", cluster["headGroupSpec"]["template"]["spec"]))
            pods += [("worker", group["template"]["spec"]) for group in cluster["workerGroupSpecs"]]
        elif (
            obj["kind"] == "Deployment"
            and obj["metadata"]["labels"].get("app.kubernetes.io/component") == "serving"
        ):
            pods.append(("serving", obj["spec"]["template"]["spec"]))
    return pods


@pytest.mark.parametrize("name", CATALOG)
def test_every_serving_pod_has_a_prestop_hook_and_a_grace_period(name: str) -> None:
    bp = blueprint(name)
    pods = _serving_pods(name)
    assert pods, f"{name} renders no serving pod"
    for role, spec in pods:
        assert spec["terminationGracePeriodSeconds"] == termination_grace_s(bp)
        command = spec["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
        if role == "head":
            assert command == ["sleep", str(PRESTOP_DELAY_S)]
        elif bp.runtime in ("ray-cpu", "ray-neuronx"):  # the shared app drains itself
            assert command[1:4] == ["-m", "llmctl.serving.drain", f"--grace={drain_grace_s(bp)}"]
            env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
            assert env["LLMCTL_DRAIN_FILE"] == "/tmp/llmctl-drain"
        elif bp.runtime == "triton-vllm":  # Triton drains on SIGTERM, up to --exit-timeout-secs
            assert command == ["sleep", str(PRESTOP_DELAY_S)]
        else:  # TorchServe and Ray Serve LLM cannot be told to drain: wait out the grace
            assert command == ["sleep", str(PRESTOP_DELAY_S + drain_grace_s(bp))]
        # the hook and the drain fit in the grace period the kubelet gives
        assert termination_grace_s(bp) > PRESTOP_DELAY_S + drain_grace_s(bp)


def test_a_rolling_update_keeps_the_old_ray_cluster_for_one_generation() -> None:
    for name in CATALOG:
        bp = blueprint(name)
        if bp.runtime.startswith("ray-"):
            spec = find(manifests_for(name), "RayService")["spec"]
            assert spec["rayClusterDeletionDelaySeconds"] == drain_grace_s(bp)


def test_triton_and_torchserve_get_the_blueprint_limits() -> None:
    bp = blueprint("llama2-triton-vllm-gpu")
    args = find(manifests_for("llama2-triton-vllm-gpu"), "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert f"--http-max-input-size={request_bytes(bp)}" in args
    assert f"--exit-timeout-secs={drain_grace_s(bp)}" in args

    from llmctl.serving.torchserve_neuronx.config import config_properties

    ts = blueprint("llama2-torchserve-inf2")
    props = dict(line.split("=", 1) for line in config_properties(ts).splitlines())
    assert int(props["max_request_size"]) == request_bytes(ts)
    assert int(props["job_queue_size"]) == ts.serving.max_concurrent_requests + queue_limit(ts)


def test_ray_vllm_sheds_with_rays_own_queue_bound() -> None:
    from llmctl.serving.ray_vllm.app import llm_config

    bp = blueprint("llama3-vllm-inf2")
    plain = llm_config(bp)["deployment_config"]
    assert plain["max_queued_requests"] == bp.serving.max_concurrent_requests + queue_limit(bp)
    assert "backpressure_config" not in plain
    newer = llm_config(bp, backpressure=True)["deployment_config"]
    assert newer["backpressure_config"] == {"status_code": 429, "retry_after_s": 1}


def test_the_prestop_drain_waits_for_the_replicas_or_the_grace(tmp_path: Any) -> None:
    marker = tmp_path / "drain"
    assert drain(marker, grace_s=0.3, min_wait_s=0.0, poll_s=0.05) is False  # nobody answered
    assert marker.exists()
    (tmp_path / "drain.idle").write_text("{}")
    # a stale .idle from an earlier drain is removed first, so this waits the grace again
    assert drain(marker, grace_s=0.2, min_wait_s=0.0, poll_s=0.05) is False
    assert main(["--grace=0", f"--file={marker}"]) == 0
