"""ray-vllm on Neuron: NxD Inference's compiled artifacts synced with S3, against a local moto server.

vLLM, vllm-neuron and NxD Inference cannot run here; the engine start is replaced by what the
plugin does with ``$NEURON_COMPILED_ARTIFACTS`` (load when the directory holds artifacts, else
compile into it). Everything else (key, lock, manifest, restore, publish, phase lines) is real.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import boto3
import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.serving.compile_cache import COMPILED_MARKER
from llmctl.serving.compile_lock import S3Lock
from llmctl.serving.phases import parse_phase_line
from llmctl.serving.ray_vllm import replica
from llmctl.serving.ray_vllm.app import CALLBACK_CLS, ENGINE_CLS, ENGINE_CLS_ENV, llm_config
from llmctl.serving.ray_vllm.neuron_cache import (
    ARTIFACTS_ENV,
    DIR_ENV,
    KEY_ENV,
    NeuronCompileCache,
    cache_from_env,
    vllm_compile_key,
)

BUCKET = "llmctl-dev-us-west-2-cache"
URL = f"s3://{BUCKET}/neuron-cache/llama3-vllm-inf2"
KEY = "nousresearch-meta-llama-3-8b-instruct@main-tp2-bf16-b4-n8192-sdk2.27.1-vllm0.13.0-abc"
PREFIX = f"neuron-cache/llama3-vllm-inf2/{KEY}"


@pytest.fixture
def bucket(aws: dict[str, str]) -> Any:
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return s3


def _objects(s3: Any, prefix: str = "neuron-cache/") -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


def nxdi_start(directory: Path, compiled: list[str], model: bytes = b"neff-graphs") -> None:
    """What the vllm-neuron loader does: load the artifacts when present, else compile into the dir."""
    if (directory / "model.pt").is_file():
        return
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.pt").write_bytes(model)
    (directory / "neuron_config.json").write_text('{"tp_degree": 2}')
    compiled.append(str(directory))


def _cache(root: Path, pod: str, **kwargs: Any) -> NeuronCompileCache:
    return NeuronCompileCache(root / pod / KEY, KEY, URL, owner=pod, **kwargs)


def _phases(out: str) -> list[tuple[str, str]]:
    found = [parse_phase_line(line) for line in out.splitlines()]
    return [(r["phase"], r["status"]) for r in found if r]


def test_cold_key_compiles_and_publishes_with_the_manifest_last(
    bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = _cache(tmp_path, "pod1")
    assert cache.prepare() == "compile"
    lock = json.loads(_objects(bucket)[f"{PREFIX}.lock"])
    assert lock["owner"] == "pod1"  # held while compiling
    compiled: list[str] = []
    nxdi_start(cache.directory, compiled)
    cache.finish(True)
    assert compiled == [str(cache.directory)] and cache.published
    objects = _objects(bucket)
    assert sorted(objects) == [f"{PREFIX}/{n}" for n in (COMPILED_MARKER, "model.pt", "neuron_config.json")]
    manifest = json.loads(objects[f"{PREFIX}/{COMPILED_MARKER}"])
    assert manifest == {"key": KEY, "files": {"model.pt": 11, "neuron_config.json": 16}}
    assert (cache.directory / COMPILED_MARKER).is_file()  # a replica restart in this pod: local hit
    assert _phases(capsys.readouterr().out) == [("compile", "start"), ("compile", "done")]


def test_warm_key_restores_and_the_engine_does_not_compile(
    bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the replica hooks, with the env the app builder sets: a second pod loads from S3."""
    compiled: list[str] = []

    def start_pod(pod: str) -> replica.NeuronCompileCache | None:
        directory = tmp_path / pod / KEY
        monkeypatch.setenv(ARTIFACTS_ENV, str(directory))
        monkeypatch.setenv(KEY_ENV, KEY)
        monkeypatch.setenv("LLMCTL_COMPILE_CACHE_URL", URL)
        monkeypatch.setenv("HOSTNAME", pod)

        async def run() -> replica.NeuronCompileCache | None:
            replica.before_weights("s3://mirror")
            cache = await replica.after_weights("s3://mirror")

            async def engine() -> None:
                nxdi_start(directory, compiled)

            await replica.start_engine(engine, lambda: cache)
            return cache

        return asyncio.run(run())

    first = start_pod("pod1")
    assert first is not None and first.source == "compile" and first.published
    assert len(compiled) == 1
    capsys.readouterr()
    second = start_pod("pod2")
    assert second is not None and second.source == "s3" and not second.published
    assert len(compiled) == 1  # the second engine loaded what the first compiled
    assert (tmp_path / "pod2" / KEY / "model.pt").read_bytes() == b"neff-graphs"
    assert _phases(capsys.readouterr().out) == [
        ("weights", "start"),
        ("weights", "done"),
        ("compile", "hit"),
        ("engine", "done"),
    ]
    assert f"{PREFIX}.lock" not in _objects(bucket)


