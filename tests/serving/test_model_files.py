"""A serving pod checks every file of the S3 model mirror against the checksums in its own spec
(LLMCTL_MODEL_FILES, rendered by the CLI from the Hub's answer), against a local moto server.

The mirror prefix is shared by every workload of a model revision and written by a pod (the mirror
Job), so a tampered or planted file must fail the pod's start, with a ``weights`` ``failed`` phase
line, and leave nothing on disk that a later start would take as a finished copy.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import boto3
import pytest
from serving_support import mirror_model

from llmctl.errors import ServingError
from llmctl.serving.model_files import FILES_ENV
from llmctl.serving.model_mirror import COMPLETE_MARKER, sync_model
from llmctl.serving.phases import parse_phase_line

BUCKET = "llmctl-dev-us-west-2-cache"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
URI = f"s3://{BUCKET}/models/tiny/{COMMIT}"


def hub_checksums(model: Path) -> dict[str, str]:
    """What the Hub reports for each file: LFS files (the weights) by SHA-256, the others by their git
    blob id (computed here by git itself)."""
    files: dict[str, str] = {}
    for path in sorted(p for p in model.rglob("*") if p.is_file()):
        name = path.relative_to(model).as_posix()
        if name.endswith(".safetensors"):
            files[name] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            blob = subprocess.run(
                ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
            )
            files[name] = "git-blob:" + blob.stdout.strip()
    return files


@pytest.fixture
def pinned(tiny_model: Path, aws: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The tiny model mirrored intact, and the pod's spec carrying the Hub's checksums of its files."""
    mirror_model(tiny_model, URI)
    files = hub_checksums(tiny_model)
    assert any(v.startswith("sha256:") for v in files.values()) and any(
        v.startswith("git-blob:") for v in files.values()
    )
    monkeypatch.setenv(FILES_ENV, json.dumps(files))
    return files


def _weights(model: Path) -> str:
    return next(p.relative_to(model).as_posix() for p in model.rglob("*.safetensors"))


def _failed_line(out: str) -> dict[str, object]:
    records = [r for r in map(parse_phase_line, out.splitlines()) if r is not None]
    assert records, out
    assert records[-1]["phase"] == "weights" and records[-1]["status"] == "failed"
    return records[-1]


def test_an_intact_mirror_passes_the_check(pinned: dict[str, str], aws: dict[str, str]) -> None:
    local = Path(sync_model(URI))
    assert (local / COMPLETE_MARKER).is_file()
    assert {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()} == {
        *pinned,
        COMPLETE_MARKER,
    }


