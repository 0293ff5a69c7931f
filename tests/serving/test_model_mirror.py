"""LLMCTL_MODEL_URI: the S3 mirror synced once to disk, against a local moto server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from serving_support import mirror_model

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import ServingError
from llmctl.serving.model_mirror import COMPLETE_MARKER, sync_model
from llmctl.serving.model_source import model_dir

URI = "s3://llmctl-dev-us-west-2-cache/models/tiny/main"


def test_the_mirror_is_synced_once_then_loaded_from_disk(
    tiny_model: Path, aws: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror_model(tiny_model, URI)
    monkeypatch.setenv("LLMCTL_MODEL_URI", URI)
    progress: list[str] = []
    local = Path(model_dir(load_blueprint("tiny-cpu"), on_progress=progress.append))
    assert local.is_relative_to(aws["LLMCTL_MODEL_CACHE"]) and (local / COMPLETE_MARKER).is_file()
    expected = {p.relative_to(tiny_model) for p in tiny_model.rglob("*") if p.is_file()}
    assert {p.relative_to(local) for p in local.rglob("*") if p.is_file()} == expected | {
        Path(COMPLETE_MARKER)
    }
    assert (local / "config.json").read_bytes() == (tiny_model / "config.json").read_bytes()
    assert progress and URI in progress[0]
    boto3.client("s3").delete_object(Bucket="llmctl-dev-us-west-2-cache", Key="models/tiny/main/config.json")
    assert sync_model(URI) == str(local)  # second call: no S3 traffic, the copy on disk is used


def test_the_cpu_engine_loads_from_the_mirror(
    tiny_model: Path, aws: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.serving.ray_cpu.engine import engine_from_blueprint

    mirror_model(tiny_model, URI)
    monkeypatch.setenv("LLMCTL_MODEL_URI", URI)
    engine = engine_from_blueprint(load_blueprint("tiny-cpu"), {"served_model_name": "tiny"})
    assert engine.model_id == "tiny" and engine.healthy()
    assert engine.tokenizer.name_or_path.startswith(aws["LLMCTL_MODEL_CACHE"])


def test_an_explicit_model_path_wins_over_the_mirror(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMCTL_MODEL_URI", "s3://unreachable-bucket/models/x/main")
    assert model_dir(load_blueprint("tiny-cpu"), str(tiny_model)) == str(tiny_model)


def test_an_incomplete_mirror_says_to_wait_for_the_job(tiny_model: Path, aws: dict[str, str]) -> None:
    mirror_model(tiny_model, URI, complete=False)
    with pytest.raises(ServingError, match="incomplete") as caught:
        sync_model(URI)
    assert caught.value.hint is not None and "model-mirror" in caught.value.hint
    assert not list(Path(aws["LLMCTL_MODEL_CACHE"]).rglob("config.json"))  # nothing half-written left


def test_a_missing_bucket_is_a_serving_error(aws: dict[str, str]) -> None:
    with pytest.raises(ServingError, match="could not read the model mirror"):
        sync_model("s3://no-such-bucket/models/x/main")


def test_missing_credentials_are_explained(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_url: str
) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    with pytest.raises(ServingError, match="no AWS credentials") as caught:
        sync_model(URI, str(tmp_path))
    assert caught.value.hint is not None and "Pod Identity" in caught.value.hint


def test_missing_boto3_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(ServingError, match="boto3") as caught:
        sync_model(URI, str(tmp_path))
    assert caught.value.hint is not None and "pip install boto3" in caught.value.hint


def test_a_malformed_uri_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ServingError, match="not an s3://bucket/prefix URI"):
        sync_model("https://bucket/models", str(tmp_path))


def test_ray_vllm_hands_the_mirror_to_ray_serve_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.serving.ray_vllm.app import llm_config

    bp = load_blueprint("llama2-70b-vllm-gpu")
    monkeypatch.delenv("LLMCTL_MODEL_URI", raising=False)
    assert llm_config(bp)["model_loading_config"]["model_source"] == bp.model.id
    monkeypatch.setenv("LLMCTL_MODEL_URI", URI)
    assert llm_config(bp)["model_loading_config"] == {
        "model_id": bp.model.id,
        "model_source": {"bucket_uri": URI},
    }
    assert llm_config(bp, {"model_source": "/weights"})["model_loading_config"]["model_source"] == "/weights"


BUCKET = "llmctl-dev-us-west-2-cache"


def mirror_job(tmp_path: Path) -> tuple[Any, dict[str, Any], Path]:
    """(config, the Job, its script written out) for tiny-cpu with the mirror on."""
    from llmctl.infra.workload.builders.cache import mirror_objects
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig

    tiny = load_blueprint("tiny-cpu")
    bp = tiny.model_copy(update={"caches": tiny.caches.model_copy(update={"model_mirror": True})})
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"cache_bucket": BUCKET})
    config = WorkloadConfig(blueprint=bp, platform=facts)
    script_map, job = mirror_objects(config)
    script = tmp_path / "mirror.py"
    script.write_text(script_map["data"]["mirror.py"])
    return config, job, script


def run_job(job: dict[str, Any], script: Path, work: Path, hub_url: str, **env: str) -> Any:
    """The Job's script as its container runs it (its env), against moto S3 and the fake Hub."""
    import os
    import subprocess

    container = job["spec"]["template"]["spec"]["containers"][0]
    full = {
        **os.environ,
        **{e["name"]: e["value"] for e in container["env"] if "value" in e},
        "MIRROR_DIR": str(work),
        "HF_ENDPOINT": hub_url,
        "HF_HUB_DISABLE_XET": "1",
        "HF_HOME": str(work.parent / "hf-home"),
        "PIP_NO_INDEX": "1",
        **env,
    }
    full.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [sys.executable, str(script)], env=full, capture_output=True, text=True, check=False
    )


