"""Rendering and settings of the runtimes that need hardware we do not have (Neuron, GPUs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import ServingError
from llmctl.serving.compile_cache import has_compiled, save_compiled
from llmctl.serving.neuronx.settings import (
    SPLIT_MARKER,
    apply_env,
    context_length_estimates,
    ensure_split,
    neuron_settings,
)
from llmctl.serving.ray_vllm.app import llm_config
from llmctl.serving.torchserve_neuronx.config import render_model_config
from llmctl.serving.torchserve_neuronx.handler import request_text, split_micro_batches
from llmctl.serving.triton_vllm.repository import render_model_repository


def test_triton_repository_uses_the_vllm_backend_and_blueprint_engine_args() -> None:
    files = render_model_repository(load_blueprint("llama2-triton-vllm-gpu"))
    assert set(files) == {"llama2_triton_vllm_gpu/config.pbtxt", "llama2_triton_vllm_gpu/1/model.json"}
    assert 'backend: "vllm"' in files["llama2_triton_vllm_gpu/config.pbtxt"]
    args = json.loads(files["llama2_triton_vllm_gpu/1/model.json"])
    assert args["model"] == "meta-llama/Llama-2-7b-chat-hf"
    assert (args["tensor_parallel_size"], args["max_model_len"], args["dtype"], args["max_num_seqs"]) == (
        1,
        4096,
        "bfloat16",
        64,
    )
    assert args["gpu_memory_utilization"] == 0.9
    # vLLM >= 0.11 removed disable_log_requests: AsyncEngineArgs(**model.json) would raise TypeError
    assert "disable_log_requests" not in args


def test_torchserve_model_config_matches_the_seed_layout() -> None:
    files = render_model_config(load_blueprint("llama2-torchserve-inf2"))
    config = yaml.safe_load(files["model-config.yaml"])
    assert (config["batchSize"], config["maxBatchDelay"], config["minWorkers"], config["maxWorkers"]) == (
        16,
        100,
        1,
        1,
    )
    assert config["handler"]["tp_degree"] == 12 and config["handler"]["amp"] == "bf16"
    assert config["handler"]["max_length"] == 100
    assert config["micro_batching"]["micro_batch_size"] == 1
    assert "inference_address=http://127.0.0.1:8083" in files["config.properties"]  # behind the gateway
    assert "disable_token_authorization" not in files["config.properties"]


def test_torchserve_handler_helpers() -> None:
    assert split_micro_batches([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert request_text({"body": b'{"prompt": "hi"}'}) == "hi"
    assert request_text({"data": "plain text"}) == "plain text"


def test_neuron_settings_follow_the_blueprint(tmp_path: Path) -> None:
    bp = load_blueprint("llama2-inf2")
    settings = neuron_settings(bp, cache_root=str(tmp_path), compile_cache_url="s3://bucket/neuron")
    kwargs = settings.sampling_kwargs()
    assert kwargs["tp_degree"] == bp.compute.tensor_parallel and kwargs["n_positions"] == bp.model.max_context
    assert kwargs["amp"] == "bf16" and kwargs["batch_size"] == bp.model.batch_size
    assert kwargs["context_length_estimate"] == context_length_estimates(
        bp.model.max_context, bp.serving.max_new_tokens
    )
    assert settings.compile_cache_url == "s3://bucket/neuron"
    assert "NEURON_COMPILE_CACHE_URL" not in settings.env  # transformers-neuronx does not read it
    assert settings.env["NEURONX_CACHE"] == "on"
    # transformers-neuronx writes its compile dump there during to_neuron(): never the save/load dir
    assert settings.env["NEURONX_DUMP_TO"] == str(settings.dump_dir)
    assert not settings.dump_dir.is_relative_to(settings.artifacts_dir)
    assert not settings.artifacts_dir.is_relative_to(settings.dump_dir)
    assert f"tp{bp.compute.tensor_parallel}" in settings.artifacts_dir.name
    assert str(bp.image.neuron_sdk) in settings.artifacts_dir.name
    env = {"NEURONX_CACHE": "off"}
    apply_env(settings, env)
    assert env["NEURONX_CACHE"] == "off" and env["NEURON_RT_NUM_CORES"] == str(bp.compute.tensor_parallel)


def test_context_length_buckets() -> None:
    assert context_length_estimates(4096, 256) == [512, 1024, 2048, 3840]
    assert context_length_estimates(256, 256) == [128]
    assert all(b <= 2048 for b in context_length_estimates(2048, 100))


def test_checkpoint_is_split_once(tmp_path: Path) -> None:
    calls: list[str] = []

    def save(source: str, target: Path) -> None:
        calls.append(source)
        (target / "weights.bin").write_text("w")

    split = tmp_path / "split"
    assert ensure_split("model-a", split, save) is True
    assert ensure_split("model-a", split, save) is False
    assert calls == ["model-a"] and (split / SPLIT_MARKER).is_file() and (split / "weights.bin").is_file()


def test_interrupted_split_is_redone(tmp_path: Path) -> None:
    def broken(source: str, target: Path) -> None:
        raise RuntimeError("disk full")

    split = tmp_path / "split"
    with pytest.raises(RuntimeError):
        ensure_split("m", split, broken)
    assert not split.exists() and list(tmp_path.iterdir()) == []


def test_neuronx_app_imports_without_the_sdk_and_fails_clearly() -> None:
    code = (
        "import sys; import llmctl.serving.ray_neuronx.app as a; "
        "assert 'transformers_neuronx' not in sys.modules and 'torch' not in sys.modules and 'ray' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    from llmctl.serving.ray_neuronx.app import app_builder

    with pytest.raises(ServingError, match="transformers_neuronx") as caught:
        app_builder({"blueprint": load_blueprint("llama2-inf2").model_dump(mode="json")})
    assert caught.value.hint is not None and "pip install transformers-neuronx" in caught.value.hint


def test_vllm_config_for_gpu_and_neuron() -> None:
    gpu = llm_config(load_blueprint("llama2-70b-vllm-gpu"))
    bp = load_blueprint("llama2-70b-vllm-gpu")
    assert gpu["engine_kwargs"]["tensor_parallel_size"] == bp.compute.tensor_parallel
    assert gpu["engine_kwargs"]["gpu_memory_utilization"] == bp.serving.gpu_memory_utilization
    assert gpu["model_loading_config"]["model_source"] == bp.model.id
    assert "accelerator_type" not in gpu  # the nodeSelector pins the GPU (test_gpu_ray_autoscaling.py)
    neuron = llm_config(load_blueprint("llama3-vllm-inf2"))
    assert "gpu_memory_utilization" not in neuron["engine_kwargs"]
    assert (
        neuron["placement_group_config"]["bundles"][0]["neuron_cores"]
        == load_blueprint("llama3-vllm-inf2").compute.tensor_parallel
    )
    # vllm-neuron keeps block_size = max_model_len (contiguous KV) only with prefix caching off;
    # vLLM V1 turns it on by default, which would switch the plugin to its block-KV path
    engine = neuron["engine_kwargs"]
    assert engine["enable_prefix_caching"] is False
    assert engine["block_size"] == engine["max_model_len"]
    assert "enable_prefix_caching" not in gpu["engine_kwargs"]
    assert llm_config(bp, {"num_replicas": 1})["deployment_config"]["num_replicas"] == 1


def test_app_builders_need_a_blueprint() -> None:
    from llmctl.serving.ray_cpu.app import app_builder

    with pytest.raises(ServingError, match="blueprint"):
        app_builder({})


def test_compiled_artifacts_count_only_after_a_finished_save(tmp_path: Path) -> None:
    """A folder with files (a compile dump, or a save cut short) is not a set of saved NEFFs."""
    artifacts = tmp_path / "compiled" / "key"
    artifacts.mkdir(parents=True)
    (artifacts / "partial.neff").write_text("x")
    assert not has_compiled(artifacts)

    def failing_save(path: str) -> None:
        (Path(path) / "one.neff").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError):
        save_compiled(artifacts, failing_save)
    assert not has_compiled(artifacts)
    saved: list[str] = []
    save_compiled(artifacts, saved.append)
    assert saved == [str(artifacts)] and has_compiled(artifacts)


def test_neuron_engine_saves_once_then_loads_before_to_neuron(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers-neuronx (not installable here) is replaced at the import boundary by a recorder.

    First start: compile (to_neuron) while NEURONX_DUMP_TO fills, then save. Second start: load the
    saved NEFFs before to_neuron, and save nothing.
    """
    import types

    from llmctl.serving.neuronx.engine import NeuronEngine

    calls: list[str] = []

    class FakeModel:
        @classmethod
        def from_pretrained(cls, path: str, **kwargs: object) -> FakeModel:
            calls.append("from_pretrained")
            return cls()

        def load(self, path: str) -> None:
            calls.append("load")

        def to_neuron(self) -> None:
            calls.append("to_neuron")
            dump = Path(os.environ["NEURONX_DUMP_TO"]) / "hlo.hash"  # what transformers-neuronx does
            dump.mkdir(parents=True, exist_ok=True)
            (dump / "hlo.pb.neff").write_text("x")

        def save(self, path: str) -> None:
            calls.append("save")
            (Path(path) / "model.neff").write_text("x")

    class FakeTokenizer:
        eos_token_id = 2
        chat_template = None

    llama = types.ModuleType("transformers_neuronx.llama.model")
    llama.LlamaForSampling = FakeModel  # type: ignore[attr-defined]
    transformers = types.ModuleType("transformers")
    transformers.AutoTokenizer = types.SimpleNamespace(from_pretrained=lambda source: FakeTokenizer())  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers_neuronx.llama.model", llama)
    monkeypatch.setitem(sys.modules, "transformers", transformers)
    for key in ("NEURONX_DUMP_TO", "NEURONX_CACHE", "NEURON_COMPILE_CACHE_URL", "NEURON_RT_NUM_CORES"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # apply_env writes here; keep the real env clean

    settings = neuron_settings(load_blueprint("llama2-inf2"), cache_root=str(tmp_path))
    (settings.split_dir).mkdir(parents=True)
    (settings.split_dir / SPLIT_MARKER).write_text("done\n")  # split already saved

    NeuronEngine(settings, model_source="weights", served_name="m")
    assert calls == ["from_pretrained", "to_neuron", "save"]
    assert has_compiled(settings.artifacts_dir)
    calls.clear()
    NeuronEngine(settings, model_source="weights", served_name="m")
    assert calls == ["from_pretrained", "load", "to_neuron"]
