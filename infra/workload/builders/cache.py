"""S3-backed caches: the model mirror Job and the env that points serving pods at the caches.

Layout in the platform's cache bucket::

    s3://<bucket>/models/<model id>/<revision>/...     weights mirrored once by the Job
    s3://<bucket>/models/<model id>/<revision>/.llmctl-complete   marker written last
    s3://<bucket>/neuron-cache/<namespace>/<key>/...   compiled Neuron artifacts (model.save), one
                                                       prefix per compiled configuration
    s3://<bucket>/neuron-cache/<namespace>/<key>/.llmctl-compiled   marker written last
    s3://<bucket>/neuron-cache/<namespace>/<key>.lock   the one replica compiling <key>

The pods reach the bucket through EKS Pod Identity, each kind on its own service account with its own
role (`bucket_grants.py`; the associations are made by the workload program), so no AWS keys are
stored anywhere. The mirror Job runs as `llmctl-model-mirror`, on the pinned python:3.11-slim-trixie
image as a non-root user: it installs the model-mirror lock (`serving/locks/model-mirror.txt`) into a
venv on its work volume from the wheelhouse `up` put in the bucket, the lock's sha256 checked against
the Job's spec and every wheel against the lock (`wheelhouse_pods.py`), and may write only its own
model's mirror prefix. The serving side
of the mirror (`LLMCTL_MODEL_URI` synced once to a local dir) is `llmctl.serving.model_mirror`; the
compiled artifacts (`LLMCTL_COMPILE_CACHE_URL`, read by the transformers-neuronx engine and the
TorchServe handler, `llmctl.serving.compile_cache`, and by the vLLM replicas on Neuron,
`llmctl.serving.ray_vllm.neuron_cache`, which also keep `<key>.lock` next to each prefix while
one replica compiles).
"""

from __future__ import annotations

import functools

from llmctl.blueprints.pools import CAPACITY_TYPE_LABEL
from llmctl.blueprints.versions import by_digest, versions
from llmctl.infra.workload.builders.common import Obj, config_map, readiness, token_env
from llmctl.infra.workload.builders.placement import DO_NOT_DISRUPT, cpu_pool, scheduling
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import NON_ROOT_USER, venv_in
from llmctl.infra.workload.delivery.wheelhouse_pods import install_from_wheelhouse, with_wheelhouse
from llmctl.infra.workload.meta import metadata
from llmctl.infra.workload.pins import mirror_formats
from llmctl.infra.workload.pins.model_revision import files_value
from llmctl.serving.compile_cache import COMPILE_CACHE_URL_ENV, COMPILE_PREFIX
from llmctl.serving.lockfiles import LockSpec, lock_for
from llmctl.serving.model_files import FILES_ENV
from llmctl.serving.model_mirror import COMPLETE_MARKER, MODEL_URI_ENV

MIRROR_JOB = "model-mirror"
MIRROR_SCRIPT = "model-mirror-script"
#: the Job's work volume: it holds one file at a time (the largest shard of a catalog model is
#: about 10 GiB), requested as ephemeral storage so the pod lands on a node with that much disk
MIRROR_VOLUME_GIB = 50
#: the script's exit code for "the model does not fit the volume": the Job fails without retrying
MIRROR_NO_ROOM = 3
#: the Job's own service account: its Pod Identity role writes only this model's mirror prefix and
#: reads only the model-mirror lock's wheelhouse (`bucket_grants.mirror_grants`)
MIRROR_SERVICE_ACCOUNT = "llmctl-model-mirror"
#: versions.yaml image key of the Job's base, and the lock it installs on it
MIRROR_IMAGE = "python_slim"
MIRROR_LOCK_COMPONENT = "model-mirror"
#: where the init container puts the lock's wheelhouse (an emptyDir shared with the mirror container)
MIRROR_PACKAGES_DIR = "/opt/llmctl/mirror-packages"
#: the Job's own non-root user (uid, gid): the image has none but root, and the Job needs no root (the
#: lock goes into a venv on its work volume, which is also its home: the Hub client's cache), so the
#: namespace can stay `restricted`. Set on the pod, where `security.harden_pod` keeps it.
MIRROR_USER = NON_ROOT_USER
MIRROR_WORK = "/work"
#: an emptyDir at /tmp for a container on a read-only root filesystem (pip unpacks wheels there)
TMP_SIZE = "1Gi"
MIRROR_VENV = f"{MIRROR_WORK}/venv"
MIRROR_PACKAGES_VOLUME = "mirror-packages"
FETCH_MIRROR_CONTAINER = "fetch-mirror-packages"

