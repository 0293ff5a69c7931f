"""S3-backed caches: the model mirror Job and the env that points serving pods at the caches.

Layout in the platform's cache bucket::

    s3://<bucket>/models/<model id>/<revision>/...     weights mirrored once by the Job
    s3://<bucket>/models/<model id>/<revision>/.llmctl-complete   marker written last
    s3://<bucket>/neuron-cache/<blueprint>/<key>/...   compiled Neuron artifacts (model.save), one
                                                       prefix per compiled configuration
    s3://<bucket>/neuron-cache/<blueprint>/<key>/.llmctl-compiled   marker written last
    s3://<bucket>/neuron-cache/<blueprint>/<key>.lock   the one replica compiling <key>

The pods reach the bucket through EKS Pod Identity on the `llmctl-serving` service account (the
association is made by the workload program), so no AWS keys are stored anywhere. The serving side
of the mirror (`LLMCTL_MODEL_URI` synced once to a local dir) is `llmctl.serving.model_mirror`; the
compiled artifacts (`LLMCTL_COMPILE_CACHE_URL`, read by the transformers-neuronx engine and the
TorchServe handler, `llmctl.serving.compile_cache`, and by the vLLM replicas on Neuron,
`llmctl.serving.ray_vllm.neuron_cache`, which also keep `<key>.lock` next to each prefix while
one replica compiles).
"""

from __future__ import annotations

from llmctl.infra.workload.builders.common import (
    SERVICE_ACCOUNT,
    Obj,
    config_map,
    metadata,
    readiness,
    serving_image,
    token_env,
)
from llmctl.infra.workload.builders.placement import cpu_pool, scheduling
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.serving.compile_cache import COMPILE_CACHE_URL_ENV, COMPILE_PREFIX
from llmctl.serving.model_mirror import COMPLETE_MARKER, MODEL_URI_ENV

MIRROR_JOB = "model-mirror"
MIRROR_SCRIPT = "model-mirror-script"

_SCRIPT = '''\
"""Mirror a Hugging Face snapshot to S3 once; later runs see the marker and exit."""
import os
import subprocess
import sys

subprocess.run([sys.executable, "-m", "pip", "install", "-q", "huggingface_hub", "boto3"], check=False)
import boto3  # noqa: E402
from huggingface_hub import snapshot_download  # noqa: E402

bucket, prefix = os.environ["MIRROR_BUCKET"], os.environ["MIRROR_PREFIX"].rstrip("/")
marker = prefix + "/" + os.environ["MIRROR_MARKER"]
s3 = boto3.client("s3")
if s3.list_objects_v2(Bucket=bucket, Prefix=marker).get("KeyCount"):
    print("already mirrored: s3://%s/%s" % (bucket, prefix))
    sys.exit(0)
local = snapshot_download(
    os.environ["MODEL_ID"], revision=os.environ.get("MODEL_REVISION", "main"),
    token=os.environ.get("HF_TOKEN") or None, local_dir=os.environ.get("MIRROR_DIR", "/work/model"),
    ignore_patterns=["*.pth", "original/*"],
)
for root, _dirs, files in os.walk(local):
    for name in files:
        path = os.path.join(root, name)
        rel = os.path.relpath(path, local)
        if rel.startswith(".cache"):
            continue
        s3.upload_file(path, bucket, prefix + "/" + rel)
s3.put_object(Bucket=bucket, Key=marker, Body=b"ok")
print("mirrored to s3://%s/%s" % (bucket, prefix))
'''


def model_prefix(config: WorkloadConfig) -> str:
    """Key prefix of the mirrored weights in the cache bucket."""
    model = config.blueprint.model
    return f"models/{model.id}/{model.revision}"


def mirror_enabled(config: WorkloadConfig) -> bool:
    """Whether the model mirror is on and the platform has a bucket for it."""
    return config.blueprint.caches.model_mirror and bool(config.platform.cache_bucket)


def compile_cache_enabled(config: WorkloadConfig) -> bool:
    """Whether the Neuron compiled-artifact cache is on and the platform has a bucket for it."""
    bp = config.blueprint
    return bp.caches.compile_cache and bp.is_neuron and bool(config.platform.cache_bucket)


def cache_env(config: WorkloadConfig) -> list[Obj]:
    """Env for serving pods: where the mirrored weights and the compile cache live."""
    bucket = config.platform.cache_bucket
    env: list[Obj] = []
    if bucket and (mirror_enabled(config) or compile_cache_enabled(config)):
        env.append({"name": "AWS_REGION", "value": config.platform.region})
    if mirror_enabled(config):
        env.append({"name": MODEL_URI_ENV, "value": f"s3://{bucket}/{model_prefix(config)}"})
    if compile_cache_enabled(config):
        # one variable: the transformers-neuronx runtimes sync model.save() output there, vLLM on Neuron
        # on Neuron the NxD Inference artifacts of NEURON_COMPILED_ARTIFACTS
        url = f"s3://{bucket}/{COMPILE_PREFIX}{config.blueprint.name}"
        env.append({"name": COMPILE_CACHE_URL_ENV, "value": url})
    return env


def mirror_objects(config: WorkloadConfig) -> list[Obj]:
    """The script ConfigMap and the Job that mirrors the weights (empty when the mirror is off)."""
    if not mirror_enabled(config):
        return []
    script, items = config_map(config, MIRROR_SCRIPT, {"mirror.py": _SCRIPT}, "cache")
    image, _ = serving_image(config)
    model = config.blueprint.model
    env = [
        {"name": "MIRROR_BUCKET", "value": str(config.platform.cache_bucket)},
        {"name": "MIRROR_PREFIX", "value": model_prefix(config)},
        {"name": "MIRROR_MARKER", "value": COMPLETE_MARKER},
        {"name": "MODEL_ID", "value": model.id},
        {"name": "MODEL_REVISION", "value": model.revision},
        {"name": "AWS_REGION", "value": config.platform.region},
        {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
        *token_env(config),
    ]
    pod_spec: Obj = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "restartPolicy": "OnFailure",
        **scheduling(cpu_pool(config)),
        "containers": [
            {
                "name": "mirror",
                "image": image,
                "command": ["python3", "/opt/llmctl/mirror/mirror.py"],
                "env": env,
                "resources": {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
                "volumeMounts": [
                    {"name": "script", "mountPath": "/opt/llmctl/mirror", "readOnly": True},
                    {"name": "work", "mountPath": "/work"},
                ],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": MIRROR_SCRIPT, "items": items}},
            {"name": "work", "emptyDir": {}},
        ],
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(config, MIRROR_JOB, "cache", readiness(config)),
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": metadata(config, MIRROR_JOB, "cache")["labels"]},
                "spec": pod_spec,
            },
        },
    }
    return [script, job]
