"""triton-vllm: Triton Inference Server with its vLLM backend (seed "NVIDIA Triton Server with vLLM").

The model repository comes from `llmctl.serving.triton_vllm.repository.render_model_repository`
and is mounted from a ConfigMap at /models. With the model mirror on, an init container copies
the mirrored weights from S3 into the pod and `model.json` points vLLM at that copy. Ports: 8000
HTTP, 8001 gRPC, 8002 metrics. An HPA scales the Deployment between the blueprint's bounds on CPU
utilisation (as the seed did); see docs/workload.md for a custom-metric alternative.
"""

from __future__ import annotations

import json

from llmctl.infra.workload.builders import common
from llmctl.infra.workload.builders.cache import cache_env, mirror_enabled, model_prefix
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, service
from llmctl.infra.workload.config import WorkloadConfig

HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8002
REPOSITORY = "/models"
WEIGHTS = "/weights"

_FETCH = """\
import os, subprocess, sys
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "boto3"], check=False)
import boto3
bucket, prefix = os.environ["MIRROR_BUCKET"], os.environ["MIRROR_PREFIX"].rstrip("/") + "/"
s3 = boto3.client("s3")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    for item in page.get("Contents", []):
        rel = item["Key"][len(prefix):]
        if rel and not rel.startswith(".llmctl"):
            path = os.path.join(os.environ["TARGET"], rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            s3.download_file(bucket, item["Key"], path)
"""


def name(config: WorkloadConfig) -> str:
    """Deployment and Service name."""
    return f"{config.blueprint.name}-triton"


def repository_files(config: WorkloadConfig) -> dict[str, str]:
    """The model repository, with `model.json` pointed at the local weights when mirrored."""
    from llmctl.serving.triton_vllm.repository import render_model_repository

    files = dict(render_model_repository(config.blueprint))
    if mirror_enabled(config):
        for path, text in files.items():
            if path.endswith("/model.json"):
                args = json.loads(text)
                args["model"] = WEIGHTS
                args.pop("revision", None)
                files[path] = json.dumps(args, indent=2, sort_keys=True) + "\n"
    return files


def _fetch_container(config: WorkloadConfig, image: str) -> Obj:
    return {
        "name": "fetch-weights",
        "image": image,
        "command": ["python3", "-c", _FETCH],
        "env": [
            {"name": "MIRROR_BUCKET", "value": str(config.platform.cache_bucket)},
            {"name": "MIRROR_PREFIX", "value": model_prefix(config)},
            {"name": "TARGET", "value": WEIGHTS},
            {"name": "AWS_REGION", "value": config.platform.region},
        ],
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
        "volumeMounts": [{"name": "weights", "mountPath": WEIGHTS}],
    }


def build(config: WorkloadConfig) -> list[Obj]:
    """ConfigMap (model repository), Deployment, Service and HPA of a triton-vllm blueprint."""
    bp = config.blueprint
    repo, items = common.config_map(config, f"{name(config)}-repository", repository_files(config), "serving")
    image, _ = common.serving_image(config)
    mirrored = mirror_enabled(config)
    container: Obj = {
        "name": "triton",
        "image": image,
        "command": ["tritonserver"],
        "args": [
            f"--model-repository={REPOSITORY}",
            f"--http-port={HTTP_PORT}",
            f"--grpc-port={GRPC_PORT}",
            f"--metrics-port={METRICS_PORT}",
            "--disable-auto-complete-config",
        ],
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT},
            {"name": "grpc", "containerPort": GRPC_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "env": [*common.token_env(config), *cache_env(config)],
        "resources": common.serving_resources(config),
        **common.http_probes("/v2/health/ready", "http", startup_seconds=common.readiness_timeout(config)),
        "volumeMounts": [
            {"name": "repository", "mountPath": REPOSITORY, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            *([{"name": "weights", "mountPath": WEIGHTS}] if mirrored else []),
        ],
    }
    pod_spec: Obj = {
        "serviceAccountName": common.SERVICE_ACCOUNT,
        **common.scheduling(common.serving_pool(config), bp.compute.instance_type),
        **({"initContainers": [_fetch_container(config, image)]} if mirrored else {}),
        "containers": [container],
        "volumes": [
            {"name": "repository", "configMap": {"name": repo["metadata"]["name"], "items": items}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            *([{"name": "weights", "emptyDir": {}}] if mirrored else []),
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
        pod_annotations=common.prometheus_annotations(config, METRICS_PORT),
    )
    ports = [port("http", HTTP_PORT), port("grpc", GRPC_PORT), port("metrics", METRICS_PORT)]
    objects = [repo, deployment, service(config, name(config), "serving", ports)]
    return objects + ([hpa] if hpa else [])