def test_a_tampered_weights_file_is_refused(
    pinned: dict[str, str], tiny_model: Path, aws: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    name = _weights(tiny_model)
    # another workload of the same model (its pod may write the shared mirror) replaces the weights
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/{name}", Body=b"planted")
    with pytest.raises(ServingError, match=f"{name} from {URI} does not match the Hub's checksum") as caught:
        sync_model(URI)
    assert pinned[name] in caught.value.message and "model-mirror" in (caught.value.hint or "")
    assert name in str(_failed_line(capsys.readouterr().out)["error"])
    # nothing a later start would take as a finished copy
    assert not list(Path(aws["LLMCTL_MODEL_CACHE"]).rglob(COMPLETE_MARKER))
    assert not list(Path(aws["LLMCTL_MODEL_CACHE"]).rglob("*.safetensors"))


def test_a_changed_small_file_is_refused_by_its_git_blob_id(
    pinned: dict[str, str], aws: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert pinned["config.json"].startswith("git-blob:")
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/config.json", Body=b"{}")
    with pytest.raises(ServingError, match=r"config\.json .* does not match the Hub's checksum"):
        sync_model(URI)
    _failed_line(capsys.readouterr().out)


def test_a_file_the_revision_does_not_have_is_refused_before_any_download(
    pinned: dict[str, str], aws: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/extra.py", Body=b"import os")
    with pytest.raises(
        ServingError, match=r"holds extra\.py, a file the pinned model revision does not have"
    ):
        sync_model(URI)
    _failed_line(capsys.readouterr().out)
    assert not list(Path(aws["LLMCTL_MODEL_CACHE"]).rglob("*.safetensors"))


def test_without_checksums_in_the_spec_the_copy_is_taken_and_said_unchecked(
    tiny_model: Path, aws: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    mirror_model(tiny_model, URI)
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/config.json", Body=b"{}")
    local = Path(sync_model(URI))
    assert (local / "config.json").read_bytes() == b"{}"
    assert f"the files of {URI} are not checked" in capsys.readouterr().err


def test_a_malformed_checksum_list_is_a_one_line_error(
    aws: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FILES_ENV, '["not", "a", "mapping"]')
    with pytest.raises(ServingError, match=f"{FILES_ENV} is not a JSON object"):
        sync_model(URI)


def _ray_download(model: Path, folder: Path) -> Path:
    """The folder Ray Serve LLM downloads a mirror into (``CloudFileSystem.download_model``:
    ``<HF cache>/models--<id>/snapshots/<hash>``, every object of the prefix, the marker included)."""
    import shutil

    snapshot = folder / "models--tiny" / "snapshots" / ("0" * 40)
    shutil.copytree(model, snapshot)
    (snapshot / COMPLETE_MARKER).write_text("ok")
    return snapshot


def test_a_ray_vllm_replica_checks_what_ray_serve_llm_downloaded_before_the_engine_loads_it(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from llmctl.serving.ray_vllm import replica

    monkeypatch.setenv(FILES_ENV, json.dumps(hub_checksums(tiny_model)))
    snapshot = _ray_download(tiny_model, tmp_path / "hub")
    assert asyncio.run(replica.after_weights(URI, str(snapshot))) is None  # intact: weights done
    (snapshot / _weights(tiny_model)).write_bytes(b"planted")
    with pytest.raises(ServingError, match="does not match the Hub's checksum"):
        asyncio.run(replica.after_weights(URI, str(snapshot)))
    _failed_line(capsys.readouterr().out)
    with pytest.raises(ServingError, match="cannot check the model files downloaded"):
        asyncio.run(replica.after_weights(URI, None))


def test_a_planted_object_is_refused_before_ray_serve_llm_downloads_anything(
    pinned: dict[str, str], aws: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from llmctl.serving.ray_vllm import replica

    replica.before_weights(URI)  # the intact mirror: Ray Serve LLM may go on
    # Ray Serve LLM names its local folder after a `hash` object of the prefix (cloud_utils.py)
    boto3.client("s3").put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/hash", Body=b"../../../tmp/x")
    with pytest.raises(ServingError, match="holds hash, a file the pinned model revision does not have"):
        replica.before_weights(URI)
    _failed_line(capsys.readouterr().out)


def test_folder_placeholders_are_not_files_and_a_real_unknown_file_is_still_refused(
    pinned: dict[str, str], aws: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A bucket made in the S3 console holds a zero-byte key ending in "/" for each folder (the prefix
    itself and each folder below it): no file, so neither a refusal nor a download."""
    from llmctl.serving.ray_vllm import replica

    s3 = boto3.client("s3")
    prefix = f"models/tiny/{COMMIT}"
    for folder in (f"{prefix}/", f"{prefix}/tokenizer/", f"{prefix}/tokenizer/extra/"):
        s3.put_object(Bucket=BUCKET, Key=folder, Body=b"")
    replica.before_weights(URI)
    local = Path(sync_model(URI))
    assert {p.relative_to(local).as_posix() for p in local.rglob("*")} == {*pinned, COMPLETE_MARKER}
    # a key ending in "/" that holds bytes is no folder, and a plain unknown file is refused as before
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/notes/", Body=b"not empty")
    with pytest.raises(ServingError, match=r"holds notes/, a file the pinned model revision does not have"):
        replica.before_weights(URI)
    s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/notes/")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/tokenizer/extra.py", Body=b"import os")
    with pytest.raises(ServingError, match=r"holds tokenizer/extra\.py, a file the pinned model revision"):
        sync_model(URI, str(Path(aws["LLMCTL_MODEL_CACHE"]) / "second-pod"))
    _failed_line(capsys.readouterr().out)
