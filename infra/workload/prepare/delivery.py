"""`up`'s delivery decision for the serving code, made after the platform exists and before the
workload stack runs (see `delivery/serving_code.py` for the three deliveries and the pod pieces).

1. An image the config or blueprint names: used as is.
2. EKS: ECR `DescribeImages` on the stack's repository (`llmctl/<stack>/<blueprint>`) for the tag
   `llmctl images build --push` writes: `<version>-<first 12 hex of the code digest>`, the code
   digest being :func:`content_digest` of this llmctl's wheel (so changed code without a version
   bump finds no image and goes as a wheel). Found: the pods run that image, by the digest ECR returned.
3. Otherwise a wheel of this llmctl: built from the source checkout (`pip wheel --no-deps
   --no-build-isolation`, no network) or re-packed from the installed distribution (`wheel pack`),
   uploaded to the platform's cache bucket under `llmctl/wheels/<sha256 of its contents>/<file>`
   (skipped when that key holds these very bytes), and fetched by the pods with their Pod Identity
   (read-only: only the CLI writes code), which check the file's sha256 from their spec, with the
   wheelhouse of the runtime's lock (`wheelhouse.py`, uploaded once per lock under
   `llmctl/wheelhouse/<sha256 of the lock>/`): the pods install with no package index. On an existing
cluster (`--target kubeconfig`) the same wheel, kept under the state folder by its digest, goes into
ConfigMaps instead, in parts under the API server's limit (`wheel_parts.py`; refused, before any
change, when it needs more than `MAX_PARTS`), its file's sha256 in the pods' spec.

`LLMCTL_DELIVERY=image` requires the ECR image (a one-line error with the push command when it is
missing); `LLMCTL_DELIVERY=wheel` skips the ECR check; `LLMCTL_DELIVERY=build` builds and pushes the
image with the local Docker engine when ECR lacks it (`llmctl images build --push`, opt-in: a build
downloads the runtime's packages and takes minutes, which a first `up` should not do unasked).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from importlib.metadata import Distribution
from pathlib import Path

from llmctl import DISTRIBUTION
from llmctl.errors import CloudError, LlmctlError, PrerequisiteError
from llmctl.infra.aws.images import BuildResult, build, check_docker, repository_name, source_root
from llmctl.infra.names import split_stack
from llmctl.infra.workload.builders.cache import mirror_enabled, mirror_lock
from llmctl.infra.workload.config import Delivery, WorkloadConfig
from llmctl.infra.workload.delivery.outside_wheels import (
    deliver_outside,
    pinned_requirements,
    recorded_outside,
)
from llmctl.infra.workload.delivery.serving_code import (
    DELIVERY_ENV,
    configmap_delivery,
    fixed_image,
    image_tag,
    wheel_key,
)
from llmctl.infra.workload.delivery.ui_packages import from_bucket, ui_lock
from llmctl.infra.workload.delivery.wheel_cache import cached_build
from llmctl.infra.workload.delivery.wheel_parts import CONFIGMAP_LIMIT, MAX_PARTS, PART_BYTES, part_count
from llmctl.infra.workload.delivery.wheelhouse import upload_wheelhouse, wheelhouse_key
from llmctl.serving.lock_compile import PYPI
from llmctl.serving.lockfiles import LockSpec, lock_for
from llmctl.state import state_dir

#: zip timestamps of a source build (1980-01-01, the zip epoch): the same sources, the same bytes
SOURCE_DATE_EPOCH = "315532800"
CHOICES = ("auto", "image", "wheel", "build")


def choice() -> str:
    """`LLMCTL_DELIVERY`: auto (default), image or wheel."""
    value = os.environ.get(DELIVERY_ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise LlmctlError(
            f"{DELIVERY_ENV}={value!r} is not a delivery", f"use one of {', '.join(CHOICES)} (or unset it)"
        )
    return value


def precheck() -> str:
    """`up`'s early check, before any cloud call: a bad `LLMCTL_DELIVERY` (or `build` without a
    Docker engine) is refused now, not after the platform stack was built. Returns the choice."""
    wanted = choice()
    if wanted == "build":
        check_docker()
    return wanted


def find_image(region: str, repository: str, tag: str) -> str | None:
    """The digest of `repository:tag` in ECR, or None when the repository or the tag does not exist."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        found = boto3.client("ecr", region_name=region).describe_images(
            repositoryName=repository, imageIds=[{"imageTag": tag}]
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in (
            "ImageNotFoundException",
            "RepositoryNotFoundException",
        ):
            return None
        raise CloudError(
            f"ECR DescribeImages on {repository} failed: {error}",
            f"check your AWS credentials, or set {DELIVERY_ENV}=wheel to skip the image check",
        ) from None
    except BotoCoreError as error:
        raise CloudError(
            f"could not reach ECR in {region}: {error}", "check your network and region"
        ) from None
    details = found.get("imageDetails") or []
    return str(details[0]["imageDigest"]) if details else None


