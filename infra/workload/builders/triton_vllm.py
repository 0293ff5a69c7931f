"""triton-vllm: Triton Inference Server with its vLLM backend (seed "NVIDIA Triton Server with vLLM").

The container runs the serving package's start module, `python3 -m llmctl.serving.triton_vllm.start`,
with the blueprint in `LLMCTL_BLUEPRINT` (the same JSON the Ray apps get as their arg). It renders
the model repository, syncs the S3 model mirror when `LLMCTL_MODEL_URI` is set (so `model.json`
points vLLM at the local copy), then execs `tritonserver` with the ports given as container args.
Ports: 8000 HTTP, 8001 gRPC, 8002 metrics. An HPA scales the Deployment between the blueprint's
bounds on CPU utilisation (as the seed did); see docs/workload.md for a custom-metric alternative.
"""

from __future__ import annotations

from llmctl.infra.workload.builders import common, placement
from llmctl.infra.workload.builders.cache import cache_env
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, service
from llmctl.infra.workload.builders.registry import register
from llmctl.infra.workload.config import WorkloadConfig

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
PYTHON = "python3"  # the Triton images have no `python`


def name(config: WorkloadConfig) -> str:
    """Deployment and Service name."""
    return f"{config.blueprint.name}-triton"


def endpoint(config: WorkloadConfig) -> tuple[str, int]:
    """The Service and port of the endpoint (Triton's HTTP port)."""
    return name(config), HTTP_PORT


def server_args() -> list[str]:
    """tritonserver flags passed through the start module (it adds `--model-repository`)."""
    return [
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        # no --disable-auto-complete-config: the vLLM backend declares the model's inputs, outputs
        # and decoupled policy in its auto_complete_config
    ]


def build(config: WorkloadConfig) -> list[Obj]:
    """Deployment, Service and HPA of a triton-vllm blueprint."""
    from llmctl.serving.triton_vllm import start

    bp = config.blueprint
    image, baked = common.serving_image(config)
    container: Obj = {
        "name": "triton",
        "image": image,
        "command": common.start_module_command(config, start.__name__, python=PYTHON, baked=baked),
        "args": server_args(),
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT},
            {"name": "grpc", "containerPort": GRPC_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "env": [common.blueprint_env(config), *common.token_env(config), *cache_env(config)],
        "resources": placement.serving_resources(config),
        **common.http_probes("/v2/health/ready", "http", startup_seconds=common.readiness_timeout(config)),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod_spec: Obj = {
        "serviceAccountName": common.SERVICE_ACCOUNT,
        **placement.scheduling(placement.serving_pool(config), bp.compute.instance_type),
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    deployment, *hpa = common.scaled_serving_deployment(config, name(config), pod_spec, METRICS_PORT)
    ports = [port("http", HTTP_PORT), port("grpc", GRPC_PORT), port("metrics", METRICS_PORT)]
    return [deployment, service(config, name(config), "serving", ports), *hpa]


register("triton-vllm", build, endpoint)
