"""How the serving code reaches the pods, and the pod pieces each way needs (pure, no cloud calls).

Three deliveries (:class:`~llmctl.infra.workload.config.Delivery`):

- **image**: the app is baked into the image the pods run: the `--image` override, the blueprint's
  `image.serving_image`, or the stack's ECR image when `up` found it with `DescribeImages`
  (pushed by `llmctl images build --push`).
- **wheel** (EKS, no image found): `up` builds a wheel of this llmctl and uploads it to the
  platform's cache bucket under a content-addressed key (`deploy_delivery.py`). Each serving pod
  gets an init container (the pinned AWS CLI image) that copies the wheel into an emptyDir with the
  pod's Pod Identity; the serving container then installs the runtime's pinned requirements (the
  same file its Dockerfile installs) and the local wheel with `--no-deps`, and starts.
- **package** (an existing cluster without an image): the pods install the runtime's requirements
  and `llmctl-eks==<version>` (the distribution's own name) without dependencies.

The app itself is never installed by a name on a package index on EKS, and never by the bare name
`llmctl`, which belongs to another project on PyPI. Without a decision from `up` (render, validate,
preview), :func:`planned_delivery` gives the plan: `up` replaces its placeholder digest.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from llmctl import DISTRIBUTION, __version__
from llmctl.infra.workload.config import Delivery, WorkloadConfig

Obj = dict[str, Any]

#: key prefix of delivered wheels in the cache bucket: llmctl/wheels/<sha256 of the contents>/<file>
WHEEL_PREFIX = "llmctl/wheels"
#: the digest segment of an offline plan's key (the real one is known once `up` built the wheel)
PLANNED_DIGEST = "planned"
#: where the fetched wheel lives in the pod (an emptyDir shared by the init and serving containers)
APP_DIR = "/opt/llmctl/app"
APP_VOLUME = "llmctl-app"
FETCH_CONTAINER = "fetch-llmctl"
#: `up`'s choice: auto (default), image (the ECR image must exist) or wheel (skip the ECR check)
DELIVERY_ENV = "LLMCTL_DELIVERY"


def wheel_file() -> str:
    """The wheel's file name (PEP 427: the normalised distribution name, pure Python)."""
    return f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"


def wheel_key(digest: str, file: str | None = None) -> str:
    """The content-addressed key of a wheel in the cache bucket."""
    return f"{WHEEL_PREFIX}/{digest}/{file or wheel_file()}"


def fixed_image(config: WorkloadConfig) -> Delivery | None:
    """The image delivery the config or blueprint names (no cloud check needed), or None."""
    if config.image:
        return Delivery(mode="image", image=config.image, reason="the --image override", decided=True)
    if config.blueprint.image.serving_image:
        return Delivery(
            mode="image",
            image=config.blueprint.image.serving_image,
            reason="the blueprint's image.serving_image",
            decided=True,
        )
    return None


def package_delivery(config: WorkloadConfig) -> Delivery:
    """An existing cluster without a built image: the app by its own distribution name."""
    requirement = config.app_package or f"{DISTRIBUTION}=={__version__}"
    return Delivery(
        mode="package",
        image=config.blueprint.image.base,
        requirement=requirement,
        reason=f"no image and no llmctl bucket on this cluster: the pods install {requirement}",
    )


def planned_delivery(config: WorkloadConfig) -> Delivery:
    """The delivery without asking AWS: a named image, else a wheel in the cache bucket (EKS)."""
    fixed = fixed_image(config)
    if fixed is not None:
        return fixed
    if config.platform.target != "eks":
        return package_delivery(config)
    bucket = config.platform.cache_bucket or f"llmctl-{config.stack}-{config.platform.region}-cache"
    return Delivery(
        mode="wheel",
        image=config.blueprint.image.base,
        wheel_uri=f"s3://{bucket}/{wheel_key(PLANNED_DIGEST)}",
        reason="planned: `up` uses the stack's ECR image when it exists, else uploads this wheel",
    )


def delivery_of(config: WorkloadConfig) -> Delivery:
    """The delivery in effect: the one `up` decided, else the plan."""
    return config.delivery or planned_delivery(config)


# --- pod pieces ------------------------------------------------------------------------------------


def _requirements_file(config: WorkloadConfig, image: str) -> Path:
    """The runtime's requirements file, chosen as `serving/image.sh requirements` chooses it."""
    import llmctl.serving
    from llmctl.blueprints.runtimes import runtime

    folder = Path(llmctl.serving.__file__).parent / runtime(config.blueprint.runtime).package
    neuron = folder / "requirements-neuron.txt"
    return neuron if "neuron" in image and neuron.is_file() else folder / "requirements.txt"


def runtime_requirements(config: WorkloadConfig, image: str) -> list[str]:
    """pip arguments for what the runtime's Dockerfile adds to `image` (options, then pinned lines)."""
    options: list[str] = []
    pinned: list[str] = []
    for raw in _requirements_file(config, image).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-"):
            options.extend(shlex.split(line))
        elif line:
            pinned.append(line)
    return [*options, *pinned]


def pip_install(args: list[str]) -> str:
    """One `pip install` shell command."""
    return "pip install --no-cache-dir -q " + " ".join(shlex.quote(a) for a in args)


def install_script(config: WorkloadConfig, image: str, extra: list[str] | None = None) -> str:
    """Shell that installs the runtime's requirements (plus `extra`), then the app without deps."""
    delivery = delivery_of(config)
    app = f"{APP_DIR}/{delivery.wheel_file}" if delivery.mode == "wheel" else str(delivery.requirement)
    requirements = [*(extra or []), *runtime_requirements(config, image)]
    return f"{pip_install(requirements)} && {pip_install(['--no-deps', app])}"


def fetch_container(config: WorkloadConfig) -> Obj:
    """The init container that copies the wheel from S3 with the pod's Pod Identity."""
    from llmctl.blueprints.versions import versions

    delivery = delivery_of(config)
    return {
        "name": FETCH_CONTAINER,
        "image": versions().images["aws_cli"].image,
        "command": [
            "aws",
            "s3",
            "cp",
            "--only-show-errors",
            str(delivery.wheel_uri),
            f"{APP_DIR}/{delivery.wheel_file}",
        ],
        "env": [{"name": "AWS_REGION", "value": config.platform.region}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": APP_VOLUME, "mountPath": APP_DIR}],
    }


def with_app(config: WorkloadConfig, pod_spec: Obj) -> Obj:
    """The pod spec with the wheel fetched before its containers start (wheel mode only)."""
    if delivery_of(config).mode != "wheel":
        return pod_spec
    mount = {"name": APP_VOLUME, "mountPath": APP_DIR, "readOnly": True}
    containers = [{**c, "volumeMounts": [*c.get("volumeMounts", []), mount]} for c in pod_spec["containers"]]
    return {
        **pod_spec,
        "initContainers": [*pod_spec.get("initContainers", []), fetch_container(config)],
        "containers": containers,
        "volumes": [*pod_spec.get("volumes", []), {"name": APP_VOLUME, "emptyDir": {}}],
    }


def needs_bucket_access(config: WorkloadConfig) -> bool:
    """Whether the pods read the cache bucket to get the serving code."""
    return delivery_of(config).mode == "wheel"