def _source_checkout() -> Path | None:

    try:
        return source_root()
    except PrerequisiteError:
        return None


def _run(cmd: list[str], **env: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
    if done.returncode != 0:
        raise PrerequisiteError(
            f"could not build the llmctl wheel (`{' '.join(cmd[2:5])} ...` exit {done.returncode})",
            (done.stderr or done.stdout).strip()[-400:]
            or "build an image instead: llmctl images build --push",
        )


def repack_installed(out_dir: Path, dist: Distribution | None = None) -> None:
    """Re-pack an installed (non-editable) distribution into a wheel with `wheel pack`.

    Only the import package and the .dist-info go in (no scripts: the installer makes them from
    entry_points.txt; no byte code; not the installer's RECORD, INSTALLER, REQUESTED or direct_url).
    """
    from importlib.metadata import distribution

    dist = dist or distribution(DISTRIBUTION)
    out_dir.mkdir(parents=True, exist_ok=True)
    skip = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / f"{DISTRIBUTION.replace('-', '_')}-{dist.version}"
        for file in dist.files or []:
            top = file.parts[0]
            info = top.endswith(".dist-info")
            if not (top == "llmctl" or info) or file.suffix == ".pyc" or (info and file.name in skip):
                continue
            target = root / str(file)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(str(file.locate())), target)
        _run([sys.executable, "-m", "wheel", "pack", "-d", str(out_dir), str(root)])


def build_wheel(out_dir: Path) -> Path:
    """A wheel of the running llmctl in `out_dir` (no network, no dependencies)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    root = _source_checkout()
    if root is not None:
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]

        def build(source: Path, into: Path) -> None:
            _run([*cmd, "-w", str(into), str(source)], SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH)

        pattern = f"{DISTRIBUTION.replace('-', '_')}-*.whl"
        cached_build(root, out_dir, pattern, build, SOURCE_DATE_EPOCH)  # unchanged sources: the kept wheel
    else:
        repack_installed(out_dir)
    wheels = sorted(out_dir.glob(f"{DISTRIBUTION.replace('-', '_')}-*.whl"))
    if not wheels:
        raise PrerequisiteError(
            f"building the llmctl wheel produced no .whl file in {out_dir}",
            "push an image instead (llmctl images build --push), or reinstall llmctl from its checkout",
        )
    return wheels[-1]


#: the digest of each wheel seen, by the wheel file's own sha256: each `up` asks again for the same
#: wheel, and hashing the file is much cheaper than decompressing its members
_DIGESTS: dict[str, str] = {}


def content_digest(wheel: Path) -> str:
    """sha256 over the wheel's member names and contents: the digest of the serving code.

    Not its zip timestamps, and not the .dist-info/RECORD (it only restates the other members'
    hashes, and a re-packed install writes it differently), so a source build and a re-packed
    install of the same code give the same digest: the S3 key, the ConfigMap name and the image tag.
    """
    data = wheel.read_bytes()
    key = hashlib.sha256(data).hexdigest()
    if key not in _DIGESTS:
        _DIGESTS[key] = _members_digest(data)
    return _DIGESTS[key]


def _members_digest(data: bytes) -> str:
    digest = hashlib.sha256()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in sorted(archive.namelist()):
            if name.endswith(".dist-info/RECORD"):
                continue
            digest.update(name.encode() + b"\0" + hashlib.sha256(archive.read(name)).digest())
    return digest.hexdigest()


def serving_code_tag() -> str:
    """The image tag of the running llmctl's code, `<version>-<code digest>` (`images build`'s default)."""
    with tempfile.TemporaryDirectory() as tmp:
        return image_tag(content_digest(build_wheel(Path(tmp))))


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (what a pod checks the wheel it fetched against)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def upload_wheel(region: str, bucket: str, wheel: Path) -> tuple[str, bool]:
    """(key, uploaded): the wheel at its content-addressed key. An existing object is kept only when
    its bytes are this wheel's (the pods check its sha256): anything else there (a re-packed build of
    the same code, or an object planted before only the CLI could write) is replaced."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    key = wheel_key(content_digest(wheel), wheel.name)
    s3 = boto3.client("s3", region_name=region)
    try:
        if s3.list_objects_v2(Bucket=bucket, Prefix=key).get("KeyCount"):
            there = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            if hashlib.sha256(there).hexdigest() == file_sha256(wheel):
                return key, False
        s3.upload_file(str(wheel), bucket, key)
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not upload the llmctl wheel to s3://{bucket}/{key}: {error}",
            "check your AWS credentials (s3:PutObject on the cache bucket), or push an image: "
            "llmctl images build --push",
        ) from None
    return key, True


