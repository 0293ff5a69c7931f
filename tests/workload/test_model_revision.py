"""The blueprint's model revision pinned to the Hub's commit at the first `up`, with the Hub's checksum
of every file rendered into the serving pods' spec; against a local HTTP server answering as the Hub
(tests/hub_support.py, with the source of its shape). The first test runs huggingface_hub's own
client against the same server, so the recording is held to the library.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hub_support import ANSWER, COMMIT, CONFIG_BLOB, MODEL, WEIGHTS_SHA256, Hub, hub_server
from workload_helpers import blueprint, find

from llmctl.errors import BadInput, PrerequisiteError
from llmctl.infra.workload.builders.cache import MIRROR_JOB
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.pins.model_revision import (
    MAX_FILES_BYTES,
    pin_model,
    pinned_blueprint,
    recorded_model_pin,
)
from llmctl.serving.model_files import FILES_ENV
from llmctl.state import load_pins


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Hub]:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    with hub_server(monkeypatch) as server:
        yield server


def test_our_request_is_the_one_huggingface_hub_makes_and_reads_the_same(hub: Hub) -> None:
    from huggingface_hub import HfApi

    info = HfApi(endpoint=hub.url).model_info(MODEL, revision="main", files_metadata=True, token=False)
    theirs = hub.requests[-1][0]
    notes: list[str] = []
    pin = pin_model(blueprint("llama2-torchserve-inf2"), "dev", "hf_secret", note=notes.append)
    ours, headers = hub.requests[-1]
    assert ours == theirs == f"/api/models/{MODEL}/revision/main?blobs=true"
    assert headers["authorization"] == "Bearer hf_secret"
    assert pin is not None and pin.commit == info.sha == COMMIT
    by_name = {s.rfilename: s for s in info.siblings or []}
    lfs = by_name["model-00001-of-00003.safetensors"].lfs
    assert lfs is not None and pin.files["model-00001-of-00003.safetensors"] == f"sha256:{lfs.sha256}"
    assert pin.files["config.json"] == f"git-blob:{by_name['config.json'].blob_id}"
    assert notes == [f"    pinned {MODEL} revision 'main' to commit {COMMIT}"]


def test_the_first_up_pins_the_commit_and_the_pods_get_it_and_the_checksums(hub: Hub) -> None:
    bp = blueprint("llama2-torchserve-inf2")
    assert bp.model.revision == "main" and bp.caches.model_mirror
    pin = pin_model(bp, "dev", None)
    assert load_pins("dev", bp.name).models[f"{MODEL}@main"] == pin == recorded_model_pin(bp, "dev")
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"cache_bucket": "llmctl-dev-cache"})
    config = WorkloadConfig(blueprint=bp, platform=facts, model_pin=pin)  # the config pins the revision
    manifests = build_manifests(config, hf_token="hf_x")
    job = find(manifests, "Job", MIRROR_JOB)["spec"]["template"]["spec"]["containers"][0]
    job_env = {e["name"]: e.get("value") for e in job["env"]}
    assert job_env["MODEL_REVISION"] == COMMIT and job_env["MIRROR_PREFIX"] == f"models/{MODEL}/{COMMIT}"
    serving = find(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in serving["env"]}
    assert env["LLMCTL_MODEL_URI"] == f"s3://llmctl-dev-cache/models/{MODEL}/{COMMIT}"
    assert json.loads(env[FILES_ENV]) == {  # the files the mirror copies (not .gitattributes)
        "config.json": f"git-blob:{CONFIG_BLOB}",
        "model-00001-of-00003.safetensors": f"sha256:{WEIGHTS_SHA256}",
    }
    assert json.loads(env["LLMCTL_BLUEPRINT"])["model"]["revision"] == COMMIT


def test_a_later_up_keeps_the_recorded_commit_without_asking_the_hub(hub: Hub) -> None:
    bp = blueprint("llama2-torchserve-inf2")
    first = pin_model(bp, "dev", None)
    asked = len(hub.requests)
    hub.answer = (200, {}, {**ANSWER, "sha": "f" * 40})  # main moved on the Hub
    assert pin_model(bp, "dev", None) == first and len(hub.requests) == asked


def test_an_unreachable_hub_keeps_the_branch_with_a_note(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    bp = blueprint("tiny-cpu")
    notes: list[str] = []
    assert pin_model(bp, "dev", None, note=notes.append) is None
    assert len(notes) == 1 and notes[0].startswith(f"    not pinned: {bp.model.id} stays at revision 'main'")
    assert "could not reach the Hugging Face Hub" in notes[0] and "ConnectError" in notes[0]
    assert load_pins("dev", bp.name).models == {}
    assert pinned_blueprint(bp, None) is bp


def test_offline_mode_is_not_a_network_call(hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    notes: list[str] = []
    assert pin_model(blueprint("tiny-cpu"), "dev", None, note=notes.append) is None
    assert hub.requests == [] and "HF_HUB_OFFLINE is set" in notes[0]


def test_a_revision_the_hub_does_not_have_is_a_one_line_error(hub: Hub) -> None:
    hub.answer = (404, {"X-Error-Code": "RevisionNotFound"}, {"error": "Invalid rev id: mian"})
    with pytest.raises(BadInput, match="the Hugging Face Hub has no revision 'main' of") as caught:
        pin_model(blueprint("tiny-cpu"), "dev", None)
    assert "model.revision" in (caught.value.hint or "")
    assert load_pins("dev", "tiny-cpu").models == {}


def test_a_commit_revision_is_kept_and_its_files_still_checked(hub: Hub) -> None:
    bp = blueprint("tiny-cpu")
    at_commit = bp.model_copy(update={"model": bp.model.model_copy(update={"revision": COMMIT})})
    pin = pin_model(at_commit, "dev", None)
    assert pin is not None and pin.commit == COMMIT and pin.files
    assert hub.requests[-1][0] == f"/api/models/{bp.model.id}/revision/{COMMIT}?blobs=true"
    assert pinned_blueprint(at_commit, pin) is at_commit


def test_ray_runtimes_get_the_checksums_on_head_and_workers(hub: Hub) -> None:
    bp = blueprint("llama2-70b-vllm-gpu")
    pin = pin_model(bp, "dev", None)
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"cache_bucket": "llmctl-dev-cache"})
    config = WorkloadConfig(blueprint=bp, platform=facts, model_pin=pin)  # the config pins the revision
    service = find(build_manifests(config, hf_token="hf_x"), "RayService")
    cluster = service["spec"]["rayClusterConfig"]
    templates = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    for template in templates:
        env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
        assert FILES_ENV in env and f"/{COMMIT}" in env["LLMCTL_MODEL_URI"]


def test_the_config_derives_the_revision_from_the_pin_and_refuses_one_that_disagrees(hub: Hub) -> None:
    """The blueprint as loaded plus the stack's pin: the config names the pinned commit; a config whose
    blueprint names another revision than its pin (as JSON, past the derivation) is refused."""
    from pydantic import ValidationError

    bp = blueprint("llama2-70b-vllm-gpu")
    pin = pin_model(bp, "dev", None)
    assert pin is not None and bp.model.revision == "main"
    facts = PlatformFacts.for_blueprint(bp)
    config = WorkloadConfig(blueprint=bp, platform=facts, model_pin=pin)
    assert config.blueprint.model.revision == pin.commit == COMMIT
    assert config.blueprint.model_copy(update={"model": bp.model}) == bp  # nothing else changed
    assert WorkloadConfig(blueprint=bp, platform=facts).blueprint is bp  # no pin: as given
    raw = json.loads(config.model_dump_json())
    assert WorkloadConfig.model_validate(raw).blueprint.model.revision == COMMIT
    raw["blueprint"]["model"]["revision"] = "main"
    with pytest.raises(ValidationError, match="names model revision 'main', the stack pinned commit"):
        WorkloadConfig.model_validate(raw)


def _lfs(name: str, index: int) -> dict[str, Any]:
    sha256 = f"{index:064x}"
    return {
        "rfilename": name,
        "blobId": f"{index:040x}",
        "size": 10,
        "lfs": {"sha256": sha256, "size": 10, "pointerSize": 132},
    }


def test_the_checksum_limit_counts_only_the_files_the_mirror_copies(hub: Hub) -> None:
    """A repository with the original checkpoint in 2,000 parts and PyTorch pickles beside its
    safetensors: more than MAX_FILES_BYTES of checksums in all, but the mirror copies (and the pods
    check) only the safetensors and config.json, whose checksums fit."""
    not_copied = [_lfs(f"original/consolidated.{i:04d}.pth", i) for i in range(1, 2001)]
    not_copied += [_lfs(f"pytorch_model-{i:05d}-of-00050.bin", 3000 + i) for i in range(1, 51)]
    hub.answer = (200, {}, {**ANSWER, "siblings": [*ANSWER["siblings"], *not_copied]})
    assert len(json.dumps({s["rfilename"]: s["lfs"]["sha256"] for s in not_copied})) > MAX_FILES_BYTES
    bp = blueprint("llama2-torchserve-inf2")
    pin = pin_model(bp, "dev", None)
    assert pin is not None and len(pin.files) == 3 + 2050  # the record keeps the Hub's whole answer
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"cache_bucket": "llmctl-dev-cache"})
    serving = find(
        build_manifests(WorkloadConfig(blueprint=bp, platform=facts, model_pin=pin), hf_token="hf_x"),
        "Deployment",
    )
    env = {e["name"]: e.get("value") for e in serving["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env[FILES_ENV]) == {
        "config.json": f"git-blob:{CONFIG_BLOB}",
        "model-00001-of-00003.safetensors": f"sha256:{WEIGHTS_SHA256}",
    }


def test_a_model_whose_copied_files_have_too_many_checksums_is_refused_with_their_count(hub: Hub) -> None:
    shards = [_lfs(f"model-{i:05d}-of-01500.safetensors", i) for i in range(1, 1501)]
    hub.answer = (200, {}, {**ANSWER, "siblings": [ANSWER["siblings"][0], *shards]})
    bp = blueprint("llama2-torchserve-inf2")
    with pytest.raises(PrerequisiteError) as caught:
        pin_model(bp, "dev", None)
    assert caught.value.message == (
        f"{MODEL} has too many files the mirror copies (1500) for their checksums to go into the pods' spec"
    )
    assert load_pins("dev", bp.name).models == {}
