"""`up`'s serving-code delivery against moto: the ECR DescribeImages decision, the content-addressed
wheel upload, and a first `up` on an empty account through the stand-in engine."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest
from lifecycle_support import changed_code, code_tag, lifecycle, push
from standin_support import STANDIN_BUCKET

from llmctl import __version__
from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import DELIVERY_ENV, FETCH_CONTAINER, image_tag, wheel_file
from llmctl.infra.workload.delivery.ui_packages import needs_ui_access
from llmctl.infra.workload.delivery.wheelhouse import LOCK_FILE, wheelhouse_key
from llmctl.infra.workload.prepare.delivery import (
    build_wheel,
    content_digest,
    decide,
    deliver,
    deliver_ui_packages,
    find_image,
    repack_installed,
    serving_code_tag,
    upload_wheel,
)
from llmctl.serving.lockfiles import locks

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_delivery_aws")

REPO = "llmctl/dev/tiny-cpu"
REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
BUCKET = "llmctl-dev-cache-1"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wheel of this checkout, built once for the module (about a second)."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def config(region: str) -> WorkloadConfig:
    bp = load_blueprint("tiny-cpu")
    facts = PlatformFacts.for_blueprint(bp, region=region).model_copy(
        update={"ecr_registry": REGISTRY, "cache_bucket": BUCKET}
    )
    return WorkloadConfig(blueprint=bp, platform=facts)


def bucket(region: str, *, wheelhouse: bool = False) -> Any:
    """The cache bucket; with `wheelhouse`, holding tiny-cpu's complete wheelhouse (its lock, which
    goes last), so a wheel delivery reuses it (tests/serving/test_wheelhouse.py builds a real one)."""
    s3 = boto3.client("s3", region_name=region)
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": region})
    if wheelhouse:
        spec = locks().locks["ray-cpu"]
        s3.put_object(Bucket=BUCKET, Key=f"{wheelhouse_key(spec)}/{LOCK_FILE}", Body=spec.path.read_bytes())
    return s3


def images_in(obj: Any) -> list[str]:
    """Every container image named anywhere in a resource's inputs."""
    if isinstance(obj, dict):
        found = [str(obj["image"])] if isinstance(obj.get("image"), str) and "name" in obj else []
        return found + [i for value in obj.values() for i in images_in(value)]
    if isinstance(obj, list):
        return [i for value in obj for i in images_in(value)]
    return []


# ---- the DescribeImages decision -----------------------------------------------------------------
def test_describe_images_finds_only_the_stacks_tag(aws: str) -> None:
    assert find_image(aws, REPO, __version__) is None  # no repository yet
    push(aws, REPO, "0.0.1")
    assert find_image(aws, REPO, __version__) is None  # the repository holds another version only
    push(aws, "llmctl/prod/tiny-cpu", __version__)
    assert find_image(aws, REPO, __version__) is None  # another stack's image is not this stack's
    digest = push(aws, REPO, __version__)
    assert find_image(aws, REPO, __version__) == digest


def test_the_image_tag_is_the_version_and_the_code_digest(wheel: Path) -> None:
    tag = code_tag()
    assert tag == f"{__version__}-{content_digest(wheel)[:12]}" == image_tag(content_digest(wheel))
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)  # a valid Docker tag