_SCRIPT = """\
\"\"\"Mirror a Hugging Face snapshot to S3, one file at a time and resumably; a later run that finds
the marker exits. Each object carries its SHA-256 and git blob id, so a restarted Job (after an
interruption, on a new node with an empty volume) skips what is already there intact.\"\"\"
from __future__ import annotations

import fnmatch
import hashlib
import os
import sys
from collections.abc import Iterable

# Formats no llmctl runtime loads (the original Meta checkpoints, GGUF, ONNX, TensorFlow, Flax, ...);
# PyTorch pickles only when the repository has no safetensors (which every runtime prefers).
# @SELECT@
NO_ROOM = 3  # exit code for "does not fit": the Job's podFailurePolicy fails it without retrying
GIB = 1024 ** 3


def fits(sizes, chosen, todo, volume):
    \"\"\"None when the largest file still to copy fits the volume (files are copied one at a time),
    else the refusal with the numbers.\"\"\"
    largest = max((sizes[n] for n in todo), default=0)
    if largest <= volume:
        return None
    total = sum(sizes.values())
    return (
        "the model does not fit the mirror volume: its largest file is %.1f GiB, the volume %.1f GiB "
        "(the repository holds %.1f GiB in %d files; the %d files a runtime loads hold %.1f GiB)"
        % (largest / GIB, volume / GIB, total / GIB, len(sizes), len(chosen), sum(sizes[n] for n in chosen) / GIB)
    )


def digests(path):
    \"\"\"(SHA-256, git blob SHA-1) of a file, in one pass.\"\"\"
    sha256, blob = hashlib.sha256(), hashlib.sha1(b"blob %d\\0" % os.path.getsize(path))
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha256.update(chunk)
            blob.update(chunk)
    return sha256.hexdigest(), blob.hexdigest()


def expected(sibling):
    \"\"\"What the Hub says the file is: size, and its SHA-256 (LFS) or git blob id.\"\"\"
    lfs = getattr(sibling, "lfs", None)
    sha256 = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
    return sibling.size, sha256, sibling.blob_id


def intact(s3, bucket, key, want):
    \"\"\"Whether the object is there with the right size and checksum.\"\"\"
    from botocore.exceptions import ClientError

    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    size, sha256, blob = want
    meta = head.get("Metadata") or {}
    if head.get("ContentLength") != size:
        return False
    return meta.get("sha256") == sha256 if sha256 else meta.get("git-blob") == blob


def main():
    import boto3  # installed before this script from the model-mirror lock, hash-checked
    from huggingface_hub import HfApi, hf_hub_download

    bucket, prefix = os.environ["MIRROR_BUCKET"], os.environ["MIRROR_PREFIX"].rstrip("/")
    marker = prefix + "/" + os.environ["MIRROR_MARKER"]
    model, revision = os.environ["MODEL_ID"], os.environ.get("MODEL_REVISION", "main")
    token = os.environ.get("HF_TOKEN") or None
    work = os.environ.get("MIRROR_DIR", "/work/model")
    volume = int(os.environ.get("MIRROR_VOLUME_BYTES", "0")) or None
    s3 = boto3.client("s3")
    if s3.list_objects_v2(Bucket=bucket, Prefix=marker).get("KeyCount"):
        print("already mirrored: s3://%s/%s" % (bucket, prefix))
        return 0
    info = HfApi().model_info(model, revision=revision, token=token, files_metadata=True)
    siblings = {s.rfilename: s for s in info.siblings}
    sizes = {name: s.size or 0 for name, s in siblings.items()}
    chosen = select(sizes)
    todo = [n for n in chosen if not intact(s3, bucket, prefix + "/" + n, expected(siblings[n]))]
    print("%d of %d files to copy (%d already in S3; left out, not loaded: %s)" % (
        len(todo), len(chosen), len(chosen) - len(todo), ", ".join(sorted(set(sizes) - set(chosen))) or "none"))
    problem = fits(sizes, chosen, todo, volume) if volume else None
    if problem:
        print(problem, file=sys.stderr)
        return NO_ROOM
    for name in todo:
        path = hf_hub_download(model, name, revision=revision, token=token, local_dir=work)
        sha256, blob = digests(path)
        size, want_sha256, want_blob = expected(siblings[name])
        if os.path.getsize(path) != size or (want_sha256 or want_blob) not in (sha256, blob):
            print("downloaded %s does not match the Hub's size or checksum" % name, file=sys.stderr)
            return 1
        s3.upload_file(path, bucket, prefix + "/" + name, ExtraArgs={"Metadata": {"sha256": sha256, "git-blob": blob}})
        os.remove(path)  # one file on the volume at a time
        print("copied %s (%d bytes)" % (name, size))
    s3.put_object(Bucket=bucket, Key=marker, Body=b"ok")
    print("mirrored to s3://%s/%s" % (bucket, prefix))
    return 0


if __name__ == "__main__":
    sys.exit(main())
"""