def kept_wheel() -> tuple[Path, str]:
    """(wheel, content digest): this llmctl's wheel, kept under the state folder by its digest
    (the workload program reads it into the ConfigMap after `decide` returned)."""

    with tempfile.TemporaryDirectory() as tmp:
        built = build_wheel(Path(tmp))
        digest = content_digest(built)
        kept = state_dir() / "wheels" / digest / built.name
        if not kept.is_file():
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built, kept)
    return kept, digest


def configmap_wheel(
    config: WorkloadConfig, note: Callable[[str], None] = lambda _text: None, *, upload: bool = True
) -> Delivery:
    """An existing cluster without an image: the wheel for the ConfigMaps (in parts), refused when it needs
    more than `MAX_PARTS`, with its file's sha256 (each pod checks the joined parts against it); what the
    runtime's lock leaves out pinned by the sha256 the stack recorded (downloaded at the first `up`)."""
    wheel, digest = kept_wheel()
    size = wheel.stat().st_size
    if part_count(size) > MAX_PARTS:
        raise LlmctlError(
            f"the llmctl wheel is {-(-size // 1024)} KiB, over the {MAX_PARTS * PART_BYTES // 1024} KiB llmctl "
            f"delivers in ConfigMaps ({MAX_PARTS} parts of {PART_BYTES // 1024} KiB, each under the "
            f"{CONFIGMAP_LIMIT // 1024} KiB the API server accepts)",
            f"push an image (llmctl images build --push -b {config.blueprint.name} "
            f"{_stack_flags(config.stack)} --region REGION) and set it as the blueprint's image.serving_image",
        )
    delivery = configmap_delivery(config, wheel, digest)
    spec = lock_for(config.blueprint.runtime, delivery.image)
    pinned = pinned_requirements(config, spec, note, fetch=upload)
    return delivery.model_copy(update={"outside_requirements": pinned, "wheel_sha256": file_sha256(wheel)})


def build_image(
    runtime: str | None = None,
    *,
    blueprint: str | None = None,
    stack: str = "dev",
    push: bool = False,
    region: str | None = None,
    tag: str | None = None,
    base: str | None = None,
) -> BuildResult:
    """`llmctl images build`: :func:`llmctl.infra.aws.images.build`, tagged `<version>-<code digest>`
    (the tag `up` looks for) unless `tag` is given."""
    return build(
        runtime,
        blueprint=blueprint,
        stack=stack,
        push=push,
        region=region,
        tag=tag,
        base=base,
        code_tag=serving_code_tag,
    )