def test_a_pushed_image_is_used_by_digest_and_nothing_is_uploaded(aws: str) -> None:
    s3 = bucket(aws)
    push(aws, REPO, __version__)  # a version-only tag (older llmctl) is no part of the decision
    assert decide(config(aws), upload=False).mode == "wheel"
    digest = push(aws, REPO, code_tag())
    chosen = decide(config(aws))
    assert chosen.mode == "image" and chosen.decided
    assert chosen.image == f"{REGISTRY}/{REPO}@{digest}"
    assert f"ECR has llmctl/dev/tiny-cpu:{code_tag()} (this code" in chosen.reason
    assert s3.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_changed_code_without_a_version_bump_does_not_run_the_old_image(
    aws: str, wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    s3 = bucket(aws, wheelhouse=True)
    push(aws, REPO, code_tag())  # `images build --push` of the code as it was
    changed = changed_code(wheel, tmp_path, monkeypatch)  # then the code changes, same version
    new_tag = image_tag(content_digest(changed))
    assert new_tag != code_tag() and new_tag.startswith(f"{__version__}-")
    chosen = decide(config(aws))
    assert chosen.mode == "wheel" and f"ECR has no {REPO}:{new_tag}" in chosen.reason
    key = f"llmctl/wheels/{content_digest(changed)}/{changed.name}"
    assert chosen.wheel_uri == f"s3://{BUCKET}/{key}" and s3.head_object(Bucket=BUCKET, Key=key)
    assert serving_code_tag() == new_tag  # what `images build --push` would tag now
    new = push(aws, REPO, new_tag)  # pushed again: found by the new code's tag
    chosen = decide(config(aws))
    assert chosen.mode == "image" and chosen.image == f"{REGISTRY}/{REPO}@{new}"
    assert f"ECR has {REPO}:{new_tag} (this code" in chosen.reason


@pytest.mark.parametrize("other_tag", [False, True], ids=["no-repository", "other-tag"])
def test_without_the_image_the_wheel_is_uploaded_and_chosen(aws: str, other_tag: bool) -> None:
    s3 = bucket(aws, wheelhouse=True)
    if other_tag:
        push(aws, REPO, "0.0.1")
    notes: list[str] = []
    chosen = decide(config(aws), note=notes.append)
    assert chosen.mode == "wheel" and chosen.decided
    assert chosen.image == "rayproject/ray:2.58.0-py312-cpu"  # the pinned base, never the ECR name
    assert f"ECR has no {REPO}:{code_tag()}" in chosen.reason
    assert "llmctl images build --push -b tiny-cpu --stack dev" in chosen.reason
    assert chosen.wheel_uri is not None and chosen.wheel_uri.startswith(f"s3://{BUCKET}/llmctl/wheels/")
    key = chosen.wheel_uri.removeprefix(f"s3://{BUCKET}/")
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert body and chosen.wheel_sha256 == hashlib.sha256(body).hexdigest()  # what each pod checks
    house = wheelhouse_key(locks().locks["ray-cpu"])
    assert notes[:2] == [
        f"    uploaded {chosen.wheel_uri}",
        f"    reusing s3://{BUCKET}/{house}/ (the ray-cpu lock's wheels: the pods install with no index)",
    ]
    # and what the lock leaves out, its CPU torch (conftest's stand-in for PyTorch's CPU index)
    assert len(notes) == 3 and notes[2].startswith(f"    uploaded {chosen.outside_uri} ")
    assert "(what the ray-cpu lock leaves out: torch-2.13.0+cpu" in notes[2]


def test_forcing_a_delivery(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket(aws, wheelhouse=True)
    monkeypatch.setenv(DELIVERY_ENV, "image")
    with pytest.raises(
        LlmctlError, match="LLMCTL_DELIVERY=image but ECR has no llmctl/dev/tiny-cpu"
    ) as caught:
        decide(config(aws))
    assert (
        caught.value.hint
        == f"push it first: llmctl images build --push -b tiny-cpu --stack dev --region {aws}"
    )
    push(aws, REPO, code_tag())
    assert decide(config(aws)).mode == "image"
    monkeypatch.setenv(DELIVERY_ENV, "wheel")  # skips the ECR check even with the image there
    assert decide(config(aws)).mode == "wheel"
    monkeypatch.setenv(DELIVERY_ENV, "docker")
    with pytest.raises(LlmctlError, match="is not a delivery"):
        decide(config(aws))
    # no registry to look in: one line, and the way out
    no_registry = config(aws).model_copy(
        update={"platform": config(aws).platform.model_copy(update={"ecr_registry": None})}
    )
    for wanted in ("image", "build"):
        monkeypatch.setenv(DELIVERY_ENV, wanted)
        with pytest.raises(
            LlmctlError, match=f"{DELIVERY_ENV}={wanted} but the platform exports no ECR"
        ) as info:
            decide(no_registry)
        assert info.value.hint is not None and f"unset {DELIVERY_ENV}" in info.value.hint
        assert "\n" not in info.value.message


# ---- the wheel upload ----------------------------------------------------------------------------
def test_wheel_upload_is_content_addressed_and_idempotent(aws: str, wheel: Path, tmp_path: Path) -> None:
    s3 = bucket(aws)
    assert wheel.name == wheel_file()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "llmctl/serving/ray_cpu/requirements.txt" in names  # what the pods install beside it
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)
    key, uploaded = upload_wheel(aws, BUCKET, wheel)
    assert uploaded and key == f"llmctl/wheels/{content_digest(wheel)}/{wheel_file()}"
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(wheel.read_bytes()).hexdigest()
    first = s3.head_object(Bucket=BUCKET, Key=key)["LastModified"]

    rebuilt = build_wheel(tmp_path / "again")  # the same sources: the same key, nothing written
    assert content_digest(rebuilt) == content_digest(wheel)
    assert upload_wheel(aws, BUCKET, rebuilt) == (key, False)
    assert s3.head_object(Bucket=BUCKET, Key=key)["LastModified"] == first
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 1

    changed = tmp_path / "changed" / wheel.name  # other contents: another key, the old one stays
    changed.parent.mkdir()
    shutil.copyfile(wheel, changed)
    with zipfile.ZipFile(changed, "a") as archive:
        archive.writestr("llmctl/extra.py", "x = 1\n")
    other, uploaded = upload_wheel(aws, BUCKET, changed)
    assert uploaded and other != key and s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 2


def test_an_object_planted_at_the_wheels_key_is_replaced_and_the_pods_get_the_wheels_sha256(
    aws: str, wheel: Path
) -> None:
    """Keys are digests of public code, so someone could write one before `up` does: `up` keeps an
    existing object only when its bytes are this wheel's, and gives the pods the sha256 to check."""
    s3 = bucket(aws)
    key = f"llmctl/wheels/{content_digest(wheel)}/{wheel.name}"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"planted")
    assert upload_wheel(aws, BUCKET, wheel) == (key, True)
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert body == wheel.read_bytes()
    assert upload_wheel(aws, BUCKET, wheel) == (key, False)  # now the right bytes: kept