@pytest.mark.parametrize("damage", ["no-manifest", "missing-file", "wrong-size", "unreadable"])
def test_a_partial_or_corrupt_copy_is_ignored_with_a_warning_and_replaced(
    bucket: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    first = _cache(tmp_path, "pod1")
    first.prepare()
    nxdi_start(first.directory, [])
    first.finish(True)
    marker = f"{PREFIX}/{COMPILED_MARKER}"
    if damage == "no-manifest":
        bucket.delete_object(Bucket=BUCKET, Key=marker)  # an upload cut short
    elif damage == "missing-file":
        bucket.delete_object(Bucket=BUCKET, Key=f"{PREFIX}/model.pt")
    elif damage == "wrong-size":
        bucket.put_object(Bucket=BUCKET, Key=f"{PREFIX}/model.pt", Body=b"trunc")
    else:
        bucket.put_object(Bucket=BUCKET, Key=marker, Body=b"ok\n")
    second = _cache(tmp_path, "pod2")
    with caplog.at_level(logging.WARNING, logger="llmctl.serving.compile"):
        assert second.prepare() == "compile"
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "ignoring the compile cache" in warning[0]
    assert ("partial" if damage == "no-manifest" else "corrupt") in warning[0]
    assert not (second.directory / "model.pt").exists()  # nothing of the bad copy was downloaded
    compiled: list[str] = []
    nxdi_start(second.directory, compiled, model=b"recompiled!")
    second.finish(True)
    assert compiled and second.published
    assert _objects(bucket)[f"{PREFIX}/model.pt"] == b"recompiled!"
    third = _cache(tmp_path, "pod3")
    assert third.prepare() == "s3"  # the replacement is complete again


def test_two_writers_one_wins_the_other_compiles_without_publishing(bucket: Any, tmp_path: Path) -> None:
    a, b = _cache(tmp_path, "pod-a"), _cache(tmp_path, "pod-b", wait_s=0)
    assert a.prepare() == "compile"
    assert b.prepare() == "compile"  # the lock is a's: b does not wait (wait_s=0) and will not publish
    nxdi_start(a.directory, [], model=b"from-a")
    nxdi_start(b.directory, [], model=b"from-b")
    b.finish(True)  # b finishes first, yet only the lock holder writes
    a.finish(True)
    assert (a.published, b.published) == (True, False)
    objects = _objects(bucket)
    assert objects[f"{PREFIX}/model.pt"] == b"from-a" and f"{PREFIX}.lock" not in objects


def test_a_waiting_replica_loads_what_the_writer_publishes(bucket: Any, tmp_path: Path) -> None:
    writer = _cache(tmp_path, "pod-a")
    assert writer.prepare() == "compile"
    waits: list[float] = []

    def writer_finishes_while_we_wait(seconds: float) -> None:
        waits.append(seconds)
        nxdi_start(writer.directory, [])
        writer.finish(True)

    waiter = _cache(tmp_path, "pod-b", wait_s=600, poll_s=5, sleep=writer_finishes_while_we_wait)
    assert waiter.prepare() == "s3"
    assert waits == [5]  # one poll, then the published copy
    assert (waiter.directory / "model.pt").read_bytes() == b"neff-graphs"


def test_a_stale_lock_is_taken_over_by_exactly_one_replica(bucket: Any, aws: dict[str, str]) -> None:
    import botocore.exceptions

    key = f"{PREFIX}.lock"
    bucket.put_object(Bucket=BUCKET, Key=key, Body=json.dumps({"owner": "dead-pod", "since": 1000.0}))

    def lock(owner: str, now: float) -> S3Lock:
        return S3Lock(bucket, botocore.exceptions, BUCKET, key, owner, stale_s=3600, clock=lambda: now)

    assert not lock("early", 2000.0).acquire()  # 1000 s old: the holder may still be compiling
    first, second = lock("one", 5000.0), lock("two", 5000.1)
    stale = first.holder()
    assert stale is not None and stale.owner == "dead-pod"
    assert first.acquire()
    # the second saw the same stale lock; its takeover names the old ETag and must fail now
    with pytest.raises(botocore.exceptions.ClientError):
        bucket.put_object(Bucket=BUCKET, Key=key, Body=b"x", IfMatch=stale.etag)
    assert not second.acquire()
    holder = second.holder()
    assert holder is not None and holder.owner == "one"
    second.release()  # not the holder: leaves the lock alone
    assert _objects(bucket)[key]
    first.release()
    assert key not in _objects(bucket)


def test_a_failed_engine_start_releases_the_lock(
    bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = _cache(tmp_path, "pod1")
    cache.prepare()

    async def broken() -> None:
        raise RuntimeError("neuronx-cc failed")

    with pytest.raises(RuntimeError, match="neuronx-cc"):
        asyncio.run(replica.start_engine(broken, lambda: cache))
    assert _objects(bucket) == {}  # no lock left for others to wait on, nothing published
    assert _phases(capsys.readouterr().out)[-2:] == [("compile", "failed"), ("engine", "failed")]


def test_without_a_bucket_the_artifacts_stay_on_the_pod(tmp_path: Path) -> None:
    cache = NeuronCompileCache(tmp_path / KEY, KEY, None, owner="pod")
    assert cache.prepare() == "compile"
    nxdi_start(cache.directory, [])
    cache.finish(True)
    assert NeuronCompileCache(tmp_path / KEY, KEY, None, owner="pod").prepare() == "local"


def test_the_app_points_nxdi_at_one_directory_per_key() -> None:
    bp = load_blueprint("llama3-vllm-inf2")
    config = llm_config(bp)
    env = config["runtime_env"]["env_vars"]
    key = vllm_compile_key(bp, config["engine_kwargs"])
    assert env[KEY_ENV] == key.name and env[ARTIFACTS_ENV].endswith("/" + key.name)
    for part in ("@main-", "-tp2-", "-bf16-", "-b4-", "-n8192-", "-sdk2.27.1-", "-vllm0.13.0-"):
        assert part in key.name
    other = vllm_compile_key(bp, {**config["engine_kwargs"], "block_size": 4096})
    assert other.name != key.name  # any engine setting changes the digest
    # two model ids that slug to one name never share a key (the digest holds the exact id)
    a = bp.model_copy(update={"model": bp.model.model_copy(update={"id": "org-a/model"})})
    b = bp.model_copy(update={"model": bp.model.model_copy(update={"id": "org/a-model"})})
    key_a, key_b = (vllm_compile_key(x, config["engine_kwargs"]) for x in (a, b))
    assert key_a.name.split("@")[0] == key_b.name.split("@")[0] and key_a.name != key_b.name
    assert env[ENGINE_CLS_ENV] == ENGINE_CLS and config["callback_config"] == {"callback_class": CALLBACK_CLS}
    gpu = llm_config(load_blueprint("llama2-70b-vllm-gpu"))["runtime_env"]["env_vars"]
    assert ARTIFACTS_ENV not in gpu and gpu[ENGINE_CLS_ENV] == ENGINE_CLS  # no Neuron variable on a GPU


# the engines' own variables (vllm/envs.py, torch/_inductor, triton, flashinfer/jit/env.py, CUDA)
GPU_CACHE_VARIABLES = (
    "VLLM_CACHE_ROOT",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "FLASHINFER_WORKSPACE_BASE",
    "CUDA_CACHE_PATH",
)


def test_on_a_gpu_every_vllm_cache_lives_in_one_folder_per_key_that_names_the_gpu() -> None:
    """The 2026-11-28 H200 run: a restart on the folder that held all five caches was ready in 59.6 s
    instead of 200.9 s; most of the difference was FlashInfer's JIT build, outside VLLM_CACHE_ROOT."""
    bp = load_blueprint("llama2-70b-vllm-gpu")
    config = llm_config(bp)
    env = config["runtime_env"]["env_vars"]
    folder = Path(env[DIR_ENV])
    assert folder.name == env[KEY_ENV]
    for variable in GPU_CACHE_VARIABLES:
        assert Path(env[variable]).parent == folder, variable
    key = vllm_compile_key(bp, config["engine_kwargs"], gpu="A100-80GB")  # p4de.24xlarge's, in the catalog
    assert env[KEY_ENV] == key.name
    for part in ("@main-", "-tp4-", "-bf16-", "-n4096-", "-gpua100-80gb-cuda13.0-", "-vllm0.26.0-"):
        assert part in key.name
    # another GPU model builds other kernels: another key, never a restore of the A100's
    other = bp.model_copy(update={"compute": bp.compute.model_copy(update={"instance_type": "p5.48xlarge"})})
    other_env = llm_config(other)["runtime_env"]["env_vars"]
    assert "-gpuh100-" in other_env[KEY_ENV] and other_env[KEY_ENV] != env[KEY_ENV]


def test_a_gpu_replica_publishes_vllms_caches_and_the_next_one_restores_them(
    bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bp = load_blueprint("llama2-70b-vllm-gpu")
    config = llm_config(bp)
    env = config["runtime_env"]["env_vars"]
    url = f"s3://{BUCKET}/neuron-cache/{bp.name}"

    def replica_env(pod: str) -> dict[str, str]:
        # the replica's env as rendered, with the folder moved under this test's tmp_path
        moved = {k: v.replace(str(Path(env[DIR_ENV]).parent), str(tmp_path / pod)) for k, v in env.items()}
        return {**moved, "LLMCTL_COMPILE_CACHE_URL": url, "HOSTNAME": pod}

    first_env = replica_env("pod-a")
    first = cache_from_env(first_env)
    assert first is not None and first.prepare() == "compile"
    # what a vLLM start leaves in the folder: torch.compile's graphs, Triton and FlashInfer kernels
    written = {
        Path(first_env["VLLM_CACHE_ROOT"])
        / "torch_compile_cache"
        / "13c72c7eee"
        / "rank_0_0"
        / "graph.py": b"g",
        Path(first_env["TRITON_CACHE_DIR"]) / "ab12" / "kernel.cubin": b"cubin",
        Path(first_env["FLASHINFER_WORKSPACE_BASE"]) / ".cache" / "flashinfer" / "sampling.so": b"so",
    }
    for path, body in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    first.finish(True)
    assert first.published
    stored = _objects(bucket, f"neuron-cache/{bp.name}/{env[KEY_ENV]}/")
    assert len(stored) == len(written) + 1  # every file and the manifest
    second_env = replica_env("pod-b")
    second = cache_from_env(second_env)
    assert second is not None and second.prepare() == "s3"
    for path, body in written.items():
        restored = Path(str(path).replace(str(tmp_path / "pod-a"), str(tmp_path / "pod-b")))
        assert restored.read_bytes() == body
    phases = _phases(capsys.readouterr().out)
    assert ("compile", "start") in phases and ("compile", "hit") in phases


def test_the_configured_hook_classes_exist_in_the_hooks_module() -> None:
    """hooks.py imports Ray's vLLM engine (no vLLM here), so its classes are checked in the source."""
    import llmctl.serving.ray_vllm as package

    source = Path(package.__file__).with_name("hooks.py").read_text()
    classes = {node.name: node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)}
    for path in (ENGINE_CLS, CALLBACK_CLS):
        module, name = path.split(":")
        assert module == "llmctl.serving.ray_vllm.hooks" and name in classes
    bases = {name: [ast.unparse(b) for b in node.bases] for name, node in classes.items()}
    assert bases[ENGINE_CLS.split(":")[1]] == ["VLLMEngine"]
    assert bases[CALLBACK_CLS.split(":")[1]] == ["CallbackBase"]