def build_and_push(config: WorkloadConfig, note: Callable[[str], None]) -> Delivery:
    """`llmctl images build --push` for the stack's repository, then that image by its digest."""
    bp = config.blueprint
    note(f"    building and pushing the {bp.runtime} image with the local Docker engine")
    result = build_image(
        blueprint=bp.name, stack=config.stack, push=True, region=config.platform.region
    ).to_dict()
    if not result["serving_image"]:
        raise LlmctlError(
            f"the push of {result['image']} reported no digest", "run it again, or unset " + DELIVERY_ENV
        )
    return Delivery(
        mode="image",
        image=str(result["serving_image"]),
        reason=f"built and pushed with the local Docker engine ({DELIVERY_ENV}=build)",
        decided=True,
    )


def decide(
    config: WorkloadConfig, *, note: Callable[[str], None] = lambda _text: None, upload: bool = True
) -> Delivery:
    """The delivery for this `up` (may call ECR and S3; see the module docstring).

    ``upload=False`` (`preview`): the same decision and key, but nothing is built into ECR or S3.
    """
    fixed = fixed_image(config)
    if fixed is not None:
        return fixed
    if config.platform.target != "eks":
        return configmap_wheel(config, note, upload=upload)
    wanted = choice()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp))  # its digest is the image tag's too: built code, found image
        return _decide_on_eks(config, wanted, wheel, note=note, upload=upload)


def _decide_on_eks(
    config: WorkloadConfig, wanted: str, wheel: Path, *, note: Callable[[str], None], upload: bool
) -> Delivery:
    """ECR's image of exactly this code (tag `<version>-<code digest>`), else the wheel in S3."""

    digest = content_digest(wheel)
    tag = image_tag(digest)
    repository = repository_name(config.stack, config.blueprint.name)
    region, registry = config.platform.region, config.platform.ecr_registry
    push = f"llmctl images build --push -b {config.blueprint.name} {_stack_flags(config.stack)} --region {region}"
    if wanted != "wheel" and registry:
        found = find_image(region, repository, tag)
        if found is not None:
            return Delivery(
                mode="image",
                image=f"{registry}/{repository}@{found}",
                reason=f"ECR has {repository}:{tag} (this code, pushed by llmctl images build --push)",
                decided=True,
            )
        if wanted == "image":
            raise LlmctlError(
                f"{DELIVERY_ENV}=image but ECR has no {repository}:{tag} (the image of this code)",
                f"push it first: {push}",
            )
        if wanted == "build" and upload:
            return build_and_push(config, note)
        why = f"ECR has no {repository}:{tag}"
    elif wanted in ("image", "build"):
        raise LlmctlError(
            f"{DELIVERY_ENV}={wanted} but the platform exports no ECR registry",
            f"unset {DELIVERY_ENV} (the serving code then goes to the pods as a wheel from the cache "
            "bucket), or name a built image in the blueprint (image.serving_image)",
        )
    else:
        why = f"{DELIVERY_ENV}=wheel" if wanted == "wheel" else "the platform exports no ECR registry"
    bucket = config.platform.cache_bucket
    if not bucket:
        raise LlmctlError(
            "the platform exports no cache bucket, so the serving code cannot be delivered as a wheel",
            f"push an image instead: {push}",
        )
    outside = None
    if upload:
        key, uploaded = upload_wheel(region, bucket, wheel)
        note(f"    {'uploaded' if uploaded else 'reusing'} s3://{bucket}/{key}")
        upload_lock_wheelhouse(config, bucket, note)
        # what the lock leaves out (a CPU torch): downloaded once, its sha256 in the stack's state
        outside = deliver_outside(
            config, lock_for(config.blueprint.runtime, config.blueprint.image.base), bucket, note
        )
    else:
        key = wheel_key(digest, wheel.name)
        outside = recorded_outside(
            config, lock_for(config.blueprint.runtime, config.blueprint.image.base), bucket
        )
    return Delivery(
        mode="wheel",
        image=config.blueprint.image.base,
        wheel_uri=f"s3://{bucket}/{key}",
        wheel_sha256=file_sha256(wheel),
        outside_uri=outside,
        reason=f"{why}: the pods fetch this llmctl as a wheel from the cache bucket "
        f"(faster repeat deploys: {push})",
        decided=upload,
    )


