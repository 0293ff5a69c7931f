"""Neuron compiled artifacts shared through S3 (LLMCTL_COMPILE_CACHE_URL), against a local moto server.

transformers-neuronx cannot be installed here, so it is replaced at the import boundary by a
recorder whose ``save`` writes files and whose ``load`` reads them back; everything else (the
engine, the TorchServe handler, the S3 transfers) is the real code.
"""

from __future__ import annotations

import os
import re
import sys
import types
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import ServingError
from llmctl.serving.compile_cache import (
    COMPILED_MARKER,
    compile_cache_url,
    has_compiled,
    publish_compiled,
    save_compiled,
    slug,
)
from llmctl.serving.neuronx.settings import SPLIT_MARKER, NeuronSettings, neuron_settings

BUCKET = "llmctl-dev-us-west-2-cache"
URL = f"s3://{BUCKET}/neuron-cache/llama2-inf2"


class Recorder:
    """What the fake LlamaForSampling was asked to do, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.loaded: list[str] = []


@pytest.fixture
def neuronx(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """A stand-in transformers-neuronx (and transformers) at the import boundary."""
    record = Recorder()

    class FakeModel:
        def __init__(self, kwargs: dict[str, Any]) -> None:
            self.kwargs = kwargs

        @classmethod
        def from_pretrained(cls, path: str, **kwargs: Any) -> FakeModel:
            record.calls.append("from_pretrained")
            return cls(kwargs)

        def load(self, path: str) -> None:
            record.calls.append("load")
            record.loaded.append((Path(path) / "graph.neff").read_text())  # what save() wrote, maybe via S3

        def to_neuron(self) -> None:
            record.calls.append("to_neuron")

        def save(self, path: str) -> None:
            record.calls.append("save")
            (Path(path) / "graph.neff").write_text(f"tp{self.kwargs['tp_degree']}")
            (Path(path) / "sub").mkdir(exist_ok=True)
            (Path(path) / "sub" / "layer0.neff").write_text("x")

    class FakeTokenizer:
        eos_token_id = 2
        chat_template = None

    llama = types.ModuleType("transformers_neuronx.llama.model")
    llama.LlamaForSampling = FakeModel  # type: ignore[attr-defined]
    module = types.ModuleType("transformers_neuronx.module")
    module.save_pretrained_split = lambda model, path: Path(path).mkdir(parents=True)  # type: ignore[attr-defined]
    transformers = types.ModuleType("transformers")
    transformers.AutoTokenizer = types.SimpleNamespace(from_pretrained=lambda source: FakeTokenizer())  # type: ignore[attr-defined]
    transformers.AutoModelForCausalLM = types.SimpleNamespace(from_pretrained=lambda *a, **k: object())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers_neuronx.llama.model", llama)
    monkeypatch.setitem(sys.modules, "transformers_neuronx.module", module)
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # apply_env writes here; keep the real env clean
    return record


@pytest.fixture
def bucket(aws: dict[str, str]) -> Any:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return s3


def _objects(s3: Any, prefix: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(item["Key"] for item in listed.get("Contents", []))


def _settings(root: Path, **changes: Any) -> NeuronSettings:
    """Settings of llama2-inf2 with a fresh local cache root (a new pod) and the split already saved."""
    settings = replace(
        neuron_settings(load_blueprint("llama2-inf2"), cache_root=str(root), compile_cache_url=URL), **changes
    )
    settings.split_dir.mkdir(parents=True, exist_ok=True)
    (settings.split_dir / SPLIT_MARKER).write_text("done\n")
    return settings


def _start(settings: NeuronSettings) -> str:
    from llmctl.serving.neuronx.engine import NeuronEngine

    return NeuronEngine(settings, model_source="weights", served_name="m").compiled_from


def test_first_start_compiles_and_uploads_then_a_new_pod_downloads_instead_of_compiling(
    neuronx: Recorder, bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmctl.serving.phases import parse_phase_line

    def phases() -> list[tuple[str, str]]:
        found = [parse_phase_line(line) for line in capsys.readouterr().out.splitlines()]
        return [(r["phase"], r["status"]) for r in found if r]

    first = _settings(tmp_path / "pod1")
    assert _start(first) == "compiled"
    assert phases() == [("compile", "start"), ("compile", "done")]
    assert neuronx.calls == ["from_pretrained", "to_neuron", "save"]
    prefix = f"neuron-cache/llama2-inf2/{first.compile_key.name}/"
    assert _objects(bucket, prefix) == [
        prefix + n for n in (COMPILED_MARKER, "graph.neff", "sub/layer0.neff")
    ]

    neuronx.calls.clear()
    second = _settings(tmp_path / "pod2")  # an empty local cache: a restarted or rescheduled pod
    assert not (second.artifacts_dir / COMPILED_MARKER).exists()
    assert _start(second) == "s3"
    assert phases() == [("compile", "hit")]  # the timeline's "compile: cache hit"
    assert neuronx.calls == ["from_pretrained", "load", "to_neuron"]  # loaded before to_neuron, no save
    assert neuronx.loaded == ["tp24"]
    assert (second.artifacts_dir / "sub" / "layer0.neff").read_text() == "x"
    assert (second.artifacts_dir / COMPILED_MARKER).is_file()

    neuronx.calls.clear()
    assert _start(second) == "local"  # the same pod again: no S3 traffic needed
    assert neuronx.calls == ["from_pretrained", "load", "to_neuron"]


def test_a_different_tp_degree_does_not_reuse_the_artifacts(
    neuronx: Recorder, bucket: Any, tmp_path: Path
) -> None:
    assert _start(_settings(tmp_path / "pod1")) == "compiled"
    neuronx.calls.clear()
    base = _settings(tmp_path / "pod2")
    other = replace(base, compile_key=replace(base.compile_key, tp_degree=8))
    assert _start(other) == "compiled"
    assert neuronx.calls == ["from_pretrained", "to_neuron", "save"]
    assert "-tp8-" in other.compile_key.name
    assert len({key.split("/")[2] for key in _objects(bucket, "neuron-cache/llama2-inf2/")}) == 2


def test_an_upload_without_its_marker_is_ignored(neuronx: Recorder, bucket: Any, tmp_path: Path) -> None:
    first = _settings(tmp_path / "pod1")
    _start(first)
    prefix = f"neuron-cache/llama2-inf2/{first.compile_key.name}"
    bucket.delete_object(Bucket=BUCKET, Key=f"{prefix}/{COMPILED_MARKER}")  # an upload cut short
    neuronx.calls.clear()
    assert _start(_settings(tmp_path / "pod2")) == "compiled"
    assert neuronx.calls == ["from_pretrained", "to_neuron", "save"]
    assert f"{prefix}/{COMPILED_MARKER}" in _objects(bucket, prefix)  # published again, marker last


def test_publishing_twice_keeps_the_first_copy(bucket: Any, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.artifacts_dir.mkdir(parents=True)
    (settings.artifacts_dir / COMPILED_MARKER).write_text("ok\n")
    (settings.artifacts_dir / "graph.neff").write_text("one")
    assert publish_compiled(settings.artifacts_dir, URL, settings.compile_key)
    (settings.artifacts_dir / "graph.neff").write_text("two")
    assert not publish_compiled(settings.artifacts_dir, URL, settings.compile_key)
    body = bucket.get_object(
        Bucket=BUCKET, Key=f"neuron-cache/llama2-inf2/{settings.compile_key.name}/graph.neff"
    )
    assert body["Body"].read() == b"one"


def test_only_the_lock_holder_uploads(bucket: Any, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.artifacts_dir.mkdir(parents=True)
    (settings.artifacts_dir / "graph.neff").write_text("mine")
    lock = f"neuron-cache/llama2-inf2/{settings.compile_key.name}.lock"
    bucket.put_object(Bucket=BUCKET, Key=lock, Body=b'{"owner": "other-pod", "since": 9e12}')
    assert not publish_compiled(settings.artifacts_dir, URL, settings.compile_key)  # other-pod uploads
    assert _objects(bucket, "neuron-cache/") == [lock]
    bucket.delete_object(Bucket=BUCKET, Key=lock)
    assert publish_compiled(settings.artifacts_dir, URL, settings.compile_key)
    assert lock not in _objects(bucket, "neuron-cache/")  # released after the upload


def test_the_torchserve_handler_shares_the_same_cache(
    neuronx: Recorder, bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.serving.torchserve_neuronx.config import model_config
    from llmctl.serving.torchserve_neuronx.handler import NeuronxLlamaHandler

    monkeypatch.setenv("LLMCTL_COMPILE_CACHE_URL", f"s3://{BUCKET}/neuron-cache/llama2-torchserve-inf2")
    monkeypatch.delenv("LLMCTL_MODEL_URI", raising=False)
    config = model_config(load_blueprint("llama2-torchserve-inf2"))

    def start(pod: str) -> str:
        ctx = types.SimpleNamespace(
            system_properties={"model_dir": str(tmp_path / pod)}, model_yaml_config=config
        )
        handler = NeuronxLlamaHandler()
        handler.initialize(ctx)
        return handler.compiled_from

    assert start("pod1") == "compiled"
    assert neuronx.calls == ["from_pretrained", "to_neuron", "save"]
    neuronx.calls.clear()
    assert start("pod2") == "s3"  # TorchServe's model store is an emptyDir: a new pod starts empty
    assert neuronx.calls == ["from_pretrained", "load", "to_neuron"]
    assert neuronx.loaded == [f"tp{config['handler']['tp_degree']}"]
    assert _objects(bucket, "neuron-cache/llama2-torchserve-inf2/")


def test_a_missing_bucket_is_a_serving_error(neuronx: Recorder, aws: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(ServingError, match="could not read the Neuron compile cache") as caught:
        _start(_settings(tmp_path))
    assert caught.value.hint is not None and BUCKET in caught.value.hint
    assert neuronx.calls == ["from_pretrained"]  # failed before compiling for an hour


def test_missing_credentials_are_explained(
    neuronx: Recorder, tmp_path: Path, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    with pytest.raises(ServingError, match="no AWS credentials to read the Neuron compile cache") as caught:
        _start(_settings(tmp_path))
    assert caught.value.hint is not None and "Pod Identity" in caught.value.hint


def test_the_url_comes_from_one_variable_and_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMCTL_COMPILE_CACHE_URL", raising=False)
    assert compile_cache_url() is None  # no S3: artifacts stay on the pod's disk
    monkeypatch.setenv("LLMCTL_COMPILE_CACHE_URL", URL + "/")
    assert compile_cache_url() == URL
    monkeypatch.setenv("LLMCTL_COMPILE_CACHE_URL", "/var/cache/neuron")
    with pytest.raises(ServingError, match="LLMCTL_COMPILE_CACHE_URL='/var/cache/neuron' is not an s3://"):
        compile_cache_url()


def test_the_key_names_everything_that_changes_the_graphs(tmp_path: Path) -> None:
    key = neuron_settings(load_blueprint("llama2-inf2"), cache_root=str(tmp_path)).compile_key
    name = key.name
    assert name.startswith(f"{slug(key.model_id)}@{slug(key.revision)}-")
    for part in (f"-tp{key.tp_degree}-", f"-{key.amp}-", f"-b{key.batch_size}-", f"-n{key.n_positions}-"):
        assert part in name
    assert "-ctx" + "_".join(map(str, key.context_length_estimate)) in name
    assert re.search(f"-sdk{re.escape(str(key.neuron_sdk))}-[0-9a-f]{{10}}$", name)  # then the exact digest
    assert replace(key, revision="other").name != name and replace(key, neuron_sdk="2.24.0").name != name
    assert replace(key, context_length_estimate=(128,)).name != name


def test_a_key_is_a_value_it_cannot_be_changed_and_can_be_used_as_a_dict_key(tmp_path: Path) -> None:
    key = neuron_settings(load_blueprint("llama2-inf2"), cache_root=str(tmp_path)).compile_key
    with pytest.raises(FrozenInstanceError):
        key.tp_degree = 4  # type: ignore[misc]
    assert {key: "x"}[replace(key)] == "x"


def test_a_save_cut_short_is_redone_into_the_same_folder(tmp_path: Path) -> None:
    artifacts = tmp_path / "key"
    artifacts.mkdir()
    (artifacts / "model.pt").write_bytes(b"half")  # the last start died while saving: no marker
    assert not has_compiled(artifacts)
    save_compiled(artifacts, lambda folder: (Path(folder) / "model.pt").write_bytes(b"whole"))
    assert has_compiled(artifacts) and (artifacts / "model.pt").read_bytes() == b"whole"


def test_a_copy_published_while_we_took_the_lock_is_kept(
    bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other replica finished its upload between our first look and our lock: we upload nothing."""
    from llmctl.serving.compile_lock import S3Lock

    settings = _settings(tmp_path)
    settings.artifacts_dir.mkdir(parents=True)
    (settings.artifacts_dir / "graph.neff").write_text("mine")
    prefix = f"neuron-cache/llama2-inf2/{settings.compile_key.name}"
    real_acquire = S3Lock.acquire

    def acquire_after_the_other_replica_published(lock: S3Lock) -> bool:
        bucket.put_object(Bucket=BUCKET, Key=f"{prefix}/graph.neff", Body=b"theirs")
        bucket.put_object(Bucket=BUCKET, Key=f"{prefix}/{COMPILED_MARKER}", Body=b"ok\n")
        return real_acquire(lock)

    monkeypatch.setattr(S3Lock, "acquire", acquire_after_the_other_replica_published)
    assert not publish_compiled(settings.artifacts_dir, URL, settings.compile_key)
    body = bucket.get_object(Bucket=BUCKET, Key=f"{prefix}/graph.neff")["Body"].read()
    assert body == b"theirs" and f"{prefix}.lock" not in _objects(bucket, "neuron-cache/")
