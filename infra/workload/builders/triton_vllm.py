"""triton-vllm: Triton Inference Server with its vLLM backend (seed "NVIDIA Triton Server with vLLM").

The container runs the serving package's start module, `python3 -m llmctl.serving.triton_vllm.start`,
with the blueprint in `LLMCTL_BLUEPRINT` (the same JSON the Ray apps get as their arg). It renders
the model repository, syncs the S3 model mirror when `LLMCTL_MODEL_URI` is set (so `model.json`
points vLLM at the local copy), then execs `tritonserver` with the ports given as container args.
Ports: 8000 HTTP, 8001 gRPC, 8002 Triton's metrics, 8003 vLLM's own metrics. Overload:
`--http-max-input-size` is the blueprint's request limit; on SIGTERM Triton stops accepting and
waits up to `--exit-timeout-secs` (the drain grace) for in-flight requests, after a preStop sleep
that lets the pod leave the endpoints.

Scaling (`common.scaled_serving_deployment`, `autoscaling.py`): with `scaling.signal: queue` (the
default) a KEDA ScaledObject scales the Deployment on `vllm:num_requests_waiting`, the requests
queued in vLLM's scheduler, read from port 8003 through the `-internal` Service, the one that
carries that port (`serving/triton_vllm/queue_metrics.py` says why not Triton's own pending-request
gauge, which stays near 0 with the vLLM backend); with
`scaling.signal: cpu` an HPA on CPU utilisation.
"""

from __future__ import annotations

from llmctl.blueprints import serving_limits
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.workload.builders import common, placement, stopping, writable
from llmctl.infra.workload.builders.cache import cache_env
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, service
from llmctl.infra.workload.builders.registry import register
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import with_app
from llmctl.serving.triton_vllm import queue_metrics, start

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
VLLM_METRICS_PORT = queue_metrics.PORT  # vLLM's own gauges (the queue the autoscaler reads)
PYTHON = "python3"  # the Triton images have no `python`


def name(config: WorkloadConfig) -> str:
    """Deployment and Service name."""
    return f"{config.blueprint.name}-triton"


def internal_name(config: WorkloadConfig) -> str:
    """The ClusterIP Service of gRPC and both metrics ports; KEDA's trigger reads vLLM's queue gauge
    through it (`builders/autoscaling.py` says why not the endpoint Service)."""
    return f"{name(config)}-internal"


def endpoint(config: WorkloadConfig) -> tuple[str, int]:
    """The Service and port of the endpoint (Triton's HTTP port)."""
    return name(config), HTTP_PORT


def server_args(blueprint: Blueprint) -> list[str]:
    """tritonserver flags passed through the start module (it adds `--model-repository`)."""
    return [
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        f"--http-max-input-size={serving_limits.request_bytes(blueprint)}",
        f"--exit-timeout-secs={serving_limits.drain_grace_s(blueprint)}",
        # no --disable-auto-complete-config: the vLLM backend declares the model's inputs, outputs
        # and decoupled policy in its auto_complete_config
    ]


def build(config: WorkloadConfig) -> list[Obj]:
    """Deployment, the endpoint Service (HTTP), the in-cluster Service (gRPC, Triton's metrics, vLLM's
    queue gauge) and the autoscaler (KEDA ScaledObject on vLLM's queue, or an HPA on CPU)."""

    bp = config.blueprint
    image, baked = common.serving_image(config)
    container: Obj = {
        "name": "triton",
        "image": image,
        "command": common.start_module_command(config, start.__name__, python=PYTHON, baked=baked),
        "args": server_args(bp),
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT},
            {"name": "grpc", "containerPort": GRPC_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
            {"name": "vllm-metrics", "containerPort": VLLM_METRICS_PORT},
        ],
        "env": [common.blueprint_env(config), *common.token_env(config), *cache_env(config)],
        "resources": placement.serving_resources(config),
        **common.http_probes("/v2/health/ready", "http", startup_seconds=common.readiness_timeout(config)),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        **stopping.sleep_hook(),
    }
    pod_spec: Obj = {
        "serviceAccountName": common.SERVICE_ACCOUNT,
        **placement.serving_scheduling(config),
        **stopping.termination_grace(config),
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    # a read-only root: the model repository the start module writes on a volume of its own, with the
    # install, the caches and /tmp (`writable.py`)
    pod_spec = writable.read_only_root(
        with_app(config, pod_spec),
        "triton",
        {"llmctl-model-repository": start.DEFAULT_REPOSITORY},
        installs=not baked,
    )
    deployment, *hpa = common.scaled_serving_deployment(
        config,
        name(config),
        pod_spec,
        METRICS_PORT,
        metrics_service=internal_name(config),
        queue_port=VLLM_METRICS_PORT,
    )
    # Only HTTP (the endpoint, which checks no key itself: see docs/security.md) goes through the
    # exposure; gRPC and the metrics stay inside the cluster, on a ClusterIP Service.
    internal = service(
        config,
        internal_name(config),
        "serving",
        [port("grpc", GRPC_PORT), port("metrics", METRICS_PORT), port("vllm-metrics", VLLM_METRICS_PORT)],
        exposed=False,
    )
    return [deployment, service(config, name(config), "serving", [port("http", HTTP_PORT)]), internal, *hpa]


register("triton-vllm", build, endpoint)
