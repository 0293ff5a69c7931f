"""Issue 52: Ray's fast path (HAProxy ingress, Ray Serve LLM direct streaming) as the RayService renders it.

The env names and their meaning are Ray 2.58.0's (its wheel: ray/serve/_private/constants.py,
haproxy.py, haproxy_templates.py, node_port_manager.py; ray/llm/_internal/serve/constants.py and
core/ingress/builder.py); the ulimit form is KubeRay's (ray-project/kuberay v1.7.0
ray-operator/controllers/ray/common/pod.go). Each test fails on the code before the fast path:
no env, no ports, no `serving.ray_fast_path` field, no rule.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from test_network_policy import OUTSIDE, TENANT, _pod, _policies, _with_exposure, ingress_allowed
from workload_helpers import TOKEN, blueprint, config_for, find, manifests_for

from llmctl.blueprints import fast_path
from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.describe import describe
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.rules import check
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.versions import versions
from llmctl.infra.workload.builders import fast_path as rendered
from llmctl.infra.workload.manifests import build_manifests

GPU = "llama2-70b-vllm-gpu"
FAST_ENV = {
    "RAY_SERVE_ENABLE_HA_PROXY": "1",
    "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1",
    "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
    "RAY_SERVE_DEFAULT_HTTP_HOST": "0.0.0.0",
    # (256 slots + 256 queued) x 4 replicas = 2,048 streams: the 4,096 floor
    "RAY_SERVE_HAPROXY_MAXCONN": "4096",
    "RAY_SERVE_HAPROXY_STATS_PORT": "8404",
    "RAY_SERVE_HAPROXY_METRICS_PORT": "9101",
    "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": "30000",
    "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": "30008",
    "RAY_START_ULIMIT_OPEN_FILES": "65536",
}
DIRECT = tuple(range(30000, 30008))


def _containers(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    cluster = find(objects, "RayService")["spec"]["rayClusterConfig"]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    worker = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    return head, worker


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _ports(container: dict[str, Any]) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def _with_serving(name: str, **serving: Any) -> Blueprint:
    bp = blueprint(name)
    return bp.model_copy(update={"serving": bp.serving.model_copy(update=serving)})


def test_the_gpu_blueprint_renders_the_fast_path_on_head_and_workers() -> None:
    head, worker = _containers(manifests_for(GPU))
    for container in (head, worker):  # the controller (head) reads the switches at start
        env = _env(container)
        assert {k: env.get(k) for k in FAST_ENV} == FAST_ENV
    assert _ports(worker) == {
        "serve": 8000,  # HAProxy's frontend runs on every node with a proxy
        "haproxy-stats": 8404,
        "haproxy-metrics": 9101,
        **{f"ingress-{p}": p for p in DIRECT},
    }
    head_ports = _ports(head)
    assert head_ports["serve"] == 8000 and head_ports["haproxy-stats"] == 8404
    assert [head_ports[f"ingress-{p}"] for p in DIRECT] == list(DIRECT)  # LLMRouter has num_cpus 0
    # base-image mode: our own start command raises the limit the way KubeRay's does
    for container in (head, worker):
        if "args" in container:
            assert container["args"][0].startswith("ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ")


def test_the_serve_service_points_at_the_haproxy_frontend() -> None:
    service = find(manifests_for(GPU), "RayService")["spec"]["serveService"]
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("serve", 8000)]
    assert rendered.HTTP_PORT == 8000


def test_false_keeps_the_default_path() -> None:
    bp = _with_serving(GPU, ray_fast_path=False)
    objects = build_manifests(config_for(GPU).model_copy(update={"blueprint": bp}), hf_token=TOKEN)
    head, worker = _containers(objects)
    assert not any(name in _env(c) for c in (head, worker) for name in FAST_ENV)
    assert "ports" not in worker and set(_ports(head)) == {
        "gcs-server",
        "dashboard",
        "client",
        "serve",
        "metrics",
    }
    assert describe_of(bp)["ray_fast_path"] is False


@pytest.mark.parametrize("name", ["llama3-vllm-inf2", "llama2-inf2", "tiny-cpu", "llama2-7b-cpu"])
def test_blueprints_that_cannot_take_it_render_nothing_and_say_why(name: str) -> None:
    head, worker = _containers(manifests_for(name))
    assert not any(n in _env(c) for c in (head, worker) for n in FAST_ENV)
    reason = fast_path.blocker(blueprint(name))
    assert reason is not None
    if name == "llama3-vllm-inf2":
        assert reason.startswith("its Ray is 2.53.0 (the Neuron vLLM container's vLLM 0.13")
    else:
        assert "does not serve Ray Serve LLM's app" in reason
    shown = describe(name)["derived"]
    assert shown["ray_fast_path"] is False and shown["ray_fast_path_reason"] == f"cannot: {reason}"
    # asking for it is refused with the reason, before any cloud call
    problems = check(_with_serving(name, ray_fast_path=True), hardware())
    assert (
        "serving.ray_fast_path",
        f"this blueprint cannot take it: {reason}; remove it or set false",
    ) in problems


def describe_of(bp: Blueprint) -> dict[str, object]:
    return fast_path.describe(bp)


def test_the_ray_of_an_older_rayproject_image_is_refused() -> None:
    bp = blueprint(GPU)
    old = bp.model_copy(
        update={"image": bp.image.model_copy(update={"base": "rayproject/ray-llm:2.54.0-py311-cu128"})}
    )
    assert fast_path.blueprint_ray(old) == "2.54.0"
    assert (
        fast_path.blocker(old)
        == "its Ray is 2.54.0; the HAProxy ingress and direct streaming came in Ray 2.55"
    )
    assert fast_path.enabled(old) is False
    assert fast_path.blocker(bp) is None and fast_path.blueprint_ray(bp) == "2.58.0"
    # AWS's Ray LLM DLC: its tag names no Ray, versions.yaml records it (Dockerfile.cuda FRAMEWORK_VERSION)
    dlc = versions().images["ray_vllm_gpu_efa"]
    recorded = dlc.model_copy(update={"ray": "2.54.0"})
    images = {**versions().images, "ray_vllm_gpu_efa": recorded}
    on_dlc = bp.model_copy(update={"image": bp.image.model_copy(update={"base": dlc.image})})
    assert fast_path.blueprint_ray(on_dlc) == "2.58.0" == dlc.ray
    with patch.object(fast_path, "versions", lambda: versions().model_copy(update={"images": images})):
        assert fast_path.blueprint_ray(on_dlc) == "2.54.0"  # the record, not the runtime's pin


def test_the_connection_limit_follows_what_the_app_admits() -> None:
    small = _with_serving(GPU, max_concurrent_requests=1024)  # (1024 + 1024) x 4 = 8,192
    assert rendered.maxconn(small) == 8192
    assert rendered.haproxy_files(8192) == 20544 and rendered.open_files(small) == 65536
    huge = _with_serving(GPU, max_concurrent_requests=4096, max_queued_requests=4096)  # 8,192 x 4
    assert rendered.maxconn(huge) == 32768
    assert rendered.open_files(huge) == 81984  # beyond KubeRay's 65,536: 2.5 x 32,768 + 64
    # the probe's figure: HAProxy asked for 50,036 files at maxconn 20,000 (2.5 x 20,000 + 36)
    assert rendered.haproxy_files(20000) - 50036 == rendered.HAPROXY_FD_MARGIN - 36


def test_the_fast_path_ports_are_open_between_ray_pods_only() -> None:
    config = _with_exposure(GPU, mode="internal-lb")
    objects = build_manifests(config, hf_token=TOKEN)
    policies = _policies(objects)
    head, worker = _pod(objects, "ray-head", GPU), _pod(objects, "ray-worker", GPU)
    for port in (8404, 9101, *DIRECT):
        assert ingress_allowed(policies, head, worker, port), port  # HAProxy on the head -> a replica
        assert ingress_allowed(policies, worker, head, port), port  # HAProxy on a worker -> the head's router
        for target in (head, worker):
            assert not ingress_allowed(policies, TENANT, target, port), port
            assert not ingress_allowed(policies, OUTSIDE, target, port), port
    for target in (head, worker):  # the load balancer reaches HAProxy on every Ray pod
        assert ingress_allowed(policies, OUTSIDE, target, 8000)


def test_the_catalog_field_is_documented_and_typed() -> None:
    field = Blueprint.model_fields["serving"].annotation.model_fields["ray_fast_path"]  # type: ignore[union-attr]
    assert field.default is None and "HAProxy" in (field.description or "")
    assert load_blueprint(GPU).serving.ray_fast_path is True
