"""A serving pod checks every file of the S3 model mirror against the checksums in its own spec
(LLMCTL_MODEL_FILES, rendered by the CLI from the Hub's answer), against a local moto server.

The mirror prefix is shared by every workload of a model revision and written by a pod (the mirror
Job), so a tampered or planted file must fail the pod's start, with a ``weights`` ``failed`` phase
line, and leave nothing on disk that a later start would take as a finished copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from serving_support import hub_checksums, mirror_model, ray_download

from llmctl.errors import ServingError
from llmctl.serving.model_files import FILES_ENV
from llmctl.serving.model_mirror import COMPLETE_MARKER, sync_model
from llmctl.serving.phases import parse_phase_line

BUCKET = "llmctl-dev-us-west-2-cache"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
URI = f"s3://{BUCKET}/models/tiny/{COMMIT}"


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


def test_a_ray_vllm_replica_checks_what_ray_serve_llm_downloaded_before_the_engine_loads_it(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from llmctl.serving.ray_vllm import replica

    monkeypatch.setenv(FILES_ENV, json.dumps(hub_checksums(tiny_model)))
    snapshot = ray_download(tiny_model, tmp_path / "hub")
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


def test_a_copy_synced_without_checksums_is_checked_by_a_later_start_that_has_them(
    tiny_model: Path, aws: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmctl.serving.verified_copy import marker_path

    mirror_model(tiny_model, URI)
    s3 = boto3.client("s3")
    config = s3.get_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/config.json")["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/config.json", Body=b"{}")
    monkeypatch.delenv(FILES_ENV, raising=False)
    local = Path(sync_model(URI))  # taken unchecked, as it said
    assert (local / "config.json").read_bytes() == b"{}" and not marker_path(local).exists()
    monkeypatch.setenv(FILES_ENV, json.dumps(hub_checksums(tiny_model)))
    with pytest.raises(ServingError, match=r"config\.json .* does not match the Hub's checksum"):
        sync_model(URI)
    assert "config.json" in str(_failed_line(capsys.readouterr().out)["error"])
    # no longer a finished copy and never marked: the next start downloads it again, and checks it
    assert not (local / COMPLETE_MARKER).exists() and not marker_path(local).exists()
    s3.put_object(Bucket=BUCKET, Key=f"models/tiny/{COMMIT}/config.json", Body=config)
    assert sync_model(URI) == str(local) and (local / "config.json").read_bytes() == config
    assert marker_path(local).is_file() and "not hashed again" not in capsys.readouterr().err
    assert sync_model(URI) == str(local)  # the next start: the marker spares it the hashing
    assert capsys.readouterr().err == (
        f"llmctl: the files of {URI} in {local} are unchanged since they were checked against the "
        "same checksums: not hashed again\n"
    )


def test_a_start_without_checksums_removes_the_mark_of_an_earlier_check(
    pinned: dict[str, str], tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither path that takes files unchecked (the local sync, Ray Serve LLM's folder) leaves a marker
    saying they were checked."""
    import asyncio

    from llmctl.serving.ray_vllm import replica
    from llmctl.serving.verified_copy import marker_path

    local = Path(sync_model(URI))
    snapshot = ray_download(tiny_model, tmp_path / "hub")
    asyncio.run(replica.after_weights(URI, str(snapshot)))
    assert marker_path(local).is_file() and marker_path(snapshot).is_file()
    monkeypatch.delenv(FILES_ENV)
    assert sync_model(URI) == str(local)
    asyncio.run(replica.after_weights(URI, str(snapshot)))
    assert not marker_path(local).exists() and not marker_path(snapshot).exists()
