"""torchserve-neuronx: TorchServe with the transformers-neuronx handler on Inferentia2
(seed blog "Llama 2 with TorchServe on Inf2": tp 12 on inf2.24xlarge, micro-batching, streaming).

`model-config.yaml` and `config.properties` come from
`llmctl.serving.torchserve_neuronx.config.render_model_config` and are mounted from a ConfigMap.
At start the container builds the model store (an unpacked archive made by
`torch-model-archiver` from the llmctl handler and that config) unless it already exists, then
runs TorchServe in the foreground. Weights load from the S3 mirror (`LLMCTL_MODEL_URI`) when the
blueprint enables it, and compiled artifacts from the S3 compile cache. Ports: 8080 inference,
8081 management, 8082 metrics.
"""

from __future__ import annotations

import shlex

from llmctl.infra.workload.builders import common
from llmctl.infra.workload.builders.cache import cache_env
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, service
from llmctl.infra.workload.config import WorkloadConfig

CONFIG_DIR = "/opt/llmctl/torchserve"
MODEL_STORE = "/home/model-server/model-store"
HANDLER_MODULE = "llmctl.serving.torchserve_neuronx.handler"


def name(config: WorkloadConfig) -> str:
    """Deployment and Service name."""
    return f"{config.blueprint.name}-torchserve"


def _script(config: WorkloadConfig, archive: str, baked: bool) -> str:
    install = "" if baked else f"pip install --no-cache-dir -q {shlex.quote(common.app_requirement(config))}\n"
    return (
        "set -euo pipefail\n"
        f"{install}"
        f'mkdir -p {MODEL_STORE}\nif [ ! -d {MODEL_STORE}/{archive} ]; then\n'
        f"  HANDLER=$(python -c 'import {HANDLER_MODULE} as h; print(h.__file__)')\n"
        f'  torch-model-archiver --model-name {archive} --version 1.0 --handler "$HANDLER" '
        f"--config-file {CONFIG_DIR}/model-config.yaml --archive-format no-archive --export-path {MODEL_STORE}\n"
        "fi\n"
        f"exec torchserve --start --foreground --ncs --ts-config {CONFIG_DIR}/config.properties "
        f"--model-store {MODEL_STORE}\n"
    )


def build(config: WorkloadConfig) -> list[Obj]:
    """ConfigMap, Deployment, Service and (when bounds differ) HPA of a torchserve-neuronx blueprint."""
    from llmctl.serving.torchserve_neuronx.config import archive_name, render_model_config

    bp = config.blueprint
    inference = bp.serving.port
    management, metrics = inference + 1, inference + 2
    files, items = common.config_map(config, f"{name(config)}-config", render_model_config(bp), "serving")
    image, baked = common.serving_image(config)
    container: Obj = {
        "name": "torchserve",
        "image": image,
        "command": ["/bin/bash", "-c", _script(config, archive_name(bp), baked)],
        "ports": [
            {"name": "inference", "containerPort": inference},
            {"name": "management", "containerPort": management},
            {"name": "metrics", "containerPort": metrics},
        ],
        "env": [
            *common.neuron_env(config),
            {"name": "NEURONX_CACHE", "value": "on"},
            *common.token_env(config),
            *cache_env(config),
        ],
        "resources": common.serving_resources(config),
        **common.http_probes("/ping", "inference", startup_seconds=common.readiness_timeout(config)),
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "model-store", "mountPath": MODEL_STORE},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }
    pod_spec: Obj = {
        "serviceAccountName": common.SERVICE_ACCOUNT,
        **common.scheduler_name(config),
        **common.scheduling(common.serving_pool(config), bp.compute.instance_type),
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": files["metadata"]["name"], "items": items}},
            {"name": "model-store", "emptyDir": {}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    hpa = common.autoscaler(config, name(config))
    deployment = common.deployment(
        config,
        name(config),
        "serving",
        pod_spec,
        replicas=None if hpa else bp.scaling.replicas,
        annotations=common.readiness(config),
        pod_annotations=common.prometheus_annotations(config, metrics),
    )
    # Only inference goes through the exposure; management stays inside the cluster.
    admin = service(
        config, f"{name(config)}-admin", "serving", [port("management", management), port("metrics", metrics)], exposed=False
    )
    objects = [files, deployment, service(config, name(config), "serving", [port("inference", inference)]), admin]
    return objects + ([hpa] if hpa else [])
