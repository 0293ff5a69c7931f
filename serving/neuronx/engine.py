"""The transformers-neuronx engine: LlamaForSampling on NeuronCores.

transformers-neuronx is imported when a replica starts, never at module import, so the app can
be imported (and its settings tested) where the Neuron SDK is not installed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from llmctl.blueprints.schema import Blueprint
from llmctl.serving.common.deps import require
from llmctl.serving.common.engine import SamplingParams, ThreadedEngine, TokenSink
from llmctl.serving.compile_cache import compile_or_load
from llmctl.serving.neuronx.settings import NeuronSettings, apply_env, ensure_split, neuron_settings
from llmctl.serving.phases import log_phase

NEURON_INSTALL = (
    "run it in the image of a transformers-neuronx runtime (the Neuron DLC with SDK <= 2.25), or install it with "
    "`pip install transformers-neuronx --extra-index-url https://pip.repos.neuron.amazonaws.com`"
)


def load_neuronx() -> Any:
    """``transformers_neuronx.llama.model``, or a ServingError that says how to get it."""
    return require(
        "transformers_neuronx.llama.model", install=NEURON_INSTALL, purpose="the transformers-neuronx engine"
    )


def _save_split(source: str, target: Path) -> None:
    transformers = require("transformers")
    module = require(
        "transformers_neuronx.module", install=NEURON_INSTALL, purpose="splitting the checkpoint"
    )
    model = transformers.AutoModelForCausalLM.from_pretrained(source, low_cpu_mem_usage=True)
    module.save_pretrained_split(model, str(target))


class NeuronEngine(ThreadedEngine):
    """``LlamaForSampling.sample`` in one worker thread (the compiled batch is fixed)."""

    skip_prompt = False  # transformers-neuronx's sampling loop reports only new tokens

    def __init__(self, settings: NeuronSettings, *, model_source: str, served_name: str) -> None:
        apply_env(settings)
        llama = load_neuronx()
        transformers = require("transformers")
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_source)
        ensure_split(model_source, settings.split_dir, _save_split)
        model = llama.LlamaForSampling.from_pretrained(str(settings.split_dir), **settings.sampling_kwargs())
        # saved NEFFs (local, else the S3 compile cache) are loaded before to_neuron(); otherwise
        # it compiles, then saves and publishes them for the next start
        started = time.time()
        self.compiled_from = compile_or_load(
            model, settings.artifacts_dir, settings.compile_key, settings.compile_cache_url
        )
        if self.compiled_from == "compiled":
            log_phase("compile", "start", at=started, key=settings.compile_key.name)
            log_phase("compile", "done", key=settings.compile_key.name)
        else:
            log_phase("compile", "hit", key=settings.compile_key.name, source=self.compiled_from)
        self.model = model
        self.settings = settings
        eos = tokenizer.eos_token_id
        super().__init__(
            tokenizer,
            model_id=served_name,
            max_context=settings.compile_key.n_positions,
            eos_ids=[eos] if eos is not None else [],
        )

    def run_blocking(
        self, prompt_ids: list[int], params: SamplingParams, streamer: TokenSink, cancelled: threading.Event
    ) -> None:
        torch = require("torch")
        ids = torch.tensor([prompt_ids] * self.settings.compile_key.batch_size, dtype=torch.long)
        sampling: dict[str, Any] = (
            {"top_k": 1}
            if params.greedy
            else {"top_k": 50, "temperature": params.temperature, "top_p": params.top_p}
        )
        with torch.inference_mode():
            self.model.sample(
                ids,
                sequence_length=len(prompt_ids) + params.max_tokens,
                streamer=_FirstRow(streamer, cancelled),
                **sampling,
            )


class _FirstRow:
    """Forward only the first sequence of the compiled batch; stop forwarding once cancelled."""

    def __init__(self, sink: TokenSink, cancelled: threading.Event) -> None:
        self._sink = sink
        self._cancelled = cancelled

    def put(self, value: Any) -> None:
        if not self._cancelled.is_set():
            row = value.tolist() if hasattr(value, "tolist") else value
            self._sink.put(row[0] if isinstance(row, list) and row and isinstance(row[0], list) else row)

    def end(self) -> None:
        self._sink.end()


def engine_from_blueprint(blueprint: Blueprint, options: dict[str, Any]) -> NeuronEngine:
    """Build, compile (or load compiled) and warm up the Neuron engine of a blueprint."""
    settings = neuron_settings(
        blueprint, cache_root=options.get("cache_dir"), compile_cache_url=options.get("compile_cache_url")
    )
    from llmctl.serving.model_mirror import mirror_uri
    from llmctl.serving.model_source import model_dir

    log_phase("weights", "start", source=options.get("model_path") or mirror_uri() or blueprint.model.id)
    source = model_dir(blueprint, options.get("model_path"))
    log_phase("weights", "done", source=source)
    engine = NeuronEngine(
        settings,
        model_source=source,
        served_name=options.get("served_model_name") or blueprint.model.id,
    )
    engine.warmup()
    log_phase("engine", "done")
    return engine