def test_an_installed_distribution_is_repacked_into_the_same_wheel(wheel: Path, tmp_path: Path) -> None:
    """Run from `pip install llmctl-eks` (no source checkout): the installed files become the wheel."""
    import subprocess
    import sys
    from importlib.metadata import PathDistribution

    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site)]
    subprocess.run([*pip, str(wheel)], check=True, capture_output=True)
    [info] = site.glob("llmctl_eks-*.dist-info")
    out = tmp_path / "out"
    repack_installed(out, PathDistribution(info))
    [repacked] = out.glob("*.whl")
    assert repacked.name == wheel.name
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(repacked) as b:
        original = {n: a.read(n) for n in a.namelist() if not n.endswith("/RECORD")}
        again = {n: b.read(n) for n in b.namelist() if not n.endswith("/RECORD")}
    assert again == original  # every module, data file and metadata file, byte for byte


def test_an_upload_without_the_bucket_is_one_line_with_the_fix(aws: str, wheel: Path) -> None:
    with pytest.raises(
        LlmctlError, match="could not upload the llmctl wheel to s3://missing-bucket/"
    ) as caught:
        upload_wheel(aws, "missing-bucket", wheel)
    assert caught.value.hint is not None and "llmctl images build --push" in caught.value.hint


# ---- the UI lock's wheelhouse ---------------------------------------------------------------------
GRADIO = locks().locks["gradio"]


def gradio_config(region: str, *, image: str | None = None, mirror: bool = False) -> WorkloadConfig:
    """llama2-inf2 (the Gradio UI) on EKS, its model mirror off unless `mirror`; `image`: the serving
    code as a named image."""
    bp = load_blueprint("llama2-inf2")
    bp = bp.model_copy(update={"caches": bp.caches.model_copy(update={"model_mirror": mirror})})
    facts = PlatformFacts.for_blueprint(bp, region=region).model_copy(
        update={"ecr_registry": REGISTRY, "cache_bucket": BUCKET}
    )
    return WorkloadConfig(blueprint=bp, platform=facts, image=image)


def test_the_ui_lock_wheelhouse_is_in_the_bucket_whatever_the_serving_delivery(aws: str) -> None:
    """With the serving code in an image, the Gradio pod still installs from the cache bucket: `up`
    makes sure its lock's wheelhouse is there (complete: its lock is there, so nothing is downloaded;
    the proxies of this test point at a closed port, so a download would fail)."""
    s3 = bucket(aws)
    prefix = wheelhouse_key(GRADIO)
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{LOCK_FILE}", Body=GRADIO.path.read_bytes())
    notes: list[str] = []
    image = f"{REGISTRY}/{REPO}@sha256:" + "ab" * 32
    chosen = deliver(gradio_config(aws, image=image), note=notes.append)
    assert chosen.delivery is not None and chosen.delivery.mode == "image"
    assert notes[1:] == [
        f"    reusing s3://{BUCKET}/{prefix}/ (the gradio lock's wheels: the gradio UI pod installs with no index)",
        f"ui packages: wheelhouse s3://{BUCKET}/{prefix}/ (the gradio UI pod installs the gradio lock from it "
        "with no package index)",
    ]
    assert s3.list_objects_v2(Bucket=BUCKET)["KeyCount"] == 1  # nothing else written
    # the rendered pod fetches exactly that prefix
    assert needs_ui_access(chosen) == prefix