@functools.cache
def mirror_script() -> str:
    """The Job's script, with the mirror's file selection put in (`mirror_formats.py`): made on first
    use, not when this module is imported (it reads that module's source)."""
    return _SCRIPT.replace("# @SELECT@\n", mirror_formats.script_source())


def mirror_lock() -> LockSpec:
    """The lock the mirror Job installs on its image (`serving/locks/model-mirror.txt`)."""
    return lock_for(MIRROR_LOCK_COMPONENT, versions().images[MIRROR_IMAGE].image, kind="job")


def mirror_service_account(config: WorkloadConfig) -> list[Obj]:
    """The mirror Job's own service account (its Pod Identity association targets it), when the mirror is on."""
    if not mirror_enabled(config):
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(config, MIRROR_SERVICE_ACCOUNT, "cache"),
        }
    ]


def model_prefix(config: WorkloadConfig) -> str:
    """Key prefix of the mirrored weights in the cache bucket."""
    model = config.blueprint.model
    return f"models/{model.id}/{model.revision}"


def compile_cache_prefix(config: WorkloadConfig) -> str:
    """Key prefix of the workload's own compile cache: one per namespace (so per workload), since the
    artifacts are loaded and run by the pods, no workload may write into another's."""
    return f"{COMPILE_PREFIX}{config.ns}"


def mirror_enabled(config: WorkloadConfig) -> bool:
    """Whether the model mirror is on and the platform has a bucket for it."""
    return config.blueprint.caches.model_mirror and bool(config.platform.cache_bucket)


def compile_cache_enabled(config: WorkloadConfig) -> bool:
    """Whether the compile cache (Neuron artifacts, vLLM's GPU caches) is on and the platform has a
    bucket for it."""
    bp = config.blueprint
    return bp.caches.compile_cache and bool(config.platform.cache_bucket)


def cache_env(config: WorkloadConfig) -> list[Obj]:
    """Env for serving pods: where the mirrored weights and the compile cache live."""
    bucket = config.platform.cache_bucket
    env: list[Obj] = []
    if bucket and (mirror_enabled(config) or compile_cache_enabled(config)):
        env.append({"name": "AWS_REGION", "value": config.platform.region})
    if mirror_enabled(config):
        env.append({"name": MODEL_URI_ENV, "value": f"s3://{bucket}/{model_prefix(config)}"})
        if config.model_pin is not None:  # the Hub's checksums, from the CLI: the mirror is a pod's writing
            env.append({"name": FILES_ENV, "value": files_value(config.model_pin)})
    if compile_cache_enabled(config):
        # one variable: the transformers-neuronx runtimes sync model.save() output there, the vLLM replicas
        # NxD Inference artifacts of NEURON_COMPILED_ARTIFACTS (Neuron) or vLLM's caches (NVIDIA GPUs)
        url = f"s3://{bucket}/{compile_cache_prefix(config)}"
        env.append({"name": COMPILE_CACHE_URL_ENV, "value": url})
    return env


