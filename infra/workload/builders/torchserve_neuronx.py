"""torchserve-neuronx: TorchServe with the transformers-neuronx handler on Inferentia2
(seed blog "Llama 2 with TorchServe on Inf2": tp 12 on inf2.24xlarge, micro-batching, streaming).

The container runs the serving package's start module,
`python -m llmctl.serving.torchserve_neuronx.start`, with the blueprint in `LLMCTL_BLUEPRINT` (the
same JSON the Ray apps get as their arg). It renders `model-config.yaml` and `config.properties`,
archives the llmctl handler into the model store (an emptyDir) and runs TorchServe in the
foreground. The handler loads the weights from the S3 mirror (`LLMCTL_MODEL_URI`) when the
blueprint enables it, and compiled artifacts from the S3 compile cache. Ports: 8080 llmctl's gateway
(the API key; it forwards to TorchServe's inference API on the pod's loopback, 8083), 8081
management (loopback only), 8082 metrics. TorchServe does not drain on SIGTERM, so the preStop hook waits
out the drain grace (the pod has left the Service's endpoints) within
`terminationGracePeriodSeconds`.
"""

from __future__ import annotations

from llmctl.infra.workload.builders import common, placement, stopping, writable
from llmctl.infra.workload.builders.cache import cache_env
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, service
from llmctl.infra.workload.builders.registry import register
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import with_app
from llmctl.serving.torchserve_neuronx import start
from llmctl.serving.torchserve_neuronx.config import MODEL_STORE

PYTHON = "python"


def name(config: WorkloadConfig) -> str:
    """Deployment and Service name."""
    return f"{config.blueprint.name}-torchserve"


def endpoint(config: WorkloadConfig) -> tuple[str, int]:
    """The Service and port of the endpoint (TorchServe's inference port)."""
    return name(config), config.blueprint.serving.port


def build(config: WorkloadConfig) -> list[Obj]:
    """Deployment, Services and (when bounds differ) HPA of a torchserve-neuronx blueprint."""

    bp = config.blueprint
    inference = bp.serving.port
    metrics = inference + 2  # management (inference + 1) is on loopback
    image, baked = common.serving_image(config)
    container: Obj = {
        "name": "torchserve",
        "image": image,
        "command": common.start_module_command(config, start.__name__, python=PYTHON, baked=baked),
        "ports": [
            {"name": "inference", "containerPort": inference},
            {"name": "metrics", "containerPort": metrics},
        ],
        "env": [
            common.blueprint_env(config),
            *placement.neuron_env(config),
            {"name": "NEURONX_CACHE", "value": "on"},
            *common.token_env(config),
            *common.api_key_env(config),  # the gateway's check (serving/torchserve_neuronx/gateway.py)
            *cache_env(config),
        ],
        "resources": placement.serving_resources(config),
        **common.http_probes("/ping", "inference", startup_seconds=common.readiness_timeout(config)),
        "volumeMounts": [
            {"name": "model-store", "mountPath": MODEL_STORE},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
        **stopping.wait_hook(config),
    }
    pod_spec: Obj = {
        "serviceAccountName": common.SERVICE_ACCOUNT,
        **placement.scheduler_name(config),
        **placement.serving_scheduling(config),
        **stopping.termination_grace(config),
        "containers": [container],
        "volumes": [
            {"name": "model-store", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    # a read-only root: the start's work folder (the rendered config, TorchServe's key file and logs) on a
    # volume of its own, with the install, the caches and /tmp (`writable.py`)
    pod_spec = writable.read_only_root(
        with_app(config, pod_spec),
        "torchserve",
        {"llmctl-ts-work": start.DEFAULT_WORKDIR},
        installs=not baked,
    )
    admin_name = f"{name(config)}-admin"
    deployment, *hpa = common.scaled_serving_deployment(
        config, name(config), pod_spec, metrics, metrics_service=admin_name
    )
    # Only inference goes through the exposure; metrics stay inside the cluster. The management API
    # listens on the pod's loopback only (`serving/torchserve_neuronx/config.py`): no Service port.
    admin = service(config, admin_name, "serving", [port("metrics", metrics)], exposed=False)
    return [deployment, service(config, name(config), "serving", [port("inference", inference)]), admin, *hpa]


register("torchserve-neuronx", build, endpoint)
