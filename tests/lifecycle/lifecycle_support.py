"""Helpers of the lifecycle tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import functools
import shutil
import zipfile
from pathlib import Path
from typing import Any

from llmctl.infra.aws.session import new_session
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.workload.delivery.wheelhouse import LOCK_FILE, wheelhouse_key
from llmctl.serving.lockfiles import locks


def lifecycle(progress: Progress | None = None, stack: str = "dev", drift: Any = None) -> Lifecycle:
    """`drift`: the node drift reader the commands hand down (infra/plan/drift_reader.py), or none."""
    return Lifecycle(Engine(resolve_backend()), progress or Progress("quiet"), stack=stack, drift=drift)


def ready_pod(namespace: str, name: str = "serve-0") -> dict[str, Any]:
    """A Ready pod as the API server reports it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def short(urn: str) -> str:
    """'Type::name' of a URN (the type without its parents)."""
    qualified, name = urn.split("::")[2:4]
    return f"{qualified.split('$')[-1]}::{name}"


def seed_ami_parameters(
    variants: tuple[str, ...] = ("standard", "neuron", "nvidia"),
    alias: str | None = None,
    region: str = "us-west-2",
) -> None:
    """Put the SSM parameters AWS publishes for the pinned AMI alias into moto's backend (moto does
    not model the EKS AMI parameters and refuses PutParameter under /aws, as AWS does)."""
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    from llmctl.blueprints.versions import versions
    from llmctl.infra.aws.pin_checks import ami_parameter

    alias = alias or versions().ami["al2023_alias"].value
    k8s = versions().eks.kubernetes_version.value
    store = ssm_backends["123456789012"][region]._parameters
    for index, variant in enumerate(variants):
        name = ami_parameter(k8s, alias, variant)
        store[name] = [
            Parameter(
                account_id="123456789012",
                name=name,
                value=f"ami-0{index}{variant[:3]}00000000000",
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=1,
                data_type="aws:ec2:image",
            )
        ]


def eks_cluster(region: str, name: str = "llmctl-dev") -> None:
    """The platform's EKS cluster as `eks:DescribeCluster` then finds it (the stand-in engine does not
    create AWS objects; moto answers for them)."""
    new_session(region).client("eks").create_cluster(
        name=name,
        roleArn="arn:aws:iam::123456789012:role/llmctl-dev-cluster",
        resourcesVpcConfig={"subnetIds": []},
    )


@functools.cache
def code_tag() -> str:
    """The image tag of this checkout's code (`<version>-<code digest>`), as `images build` and `up`
    compute it (builds the wheel once per test session)."""
    from llmctl.infra.workload.prepare.delivery import serving_code_tag

    return serving_code_tag()


def push(region: str, repository: str, tag: str) -> str:
    """An image in moto's ECR (as `llmctl images build --push` leaves it); returns its digest."""
    import json

    from llmctl.infra.aws.images import ensure_repository

    ensure_repository(region, repository, "llmctl-dev")
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 2,
            "digest": "sha256:" + "0" * 64,
        },
        "layers": [],
    }
    image = (
        new_session(region)
        .client("ecr")
        .put_image(repositoryName=repository, imageManifest=json.dumps(manifest), imageTag=tag)["image"]
    )
    return str(image["imageId"]["imageDigest"])


def seed_cache_bucket(bucket: str, region: str) -> None:
    """A platform's cache bucket in which every runtime lock's wheelhouse is already there (a prefix
    with its lock is complete, so `up` reuses it instead of downloading the wheels, which needs the
    package index; tests/serving/test_wheelhouse.py builds a real one)."""
    s3 = new_session(region).client("s3")  # the process's client (made once, not once per test)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
    for spec in locks().locks.values():
        s3.put_object(Bucket=bucket, Key=f"{wheelhouse_key(spec)}/{LOCK_FILE}", Body=spec.path.read_bytes())


def make_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal valid wheel (PEP 427: METADATA, WHEEL, RECORD and one module), pure Python, any
    platform: a package an index directory standing in for a real index serves."""
    import base64
    import hashlib
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: llmctl-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), text)
    return wheel


def changed_code(wheel: Path, folder: Path, monkeypatch: Any) -> Path:
    """A code change, same version: `wheel` with one more module, which every later build of llmctl's
    wheel (`build_wheel`) returns from now on; the changed wheel's path."""
    from llmctl.infra.workload.prepare import delivery

    changed = folder / "changed" / wheel.name
    changed.parent.mkdir()
    shutil.copyfile(wheel, changed)
    with zipfile.ZipFile(changed, "a") as archive:
        archive.writestr("llmctl/serving/extra.py", "x = 1\n")

    def rebuilt(out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copyfile(changed, out_dir / changed.name))

    monkeypatch.setattr(delivery, "build_wheel", rebuilt)
    return changed