def test_a_missing_ui_wheelhouse_is_downloaded_and_uploaded_once(
    aws: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An empty bucket: the wheels are downloaded (here from a local folder standing in for the index:
    the proxies are closed) and uploaded, the lock last; the next `up` reuses the prefix."""
    from llmctl.infra.workload.delivery import wheelhouse

    s3 = bucket(aws)
    downloads: list[str] = []

    def local_index(spec: Any, out_dir: Path, python: str | None = None) -> Path:
        downloads.append(spec.name)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "gradio-6.31.0-py3-none-any.whl").write_bytes(b"wheel")
        shutil.copyfile(spec.path, out_dir / LOCK_FILE)
        return out_dir

    monkeypatch.setattr(wheelhouse, "build_wheelhouse", local_index)
    config = gradio_config(aws, image=f"{REGISTRY}/{REPO}@sha256:" + "cd" * 32)
    notes: list[str] = []
    deliver(config, note=notes.append)
    prefix = wheelhouse_key(GRADIO)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == [f"{prefix}/gradio-6.31.0-py3-none-any.whl", f"{prefix}/{LOCK_FILE}"]
    assert f"    uploaded s3://{BUCKET}/{prefix}/ (the gradio lock's wheels" in notes[1]
    deliver(config, note=notes.append)
    assert downloads == ["gradio"] and f"    reusing s3://{BUCKET}/{prefix}/" in notes[4]
    # `preview` decides without uploading anything
    s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/{LOCK_FILE}")
    deliver(config, note=notes.append, upload=False)
    assert downloads == ["gradio"]


def test_up_puts_the_mirror_jobs_lock_wheelhouse_in_the_bucket(
    aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the model mirror on, `up` uploads the model-mirror lock's wheelhouse (the Job installs
    from it with no index, hash-checked), once; `preview` uploads nothing."""
    from llmctl.infra.workload.delivery import wheelhouse

    s3 = bucket(aws)
    downloads: list[str] = []

    def local_index(spec: Any, out_dir: Path, python: str | None = None) -> Path:
        downloads.append(spec.name)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{spec.name}-1.0-py3-none-any.whl").write_bytes(b"wheel")
        shutil.copyfile(spec.path, out_dir / LOCK_FILE)
        return out_dir

    monkeypatch.setattr(wheelhouse, "build_wheelhouse", local_index)
    config = gradio_config(aws, image=f"{REGISTRY}/{REPO}@sha256:" + "ef" * 32, mirror=True)
    mirror = locks().locks["model-mirror"]
    prefix = wheelhouse_key(mirror)
    notes: list[str] = []
    deliver(config, note=notes.append, upload=False)  # preview
    assert downloads == [] and not s3.list_objects_v2(Bucket=BUCKET).get("KeyCount")
    deliver(config, note=notes.append)
    assert downloads == ["gradio", "model-mirror"]
    assert (
        s3.get_object(Bucket=BUCKET, Key=f"{prefix}/{LOCK_FILE}")["Body"].read() == mirror.path.read_bytes()
    )
    assert f"{prefix}/model-mirror-1.0-py3-none-any.whl" in {
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    }
    assert notes[-1] == (
        f"mirror packages: wheelhouse s3://{BUCKET}/{prefix}/ (the model-mirror Job installs the model-mirror "
        "lock from it with no package index)"
    )
    deliver(config, note=notes.append)
    assert downloads == ["gradio", "model-mirror"]  # complete prefixes are reused


def test_on_an_existing_cluster_up_says_the_ui_pod_needs_the_index(aws: str) -> None:
    config = gradio_config(aws)
    facts = config.platform.model_copy(update={"target": "kubeconfig", "cache_bucket": None})
    notes: list[str] = []
    deliver_ui_packages(config.model_copy(update={"platform": facts}), note=notes.append)
    assert notes == [
        "ui packages: the gradio lock from the package index (hash-checked): this cluster has no llmctl "
        "bucket for a wheelhouse, so the gradio UI pod needs access to https://pypi.org (or set the "
        "blueprint's ui to open-webui or none)"
    ]


# ---- a first `up` on an empty account --------------------------------------------------------------
def test_first_up_on_an_empty_account_delivers_the_code_and_pulls_nothing_missing(
    engine: Any, aws: str
) -> None:
    stream = io.StringIO()
    s3 = boto3.client("s3", region_name=aws)
    # the ray-cpu lock's wheelhouse is complete in the bucket (conftest: its lock is there): `up` reuses it
    house = wheelhouse_key(locks().locks["ray-cpu"])
    lifecycle(Progress("plain", stream)).up("tiny-cpu", region=aws, wait=False)
    delivery = engine.outputs("llmctl-tiny-cpu", "dev")["delivery"]
    assert delivery["mode"] == "wheel" and delivery["decided"] is True
    key = delivery["wheel_uri"].removeprefix(f"s3://{STANDIN_BUCKET}/")
    assert s3.head_object(Bucket=STANDIN_BUCKET, Key=key)["ContentLength"] > 0
    resources = engine.resources("llmctl-tiny-cpu", "dev")
    images = [i for res in resources.values() for i in images_in(res["inputs"])]
    assert images and not [i for i in images if ".dkr.ecr." in i]  # no repository, no image: none pulled
    fetches = [
        c
        for res in resources.values()
        for spec in [res["inputs"].get("spec", {})]
        for c in json.loads(json.dumps(spec))
        .get("rayClusterConfig", {})
        .get("headGroupSpec", {})
        .get("template", {})
        .get("spec", {})
        .get("initContainers", [])
    ]
    [script] = [c["command"][2] for c in fetches if c["name"] == FETCH_CONTAINER]
    assert f"aws s3 cp --only-show-errors {delivery['wheel_uri']} " in script
    assert f"--recursive s3://{STANDIN_BUCKET}/{house}/ " in script
    assert any(u.endswith("::cache-access-association") for u in resources)  # the pods' way to the bucket
    printed = stream.getvalue()
    assert f"serving code: wheel {delivery['wheel_uri']} (ECR has no {REPO}:{code_tag()}" in printed
    assert f"reusing s3://{STANDIN_BUCKET}/{house}/ (the ray-cpu lock's wheels" in printed

    # `preview` reaches the same decision without uploading: the workload is unchanged
    s3.delete_object(Bucket=STANDIN_BUCKET, Key=key)
    report = lifecycle().preview("tiny-cpu", region=aws)
    assert set(report.stacks["llmctl-tiny-cpu"].changes) == {"same"}
    # the locks, and what ray-cpu's leaves out (its CPU torch and the requirements pinning it)
    assert s3.list_objects_v2(Bucket=STANDIN_BUCKET).get("KeyCount") == len(locks().locks) + 2
    s3.upload_file(str(build_wheel(engine.root / "wheel")), STANDIN_BUCKET, key)

    # `llmctl images build --push` then the next `up`: the image, by digest, and no wheel fetch
    digest = push(aws, REPO, code_tag())
    lifecycle(Progress("plain", stream)).up("tiny-cpu", region=aws, wait=False)
    delivery = engine.outputs("llmctl-tiny-cpu", "dev")["delivery"]
    assert delivery["mode"] == "image" and delivery["image"].endswith(f"/{REPO}@{digest}")
    resources = engine.resources("llmctl-tiny-cpu", "dev")
    serving = {i for res in resources.values() for i in images_in(res["inputs"]) if "ray" in i or "ecr" in i}
    assert serving == {delivery["image"]}
    assert FETCH_CONTAINER not in json.dumps([r["inputs"] for r in resources.values()])


# ---- a bad choice is refused before any cloud call -------------------------------------------------
def test_a_bad_delivery_choice_is_refused_before_the_platform_is_built(
    engine: Any, aws: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from llmctl.cli.app import app

    def up() -> tuple[int, str]:
        result = CliRunner().invoke(
            app, ["up", "-b", "tiny-cpu", "--yes", "--no-wait", "--progress", "plain"]
        )
        return result.exit_code, result.stderr

    monkeypatch.setenv(DELIVERY_ENV, "docker")
    code, err = up()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and errors == [f"error: {DELIVERY_ENV}='docker' is not a delivery"], err
    assert "hint: use one of auto, image, wheel, build (or unset it)" in err

    # `build` asks for the local Docker engine: one that does not answer is refused just as early
    bin_dir = tmp_path / "no-engine"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' >&2\nexit 1\n"
    )
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv(DELIVERY_ENV, "build")
    code, err = up()
    assert code == 3 and "no Docker engine is reachable (Cannot connect to the Docker daemon" in err, err
    assert "hint: start the Docker daemon" in err
    assert engine.ops() == []  # no preview, no stack: nothing was built