def test_the_workloads_mirror_job_script_writes_what_the_serving_pods_read(
    tiny_model: Path, aws: dict[str, str], tmp_path: Path
) -> None:
    """The Job's own script (from the rendered ConfigMap, with the Job's env) against moto S3 and a
    stand-in Hugging Face Hub (tests/serving/fake_hub.py)."""
    from fake_hub import FakeHub, serve

    from llmctl.infra.workload.builders.cache import cache_env

    config, job, script = mirror_job(tmp_path)
    boto3.client("s3").create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    hub = FakeHub(config.blueprint.model.id, tiny_model)
    with serve(hub) as url:
        first = run_job(job, script, tmp_path / "work", url)
        assert first.returncode == 0, first.stderr
        [uri] = [e["value"] for e in cache_env(config) if e["name"] == "LLMCTL_MODEL_URI"]
        assert f"mirrored to {uri}" in first.stdout
        local = Path(sync_model(uri))  # what a serving pod does with the URI it is given
        expected = {p.relative_to(tiny_model) for p in tiny_model.rglob("*") if p.is_file()}
        assert {p.relative_to(local) for p in local.rglob("*") if p.is_file()} == expected | {
            Path(COMPLETE_MARKER)
        }
        assert not [p for p in (tmp_path / "work").rglob("*") if p.is_file() and ".cache" not in p.parts]
        again = run_job(job, script, tmp_path / "work", url)
    assert again.returncode == 0 and f"already mirrored: {uri}" in again.stdout
    assert set(hub.gets) == {str(p) for p in expected} and set(hub.gets.values()) == {1}


def test_an_interrupted_mirror_resumes_copying_only_what_is_missing_or_damaged(
    tiny_model: Path, aws: dict[str, str], tmp_path: Path
) -> None:
    # issue 25, item 3: a new pod (an empty volume) after an interruption does not start from zero
    from fake_hub import FakeHub, serve

    config, job, script = mirror_job(tmp_path)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    hub = FakeHub(config.blueprint.model.id, tiny_model)
    prefix = f"models/{config.blueprint.model.id}/{config.blueprint.model.revision}"
    with serve(hub) as url:
        assert run_job(job, script, tmp_path / "work-1", url).returncode == 0
        # as if the first pod died before its last two files and the marker: one object missing,
        # one left with the wrong content (same size), no marker
        names = sorted(hub.gets)
        missing, damaged = names[0], names[1]
        s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/{missing}")
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{damaged}", Body=b"\0" * len(hub.files[damaged]))
        s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/{COMPLETE_MARKER}")
        hub.gets.clear()
        second = run_job(job, script, tmp_path / "work-2", url)
    assert second.returncode == 0, second.stderr
    assert sorted(hub.gets) == sorted([missing, damaged])
    assert f"2 of {len(names)} files to copy ({len(names) - 2} already in S3" in second.stdout
    body = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/{damaged}")["Body"].read()
    assert body == hub.files[damaged]