def upload_lock_wheelhouse(
    config: WorkloadConfig,
    bucket: str,
    note: Callable[[str], None],
    spec: LockSpec | None = None,
    who: str = "the pods install",
) -> str:
    """A lock's wheelhouse in the cache bucket (downloaded and uploaded once per lock): the runtime's
    by default, or `spec` (the UI's)."""

    spec = spec or lock_for(config.blueprint.runtime, config.blueprint.image.base)
    prefix, uploaded = upload_wheelhouse(config.platform.region, bucket, spec)
    what = "uploaded" if uploaded else "reusing"
    note(f"    {what} s3://{bucket}/{prefix}/ (the {spec.name} lock's wheels: {who} with no index)")
    return prefix


def deliver_ui_packages(config: WorkloadConfig, *, note: Callable[[str], None], upload: bool = True) -> None:
    """The UI lock's wheelhouse in the cache bucket (EKS), whatever the serving code's delivery; on an
    existing cluster, says plainly that the UI pod installs its lock from the package index."""
    spec = ui_lock(config)
    if spec is None:
        return
    if not from_bucket(config):
        note(
            f"ui packages: the {spec.name} lock from the package index (hash-checked): this cluster has no "
            f"llmctl bucket for a wheelhouse, so the {spec.component} UI pod needs access to {PYPI} "
            "(or set the blueprint's ui to open-webui or none)"
        )
        return
    bucket = config.platform.cache_bucket
    if not bucket:
        raise LlmctlError(
            f"the platform exports no cache bucket, so the {spec.component} UI's packages cannot be delivered",
            "run `llmctl up` for the platform first, or set the blueprint's ui to open-webui or none",
        )
    if upload:
        upload_lock_wheelhouse(config, bucket, note, spec, who=f"the {spec.component} UI pod installs")
    note(
        f"ui packages: wheelhouse s3://{bucket}/{wheelhouse_key(spec)}/ (the {spec.component} UI pod installs "
        f"the {spec.name} lock from it with no package index)"
    )


def deliver_mirror_packages(
    config: WorkloadConfig, *, note: Callable[[str], None], upload: bool = True
) -> None:
    """The model-mirror lock's wheelhouse in the cache bucket, when the blueprint mirrors its model:
    the mirror Job installs from it with no index, hash-checked (`builders/cache.py`)."""
    if not mirror_enabled(config):
        return
    bucket = str(config.platform.cache_bucket)
    spec = mirror_lock()
    if upload:
        upload_lock_wheelhouse(config, bucket, note, spec, who="the model-mirror Job installs")
    note(
        f"mirror packages: wheelhouse s3://{bucket}/{wheelhouse_key(spec)}/ (the model-mirror Job installs "
        f"the {spec.name} lock from it with no package index)"
    )


def deliver(config: WorkloadConfig, *, note: Callable[[str], None], upload: bool = True) -> WorkloadConfig:
    """The config with the delivery decided; says which one and why (`up`'s and `preview`'s hook).
    The UI's and the mirror Job's packages go to the cache bucket too (:func:`deliver_ui_packages`,
    :func:`deliver_mirror_packages`)."""
    chosen = decide(config, note=note, upload=upload)
    what = chosen.image if chosen.mode == "image" else (chosen.wheel_uri or chosen.wheel_path)
    note(f"serving code: {chosen.mode} {what} ({chosen.reason})")
    deliver_ui_packages(config, note=note, upload=upload)
    deliver_mirror_packages(config, note=note, upload=upload)
    return config.model_copy(update={"delivery": chosen})


def _stack_flags(stack: str) -> str:
    """`--stack ci --workload pr-42` for the workload stack `ci.pr-42`; `--stack dev` otherwise."""

    env, workload = split_stack(stack)
    return f"--stack {env}" + (f" --workload {workload}" if workload else "")
