"""Autoscaling per runtime (issue 28): no scaling bound is changed silently; each runtime scales on
its queue (KEDA on the server's gauge for Deployments, Ray Serve's ongoing requests for Ray) or
the blueprint names another signal; `min_replicas: 0` is rendered where the runtime can wake from
zero and refused, with the reason, where it cannot."""

from __future__ import annotations

from typing import Any

import keda_metrics_api as keda
import pytest
import yaml
from workload_helpers import CATALOG, TOKEN, blueprint, find, worker

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.rules import check, queue_scaled
from llmctl.blueprints.runtimes import runtime, runtimes
from llmctl.blueprints.schema import Blueprint, ScalingSpec
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests

# one catalog blueprint per runtime
BY_RUNTIME = {
    "ray-neuronx": "llama2-inf2",
    "ray-vllm": "llama3-vllm-inf2",
    "triton-vllm": "llama2-triton-vllm-gpu",
    "torchserve-neuronx": "llama2-torchserve-inf2",
    "ray-cpu": "tiny-cpu",
}
RAY = [name for name in BY_RUNTIME if runtime(name).endpoint == "ray-serve"]
DEPLOYMENT = [name for name in BY_RUNTIME if runtime(name).endpoint == "service"]


def scaled(name: str, **scaling: Any) -> Blueprint:
    """A catalog blueprint with its scaling section replaced (validated like a file would be)."""
    base = blueprint(name)
    return base.model_copy(
        update={"scaling": ScalingSpec.model_validate({**base.scaling.model_dump(), **scaling})}
    )


def objects(bp: Blueprint) -> list[dict[str, Any]]:
    return build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=TOKEN
    )


def scaling_problems(bp: Blueprint) -> list[tuple[str, str]]:
    return [(path, message) for path, message in check(bp, hardware()) if path.startswith("scaling")]


def test_every_runtime_is_covered() -> None:
    assert set(BY_RUNTIME) == {spec.name for spec in runtimes()}
    for name, catalog_name in BY_RUNTIME.items():
        assert blueprint(catalog_name).runtime == name


@pytest.mark.parametrize("name", RAY)
def test_ray_runtimes_render_min_replicas_zero_as_given(name: str) -> None:
    bp = scaled(BY_RUNTIME[name], replicas=0, min_replicas=0, max_replicas=2)
    assert scaling_problems(bp) == []
    rendered = objects(bp)
    group = worker(rendered)
    # KubeRay may remove every worker pod; the head keeps its own pool (it has no accelerator)
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (0, 0, 2)
    service = find(rendered, "RayService")
    assert service["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True
    app = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]
    assert app["args"]["blueprint"]["scaling"]["min_replicas"] == 0


@pytest.mark.parametrize("name", DEPLOYMENT)
@pytest.mark.parametrize("signal", ["queue", "cpu"])
def test_deployment_runtimes_refuse_zero_and_say_why(name: str, signal: str) -> None:
    bp = scaled(BY_RUNTIME[name], replicas=1, min_replicas=0, max_replicas=2, signal=signal)
    messages = [message for path, message in scaling_problems(bp) if path == "scaling.min_replicas"]
    assert len(messages) == 1, scaling_problems(bp)
    reason = "cannot go below one pod" if signal == "cpu" else "nothing would wake it"
    assert f"{name} cannot scale to zero" in messages[0] and reason in messages[0]


