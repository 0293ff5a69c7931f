"""LLMCTL_MODEL_URI: the S3 mirror synced once to disk, against a local moto server."""

from __future__ import annotations

import sys
from pathlib import Path

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


def test_the_workloads_mirror_job_script_writes_what_the_serving_pods_read(
    tiny_model: Path, aws: dict[str, str], tmp_path: Path
) -> None:
    """The Job's own script (from the rendered ConfigMap, with the Job's env) against moto S3; the
    Hugging Face Hub is the boundary: offline, the snapshot is already in the Job's work dir."""
    import os
    import shutil
    import subprocess

    from llmctl.infra.workload.builders.cache import cache_env, mirror_objects
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig

    tiny = load_blueprint("tiny-cpu")
    bp = tiny.model_copy(update={"caches": tiny.caches.model_copy(update={"model_mirror": True})})
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"cache_bucket": "llmctl-dev-us-west-2-cache"})
    config = WorkloadConfig(blueprint=bp, platform=facts)
    script_map, job = mirror_objects(config)
    container = job["spec"]["template"]["spec"]["containers"][0]
    script = tmp_path / "mirror.py"
    script.write_text(script_map["data"]["mirror.py"])
    boto3.client("s3").create_bucket(
        Bucket="llmctl-dev-us-west-2-cache", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    work = tmp_path / "work-model"
    shutil.copytree(tiny_model, work)
    env = {
        **os.environ,
        **{e["name"]: e["value"] for e in container["env"] if "value" in e},
        "MIRROR_DIR": str(work),
        "HF_HUB_OFFLINE": "1",
        "PIP_NO_INDEX": "1",
    }
    first = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, check=False
    )
    assert first.returncode == 0, first.stderr
    [uri] = [e["value"] for e in cache_env(config) if e["name"] == "LLMCTL_MODEL_URI"]
    assert f"mirrored to {uri}" in first.stdout
    local = Path(sync_model(uri))  # what a serving pod does with the URI it is given
    expected = {p.relative_to(tiny_model) for p in tiny_model.rglob("*") if p.is_file()}
    assert {p.relative_to(local) for p in local.rglob("*") if p.is_file()} == expected | {
        Path(COMPLETE_MARKER)
    }
    again = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, check=False
    )
    assert again.returncode == 0 and f"already mirrored: {uri}" in again.stdout