def test_formats_no_runtime_loads_are_left_out_and_a_model_that_does_not_fit_is_refused_with_numbers(
    tiny_model: Path, aws: dict[str, str], tmp_path: Path
) -> None:
    from fake_hub import FakeHub, serve

    from llmctl.infra.workload.builders.cache import MIRROR_NO_ROOM
    from llmctl.infra.workload.pins import mirror_formats

    config, job, script = mirror_job(tmp_path)
    boto3.client("s3").create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    gib = 1024**3
    # a repository with every format present: PyTorch pickles beside the safetensors, the original
    # checkpoint, GGUF and ONNX exports (listed with sizes only; none may be downloaded)
    extra = {
        "pytorch_model-00001-of-00002.bin": 10 * gib,
        "pytorch_model-00002-of-00002.bin": 10 * gib,
        "original/consolidated.00.pth": 16 * gib,
        "model-q4.gguf": 4 * gib,
        "onnx/model.onnx": 2 * gib,
    }
    hub = FakeHub(config.blueprint.model.id, tiny_model, extra)
    with serve(hub) as url:
        fits = run_job(job, script, tmp_path / "work-1", url)
        assert fits.returncode == 0, fits.stderr
        left_out = "left out, not loaded: model-q4.gguf, onnx/model.onnx, original/consolidated.00.pth, "
        assert left_out + "pytorch_model-00001-of-00002.bin, pytorch_model-00002-of-00002.bin)" in fits.stdout
        assert not set(hub.gets) & set(extra)
    import runpy

    module = runpy.run_path(str(script), run_name="mirror")
    names = [*extra, "model.safetensors", "config.json", ".gitattributes"]
    assert module["select"](names) == ["config.json", "model.safetensors"] == mirror_formats.select(names)
    assert module["select"]([n for n in names if n != "model.safetensors"]) == [
        "config.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
    ]
    sizes = {**extra, "config.json": 1000}
    refusal = module["fits"](sizes, ["config.json", *list(extra)[:2]], list(extra)[:2], 8 * gib)
    assert refusal == (
        "the model does not fit the mirror volume: its largest file is 10.0 GiB, the volume 8.0 GiB "
        "(the repository holds 42.0 GiB in 6 files; the 3 files a runtime loads hold 20.0 GiB)"
    )
    # the Job itself refuses before downloading anything, with the exit code it does not retry
    s3 = boto3.client("s3")
    for obj in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        s3.delete_object(Bucket=BUCKET, Key=obj["Key"])
    small = FakeHub(config.blueprint.model.id, tiny_model)
    with serve(small) as url:
        refused = run_job(job, script, tmp_path / "work-2", url, MIRROR_VOLUME_BYTES="1000")
    assert refused.returncode == MIRROR_NO_ROOM, refused.stderr
    assert "does not fit the mirror volume" in refused.stderr and not small.gets


@pytest.mark.parametrize(
    "planted", ["../../../../escaped.txt", "sub/../../../../escaped.txt", "/abs-escaped.txt"]
)
def test_a_key_that_would_land_outside_the_download_folder_is_refused(
    tiny_model: Path, aws: dict[str, str], planted: str
) -> None:
    """Keys are chosen by whoever wrote the objects: one with `..` segments (or an absolute part) must
    not write outside the local copy (moto keeps such keys as given, as S3 does)."""
    mirror_model(tiny_model, URI)
    bucket, prefix = URI.removeprefix("s3://").split("/", 1)
    key = f"{prefix}/{planted}"
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=b"planted")
    assert key in [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    cache = Path(aws["LLMCTL_MODEL_CACHE"])
    with pytest.raises(ServingError, match="outside") as caught:
        sync_model(URI)
    assert key in caught.value.message and "aws s3 rm" in (caught.value.hint or "")
    assert not [p for p in cache.parent.rglob("*escaped.txt")]  # nothing written anywhere
    assert not (cache / bucket / prefix).exists()  # and no copy that looks complete


def test_the_mirror_job_refuses_a_lock_other_than_the_one_in_its_spec(tmp_path: Path) -> None:
    """The Job's own start command (the rendered one, its folders moved under tmp_path): a lock changed
    in the bucket after `up` (a comment added, which pip's hash check would let through) stops the Job
    before pip or the script runs."""
    import subprocess

    from llmctl.infra.workload.builders.cache import MIRROR_PACKAGES_DIR, MIRROR_VENV, mirror_lock
    from llmctl.infra.workload.delivery.serving_code import LOCK_FILE

    _, job, _ = mirror_job(tmp_path)
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    packages, venv, ran = tmp_path / "packages", tmp_path / "venv", tmp_path / "script-ran"
    start = (
        command[2]
        .replace(MIRROR_PACKAGES_DIR, str(packages))
        .replace(MIRROR_VENV, str(venv))
        .replace("exec python3 /opt/llmctl/mirror/mirror.py", f"touch {ran}")
    )
    packages.mkdir()
    (packages / LOCK_FILE).write_bytes(mirror_lock().path.read_bytes() + b"\n# planted\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(["/bin/sh", "-c", start], env=env, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert f"{packages}/{LOCK_FILE} has sha256" in done.stderr and "not installing it" in done.stderr
    assert not ran.exists() and not list(venv.glob("lib/python*/site-packages/boto3"))
