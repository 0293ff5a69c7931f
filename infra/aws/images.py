"""Build the bundled serving images with the local Docker engine and push them to ECR.

Each runtime has a folder under ``serving/`` with a Dockerfile whose base image is a build
argument; the default comes from ``blueprints/data/versions.yaml`` (or a blueprint's
``image.base``). The build context is the llmctl source checkout, so the image carries the same
app code as the CLI. ``--push`` logs in to ECR, pushes to the workload stack's own repository
(:func:`repository_name`: ``llmctl/<stack>/<blueprint>``, created here when missing, so an image can
exist before the first ``up``) under the tag ``<version>-<code digest>`` (``delivery.image_tag``, the
digest of this code's wheel), and returns the image by digest. ``up`` finds that image with
``DescribeImages`` (``infra/workload/prepare/delivery.py``) and runs it. Destroying the workload
stack (``down --workload``/``--blueprint``, ``stacks gc``) deletes its repository
(:func:`delete_workload_repository`); ``down`` of the whole environment also removes any left with
the platform (the sweep's ``ecr-repository`` row, by its ``llmctl:cluster`` tag).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llmctl.serving
from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.runtimes import runtimes
from llmctl.errors import BadInput, CloudError, LlmctlError, PrerequisiteError, ServingError, did_you_mean
from llmctl.infra.aws.sweep import Leftover
from llmctl.infra.names import split_stack
from llmctl.infra.platform.tags import CLUSTER_TAG  # the key every stack resource carries; the sweep reads it

# runtime -> (folder under serving/, key of the default base image in versions.yaml), from the registry
RUNTIME_IMAGES: dict[str, tuple[str, str]] = {
    spec.name: (spec.package, spec.versions_key) for spec in runtimes()
}
REPOSITORY_PREFIX = "llmctl"
_ECR_COMPONENT = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")


def repository_name(stack: str, blueprint: str) -> str:
    """The ECR repository of one workload stack: ``llmctl/<stack>/<blueprint>``.

    One repository per workload stack (environment x blueprint), so two workloads of the same
    runtime in one account never share or delete each other's images.
    `llmctl images build --push --blueprint B --stack S` creates it and pushes to it; `up` runs the
    image only when `DescribeImages` finds it there.
    """
    for label, part in (("stack", stack), ("blueprint", blueprint)):
        if not _ECR_COMPONENT.fullmatch(part):
            raise BadInput(
                f"{label} name {part!r} cannot be part of an ECR repository name",
                "use lowercase letters, digits and single '-', '_' or '.' between them",
            )
    return f"{REPOSITORY_PREFIX}/{stack}/{blueprint}"


@dataclass(frozen=True)
class BuildResult:
    """What a build produced."""

    runtime: str
    image: str
    base: str
    pushed: bool
    digest: str | None

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys."""
        ref = f"{self.image.rsplit(':', 1)[0]}@{self.digest}" if self.digest else None
        return {
            "runtime": self.runtime,
            "image": self.image,
            "base": self.base,
            "pushed": self.pushed,
            "digest": self.digest,
            "serving_image": ref,
        }


def source_root() -> Path:
    """The llmctl source checkout (the build context)."""

    root = Path(llmctl.serving.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        raise PrerequisiteError(
            f"{root} is not an llmctl source checkout, so there is no build context",
            "clone the llmctl repository and run `pip install -e .` from it to build images",
        )
    return root


def dockerfile(runtime: str) -> Path:
    """The Dockerfile of a runtime."""
    if runtime not in RUNTIME_IMAGES:
        raise ServingError(
            f"unknown runtime {runtime!r}",
            did_you_mean(runtime, list(RUNTIME_IMAGES)) or f"runtimes: {', '.join(RUNTIME_IMAGES)}",
        )
    return source_root() / "serving" / RUNTIME_IMAGES[runtime][0] / "Dockerfile"


def default_base(runtime: str) -> str:
    """The pinned base image of a runtime."""
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

    return versions().images[RUNTIME_IMAGES[runtime][1]].image


def check_docker() -> str:
    """The Docker server version, or a PrerequisiteError saying what is missing."""
    if shutil.which("docker") is None:
        raise PrerequisiteError(
            "`docker` is not installed, so images cannot be built here",
            "install Docker (with buildx) or build on a machine that has it",
        )
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        done = subprocess.CompletedProcess([], 1, "", "timed out")
    if done.returncode != 0 or not done.stdout.strip():
        reason = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise PrerequisiteError(
            f"the Docker CLI is installed but no Docker engine is reachable ({reason})",
            "start the Docker daemon (or Docker Desktop), or set DOCKER_HOST to a running engine",
        )
    return done.stdout.strip()


def ecr_registry(region: str) -> tuple[str, str, str]:
    """(registry host, user, password) from ECR's authorization token."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        data = boto3.client("ecr", region_name=region).get_authorization_token()["authorizationData"][0]
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not get an ECR login for {region}: {error}", "check your AWS credentials and region"
        ) from None
    user, password = base64.b64decode(data["authorizationToken"]).decode().split(":", 1)
    return data["proxyEndpoint"].removeprefix("https://"), user, password


def ensure_repository(region: str, name: str, cluster: str) -> bool:
    """Create the stack's ECR repository when it does not exist (True when created).

    Immutable tags (a version is pushed once), scan on push, and the ``llmctl:cluster`` tag
    the sweep deletes it by when the platform goes.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    ecr = boto3.client("ecr", region_name=region)
    try:
        ecr.describe_repositories(repositoryNames=[name])
        return False
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "RepositoryNotFoundException":
            raise CloudError(
                f"ECR refused describe_repositories: {error}", "check your AWS credentials"
            ) from None
    except BotoCoreError as error:
        raise CloudError(f"could not reach ECR in {region}: {error}", "check your network") from None
    try:
        ecr.create_repository(
            repositoryName=name,
            imageTagMutability="IMMUTABLE",
            imageScanningConfiguration={"scanOnPush": True},
            tags=[{"Key": CLUSTER_TAG, "Value": cluster}],
        )
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not create the ECR repository {name!r} in {region}: {error}",
            "check your AWS credentials (ecr:CreateRepository)",
        ) from None
    return True