def test_triton_scales_on_its_queue_through_keda() -> None:
    bp = scaled("llama2-triton-vllm-gpu", target_queue=3, queue_activation=1)
    rendered = objects(bp)
    assert not [o for o in rendered if o["kind"] == "HorizontalPodAutoscaler"]
    scaled_object = find(rendered, "ScaledObject")
    deployment = find(rendered, "Deployment")
    spec = scaled_object["spec"]
    assert spec["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 5)
    [trigger] = spec["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "metrics-api" and trigger["metricType"] == "AverageValue"
    # vLLM's own queue gauge (serving/triton_vllm/queue_metrics.py): Triton's pending-request gauge
    # never moves with the vLLM backend
    assert meta["valueLocation"] == "vllm:num_requests_waiting"
    assert meta["format"] == "prometheus" and meta["aggregateFromKubeServiceEndpoints"] == "true"
    assert (meta["aggregationType"], meta["targetValue"], meta["activationTargetValue"]) == ("sum", "3", "1")
    assert "advanced" not in spec  # no delays set: KEDA's and the HPA's defaults


# The container port that serves each runtime's queue gauge (blueprints/data/runtimes.yaml
# `queue_metric`): a runtime that gains a queue metric must be named here.
QUEUE_PORT_NAME = {"triton-vllm": "vllm-metrics"}
POD_IP = "10.0.3.17"  # the pod's address in its EndpointSlice (any address does)


def keda_triggers(rendered: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(ScaledObject, trigger) for every metrics-api trigger among the rendered objects."""
    return [
        (o, trigger)
        for o in rendered
        if o["kind"] == "ScaledObject"
        for trigger in o["spec"]["triggers"]
        if trigger["type"] == "metrics-api"
    ]


def pods_of(rendered: list[dict[str, Any]], deployment: str) -> list[keda.Pod]:
    """The Deployment's pod, ready, with its template's labels and named container ports."""
    template = find(rendered, "Deployment", deployment)["spec"]["template"]
    ports = {
        p["name"]: p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])
    }
    return [keda.Pod(labels=template["metadata"]["labels"], ip=POD_IP, ports=ports)]


def keda_blueprints() -> list[Blueprint]:
    """Every catalog blueprint whose rendering has a KEDA trigger, and every Deployment runtime's
    catalog blueprint switched to the queue signal where its runtime has a queue metric."""
    found = [blueprint(name) for name in CATALOG if keda_triggers(objects(blueprint(name)))]
    for name in DEPLOYMENT:
        if runtime(name).queue_metric:
            found.append(scaled(BY_RUNTIME[name], signal="queue", min_replicas=1, max_replicas=3))
    return found


def test_queue_runtimes_name_their_metrics_port() -> None:
    assert {spec.name for spec in runtimes() if spec.queue_metric} == set(QUEUE_PORT_NAME)
    assert "llama2-triton-vllm-gpu" in [bp.name for bp in keda_blueprints()]


@pytest.mark.parametrize("exposure", ["port-forward", "internal-lb"])
def test_keda_reaches_every_pods_queue_gauge(exposure: str) -> None:
    """KEDA's metrics-api scaler calls, for each ready pod of the Service the URL names, the pod's
    address at the URL's port only where that Service's EndpointSlice carries the port, and at
    port 80 otherwise (tests/workload/keda_metrics_api.py, from kedacore/keda
    pkg/scalers/metrics_api_scaler.go getEndpointsUrlsFromServiceURL at v2.20.2). The URL must
    therefore name a Service with the metrics port; it is never the load-balanced one."""
    checked = 0
    for base in keda_blueprints():
        bp = base.model_copy(update={"exposure": base.exposure.model_validate({"mode": exposure})})
        rendered = objects(bp)
        services = [o for o in rendered if o["kind"] == "Service"]
        for scaled_object, trigger in keda_triggers(rendered):
            meta = trigger["metadata"]
            assert meta["aggregateFromKubeServiceEndpoints"] == "true"
            deployment = scaled_object["spec"]["scaleTargetRef"]["name"]
            pods = pods_of(rendered, deployment)
            port = pods[0].ports[QUEUE_PORT_NAME[bp.runtime]]
            urls = keda.endpoint_urls(meta["url"], services, pods)
            assert urls == [f"http://{POD_IP}:{port}/metrics"], (bp.name, meta["url"])
            named = meta["url"].split("//")[1].split(".")[0]
            assert find(rendered, "Service", named)["spec"]["type"] == "ClusterIP"
            assert meta["valueLocation"] == runtime(bp.runtime).queue_metric
            checked += 1
    assert checked >= 2  # the catalog's Triton blueprint and its queue-signal variant


def test_the_oracle_follows_kedas_port_rule() -> None:
    """The old rendering (the endpoint Service, which has only port 8000) resolved to port 80: the
    rule the test above holds the builders to."""
    rendered = objects(blueprint("llama2-triton-vllm-gpu"))
    services = [o for o in rendered if o["kind"] == "Service"]
    pods = pods_of(rendered, "llama2-triton-vllm-gpu-triton")
    ns = find(rendered, "Deployment")["metadata"]["namespace"]
    old = f"http://llama2-triton-vllm-gpu-triton.{ns}.svc.cluster.local:8003/metrics"
    assert keda.endpoint_urls(old, services, pods) == [f"http://{POD_IP}/metrics"]
    fixed = f"http://llama2-triton-vllm-gpu-triton-internal.{ns}.svc.cluster.local:8003/metrics?x=1"
    assert keda.endpoint_urls(fixed, services, pods) == [f"http://{POD_IP}:8003/metrics"]
    assert (
        keda.endpoint_urls(fixed.replace(".svc", "-other.svc").replace(ns, "elsewhere"), services, pods) == []
    )


def test_delays_reach_keda_and_the_hpa() -> None:
    queue = find(
        objects(scaled("llama2-triton-vllm-gpu", upscale_delay_s=5, downscale_delay_s=120)), "ScaledObject"
    )
    behavior = queue["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior == {
        "scaleUp": {"stabilizationWindowSeconds": 5},
        "scaleDown": {"stabilizationWindowSeconds": 120},
    }
    cpu = find(objects(scaled("llama2-torchserve-inf2", downscale_delay_s=60)), "HorizontalPodAutoscaler")
    assert cpu["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 60}}


def test_the_cpu_hpa_is_only_where_a_blueprint_asks_for_it() -> None:
    torchserve = objects(blueprint("llama2-torchserve-inf2"))  # signal: cpu in the catalog file
    hpa = find(torchserve, "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 2)
    assert not [o for o in torchserve if o["kind"] == "ScaledObject"]
    cpu_triton = objects(scaled("llama2-triton-vllm-gpu", signal="cpu"))
    assert find(cpu_triton, "HorizontalPodAutoscaler") and not [
        o for o in cpu_triton if o["kind"] == "ScaledObject"
    ]


def test_torchserve_has_no_queue_metric_so_queue_scaling_is_refused() -> None:
    bp = scaled("llama2-torchserve-inf2", signal="queue")
    [(path, message)] = scaling_problems(bp)
    assert (
        path == "scaling.signal" and "exports no queue-depth metric" in message and "signal: cpu" in message
    )
    # fixed replicas need no signal
    assert scaling_problems(scaled("llama2-torchserve-inf2", signal="queue", max_replicas=1)) == []


@pytest.mark.parametrize("name", RAY)
def test_ray_runtimes_keep_serves_signal(name: str) -> None:
    [(path, message)] = scaling_problems(scaled(BY_RUNTIME[name], signal="cpu"))
    assert path == "scaling.signal" and "Ray Serve's ongoing requests" in message


def test_fixed_replicas_get_no_autoscaler() -> None:
    rendered = objects(scaled("llama2-triton-vllm-gpu", min_replicas=2, max_replicas=2, replicas=2))
    assert find(rendered, "Deployment")["spec"]["replicas"] == 2
    assert not [o for o in rendered if o["kind"] in ("ScaledObject", "HorizontalPodAutoscaler")]


def test_the_platform_installs_keda_only_for_queue_scaled_deployments() -> None:
    triton, tiny = blueprint("llama2-triton-vllm-gpu"), blueprint("tiny-cpu")
    assert queue_scaled(triton) and not queue_scaled(tiny)
    assert not queue_scaled(blueprint("llama2-torchserve-inf2"))  # its CPU HPA needs no KEDA
    with_triton = PlatformConfig.for_blueprints([triton], stack="ci")
    assert with_triton.queue_scaling and "keda" in with_triton.chart_keys()
    assert "keda" not in PlatformConfig.for_blueprints([tiny], stack="ci").chart_keys()
    fixed = scaled("llama2-triton-vllm-gpu", min_replicas=1, max_replicas=1, replicas=1)
    assert "keda" not in PlatformConfig.for_blueprints([fixed], stack="ci").chart_keys()


def test_the_metrics_window_and_the_zero_delay_reach_ray_serve_as_ray_reads_them() -> None:
    import warnings

    from ray.serve.config import AutoscalingConfig

    from llmctl.serving.common.ingress import autoscaling_config

    bp = scaled(
        "tiny-cpu",
        replicas=1,
        min_replicas=0,
        max_replicas=2,
        look_back_period_s=12,
        downscale_to_zero_delay_s=20,
    )
    config = autoscaling_config(bp)
    assert (config["look_back_period_s"], config["downscale_to_zero_delay_s"]) == (12, 20)
    assert "look_back_period_s" not in autoscaling_config(scaled("tiny-cpu", max_replicas=2))  # Serve's 30 s
    # Ray's own model of the config takes it without a warning (a window no longer than Ray's
    # metrics interval warns there, and Ray says it will refuse it)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parsed = AutoscalingConfig(**config)
    assert (parsed.look_back_period_s, parsed.downscale_to_zero_delay_s) == (12, 20)
    with pytest.warns(FutureWarning, match="look_back_period_s"):
        AutoscalingConfig(**{**config, "look_back_period_s": 10})


@pytest.mark.parametrize("window", [10, 5])
def test_a_window_no_longer_than_rays_metrics_interval_is_refused(window: float) -> None:
    with pytest.raises(ValueError, match=r"must be more than 10 s: Ray Serve's replicas push their metrics"):
        ScalingSpec(max_replicas=2, look_back_period_s=window)


@pytest.mark.parametrize("name", DEPLOYMENT)
@pytest.mark.parametrize("field", ["look_back_period_s", "downscale_to_zero_delay_s"])
def test_deployment_runtimes_refuse_rays_own_scaling_fields(name: str, field: str) -> None:
    problems = scaling_problems(scaled(BY_RUNTIME[name], **{field: 30}))
    [message] = [message for path, message in problems if path == f"scaling.{field}"]
    assert f"{name} cannot use scaling.{field}" in message and message.endswith("remove it")
    assert scaling_problems(scaled(BY_RUNTIME["ray-cpu"], **{field: 30})) == []  # Serve's own fields