def mirror_objects(config: WorkloadConfig) -> list[Obj]:
    """The script ConfigMap and the Job that mirrors the weights (empty when the mirror is off)."""
    if not mirror_enabled(config):
        return []
    script, items = config_map(config, MIRROR_SCRIPT, {"mirror.py": mirror_script()}, "cache")
    lock = mirror_lock()
    # the lock's wheelhouse (fetched by the init container below): its sha256 checked against this spec,
    # every wheel against the lock, no index; then the script, which imports what was installed
    install = install_from_wheelhouse(lock, MIRROR_PACKAGES_DIR)
    start = f"{venv_in(MIRROR_VENV)} && {install} && exec python3 /opt/llmctl/mirror/mirror.py"
    model = config.blueprint.model
    env = [
        {"name": "MIRROR_BUCKET", "value": str(config.platform.cache_bucket)},
        {"name": "MIRROR_PREFIX", "value": model_prefix(config)},
        {"name": "MIRROR_MARKER", "value": COMPLETE_MARKER},
        {"name": "MODEL_ID", "value": model.id},
        {"name": "MODEL_REVISION", "value": model.revision},
        {"name": "AWS_REGION", "value": config.platform.region},
        {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"},
        {"name": "MIRROR_VOLUME_BYTES", "value": str(MIRROR_VOLUME_GIB * 1024**3)},
        {"name": "HOME", "value": MIRROR_WORK},  # no home for the Job's user in the image
        *token_env(config),
    ]
    pool = cpu_pool(config)
    placement = scheduling(pool)
    annotations: dict[str, str] = {}
    if pool.managed_by == "karpenter":
        # a download of up to an hour: on-demand capacity (the pool also offers spot), and Karpenter
        # does not consolidate the node away while the pod runs
        placement["nodeSelector"][CAPACITY_TYPE_LABEL] = "on-demand"
        annotations[DO_NOT_DISRUPT] = "true"
    pod_spec: Obj = {
        # Never: a failed pod is replaced by a new one (podFailurePolicy needs it); the copy resumes
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": MIRROR_USER[0], "runAsGroup": MIRROR_USER[1]},
        **placement,
        "containers": [
            {
                "name": "mirror",
                "image": by_digest(versions().images[MIRROR_IMAGE].image),
                "command": ["/bin/sh", "-c", start],
                "env": env,
                "resources": {
                    "requests": {"cpu": "1", "memory": "4Gi", "ephemeral-storage": f"{MIRROR_VOLUME_GIB}Gi"},
                    "limits": {"memory": "4Gi"},
                },
                # it writes only its work volume (the venv, its home, the download) and /tmp (pip's
                # unpacking): the image stays read-only
                "securityContext": {"readOnlyRootFilesystem": True},
                "volumeMounts": [
                    {"name": "script", "mountPath": "/opt/llmctl/mirror", "readOnly": True},
                    {"name": "work", "mountPath": MIRROR_WORK},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": MIRROR_SCRIPT, "items": items}},
            {"name": "work", "emptyDir": {"sizeLimit": f"{MIRROR_VOLUME_GIB}Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": TMP_SIZE}},
        ],
    }
    pod_spec = with_wheelhouse(
        config,
        lock,
        pod_spec,
        fetch_name=FETCH_MIRROR_CONTAINER,
        volume=MIRROR_PACKAGES_VOLUME,
        folder=MIRROR_PACKAGES_DIR,
        service_account=MIRROR_SERVICE_ACCOUNT,
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(config, MIRROR_JOB, "cache", readiness(config)),
        "spec": {
            "backoffLimit": 3,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": "mirror",
                            "operator": "In",
                            "values": [MIRROR_NO_ROOM],
                        },
                    }
                ]
            },
            "template": {
                "metadata": {
                    "labels": metadata(config, MIRROR_JOB, "cache")["labels"],
                    **({"annotations": annotations} if annotations else {}),
                },
                "spec": pod_spec,
            },
        },
    }
    return [script, job]