def delete_workload_repository(region: str, stack: str, blueprint: str) -> tuple[str | None, Any]:
    """Delete a destroyed workload stack's own repository (and its images) when it exists.

    Returns (note, leftover): no note when there was no repository; when ECR refuses, a note with
    the fix and the repository as a sweep ``Leftover`` (so ``down`` does not end clean).
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        name = repository_name(stack, blueprint)
    except LlmctlError:
        return None, None  # not a name `images build --push` could have created
    try:
        boto3.client("ecr", region_name=region).delete_repository(repositoryName=name, force=True)
    except (BotoCoreError, ClientError) as error:
        code = error.response.get("Error", {}).get("Code") if isinstance(error, ClientError) else None
        if code == "RepositoryNotFoundException":
            return None, None
        note = (
            f"could not delete the image repository {name} in {region} ({error}); fix: allow "
            f"ecr:DeleteRepository and run `aws ecr delete-repository --repository-name {name} "
            f"--force --region {region}`"
        )
        return note, Leftover("ecr-repository", name, name, region, "ECR refused the delete")
    return f"deleted image repository {name}", None


def _run(cmd: list[str], *, stdin: str | None = None) -> None:
    done = subprocess.run(cmd, input=stdin, text=True, capture_output=stdin is not None)
    if done.returncode != 0:
        raise ServingError(
            f"`{' '.join(cmd[:3])} ...` failed (exit {done.returncode})",
            (done.stderr or "").strip()[-500:] or None,
        )


def _target(runtime: str | None, blueprint: str | None, stack: str) -> tuple[str, str, str | None]:
    """(runtime, repository, the blueprint's base image) of a build."""
    if blueprint is None:
        if runtime is None:
            raise ServingError("name a --runtime or a --blueprint to build", "e.g. --blueprint tiny-cpu")
        return runtime, f"{REPOSITORY_PREFIX}/{runtime}", None

    bp = load_blueprint(blueprint)
    if runtime is not None and runtime != bp.runtime:
        raise ServingError(
            f"blueprint {bp.name!r} uses runtime {bp.runtime}, not {runtime}",
            "drop --runtime (the blueprint decides it)",
        )
    return bp.runtime, repository_name(stack, bp.name), bp.image.base


def build(
    runtime: str | None = None,
    *,
    blueprint: str | None = None,
    stack: str = "dev",
    push: bool = False,
    region: str | None = None,
    tag: str | None = None,
    base: str | None = None,
    code_tag: Callable[[], str] | None = None,
) -> BuildResult:
    """Build a runtime's image (and push it to ECR); the Docker engine must be running.

    With ``blueprint`` the runtime and default base image come from it, and the image is tagged
    for (and pushed to) that workload stack's repository, :func:`repository_name`. Pushing needs a
    blueprint: repositories are per workload stack. Without ``tag``, ``code_tag()`` gives it
    (:func:`llmctl.infra.workload.prepare.delivery.build_image` passes the running code's tag).
    """
    runtime, repo, blueprint_base = _target(runtime, blueprint, stack)
    path = dockerfile(runtime)
    base_image = base or blueprint_base or default_base(runtime)
    if push and blueprint is None:
        raise ServingError(
            "--push needs --blueprint (and --stack): each workload stack has its own ECR repository",
            f"e.g. --blueprint NAME --stack dev pushes to {REPOSITORY_PREFIX}/dev/NAME",
        )
    check_docker()
    if (
        tag is None
    ):  # `<version>-<code digest>`: the tag `up` looks for, from the caller (it builds the wheel)
        if code_tag is None:
            raise ServingError("no image tag", "pass --tag, or build through llmctl images build")
        tag = code_tag()
    image = f"{repo}:{tag}"
    if push:
        if not region:
            raise ServingError("--push needs a region", "pass --region, e.g. --region us-west-2")
        registry, user, password = ecr_registry(region)

        # the environment's cluster (`ci` for the workload stack `ci.pr-42`): the sweep finds it by that
        ensure_repository(region, repo, f"{REPOSITORY_PREFIX}-{split_stack(stack)[0]}")
        _run(["docker", "login", "--username", user, "--password-stdin", registry], stdin=password)
        image = f"{registry}/{image}"
    with tempfile.TemporaryDirectory() as tmp:
        meta = Path(tmp) / "metadata.json"
        cmd = [
            "docker",
            "buildx",
            "build",
            "--platform",
            "linux/amd64",
            "-f",
            str(path),
            "--build-arg",
            f"BASE_IMAGE={base_image}",
            "-t",
            image,
            "--metadata-file",
            str(meta),
        ]
        cmd += ["--push"] if push else ["--load"]
        _run([*cmd, str(source_root())])
        digest = json.loads(meta.read_text()).get("containerimage.digest") if meta.exists() else None
    return BuildResult(
        runtime=runtime, image=image, base=base_image, pushed=push, digest=digest if push else None
    )


def list_images() -> list[dict[str, str]]:
    """Every runtime with its Dockerfile and pinned base image."""
    root = source_root()
    return [
        {
            "runtime": runtime,
            "dockerfile": str(dockerfile(runtime).relative_to(root)),
            "base": default_base(runtime),
        }
        for runtime in RUNTIME_IMAGES
    ]
