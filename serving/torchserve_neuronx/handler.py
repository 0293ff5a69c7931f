"""TorchServe handler for transformers-neuronx: micro-batching and streamed responses.

TorchServe's frontend collects up to ``batchSize`` requests (waiting ``maxBatchDelay`` ms);
``handle`` then runs them through ``LlamaForSampling`` in micro-batches of the compiled
``micro_batching.micro_batch_size``, streaming each request's tokens back with
``send_intermediate_predict_response`` when ``handler.streaming`` is true. Settings come from
``model-config.yaml`` (rendered by :mod:`.config`). Neuron imports happen in ``initialize``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from llmctl.serving.common.decode import IncrementalDecoder
from llmctl.serving.common.deps import require
from llmctl.serving.compile_cache import CompileKey, compile_cache_url, compile_or_load
from llmctl.serving.model_mirror import mirrored_or
from llmctl.serving.neuronx.engine import NEURON_INSTALL


def split_micro_batches(items: list[Any], size: int) -> list[list[Any]]:
    """Consecutive chunks of at most ``size`` items."""
    return [items[i : i + size] for i in range(0, len(items), max(1, size))]


def request_text(row: dict[str, Any]) -> str:
    """The prompt of one TorchServe request (raw text, or JSON with 'prompt'/'text')."""
    data = row.get("data") if row.get("data") is not None else row.get("body")
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8")
    if isinstance(data, dict):
        return str(data.get("prompt") or data.get("text") or "")
    if isinstance(data, str) and data.lstrip().startswith("{"):
        try:
            parsed = json.loads(data)
            return str(parsed.get("prompt") or parsed.get("text") or "")
        except ValueError:
            return data
    return str(data or "")


class NeuronxLlamaHandler:
    """Loads LlamaForSampling once per worker; answers batches of prompts."""

    def __init__(self) -> None:
        self.initialized = False
        self.model: Any = None
        self.tokenizer: Any = None
        self.cfg: dict[str, Any] = {}
        self.micro_batch_size = 1
        self.compiled_from = ""

    def initialize(self, ctx: Any) -> None:
        """Split (once), then load compiled artifacts (local, else the S3 compile cache) or compile."""
        transformers = require("transformers")
        llama = require(
            "transformers_neuronx.llama.model", install=NEURON_INSTALL, purpose="the TorchServe handler"
        )
        module = require(
            "transformers_neuronx.module", install=NEURON_INSTALL, purpose="the TorchServe handler"
        )

        model_dir = ctx.system_properties.get("model_dir")
        config = ctx.model_yaml_config
        self.cfg = config["handler"]
        self.micro_batch_size = int(config.get("micro_batching", {}).get("micro_batch_size", 1))
        os.environ.setdefault("NEURONX_CACHE", "on")
        os.environ.setdefault("NEURONX_DUMP_TO", os.path.join(model_dir, "neuron_cache"))
        split = os.path.join(model_dir, self.cfg["model_checkpoint_dir"])
        source = mirrored_or(self.cfg["model_id"])  # the S3 mirror (LLMCTL_MODEL_URI) when the pod has one
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        if not os.path.isdir(split):
            module.save_pretrained_split(
                transformers.AutoModelForCausalLM.from_pretrained(source, low_cpu_mem_usage=True),
                split,
            )
        spec = self.cfg["compile_key"]
        key = CompileKey(**{**spec, "context_length_estimate": tuple(spec["context_length_estimate"])})
        self.model = llama.LlamaForSampling.from_pretrained(
            split,
            batch_size=key.batch_size,
            tp_degree=key.tp_degree,
            amp=key.amp,
            n_positions=key.n_positions,
            context_length_estimate=list(key.context_length_estimate),
        )
        artifacts = Path(model_dir) / "compiled" / key.name
        self.compiled_from = compile_or_load(self.model, artifacts, key, compile_cache_url())
        self.initialized = True

    def handle(self, data: list[dict[str, Any]], ctx: Any) -> list[str]:
        """One answer per request; streamed requests get their tokens as intermediate responses."""
        prompts = [request_text(row) for row in data]
        answers: list[str] = []
        offset = 0
        for chunk in split_micro_batches(prompts, self.micro_batch_size):
            answers.extend(self._generate(chunk, ctx, offset))
            offset += len(chunk)
        return answers

    def _generate(self, prompts: list[str], ctx: Any, offset: int) -> list[str]:
        torch = require("torch")
        padded = prompts + [prompts[-1]] * (self.micro_batch_size - len(prompts))
        self.tokenizer.pad_token = self.tokenizer.pad_token or self.tokenizer.eos_token
        batch = self.tokenizer(padded, return_tensors="pt", padding=True)
        decoders = [IncrementalDecoder(self.tokenizer) for _ in prompts]
        streaming = bool(self.cfg.get("streaming", True))
        texts = ["" for _ in prompts]

        class _Streamer:
            def put(_, ids: Any) -> None:
                rows = ids.tolist()
                for i in range(len(prompts)):
                    piece = decoders[i].push(int(rows[i] if not isinstance(rows[i], list) else rows[i][0]))
                    texts[i] += piece
                    if streaming and piece:
                        _send_intermediate(piece, ctx, offset + i)

            def end(_) -> None:
                for i in range(len(prompts)):
                    texts[i] += decoders[i].flush()

        with torch.inference_mode():
            self.model.sample(
                batch["input_ids"],
                sequence_length=batch["input_ids"].shape[1] + int(self.cfg["max_length"]),
                streamer=_Streamer(),
                top_k=50,
            )
        return ["" if streaming else text for text in texts]


def _send_intermediate(piece: str, ctx: Any, index: int) -> None:
    utils = require(
        "ts.handler_utils.utils", install="run the handler inside TorchServe", purpose="streaming"
    )
    request_id = ctx.request_ids[index]
    utils.send_intermediate_predict_response(
        [piece], {0: request_id}, "Intermediate Prediction success", 200, ctx
    )


_service = NeuronxLlamaHandler()


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[str] | None:
    """TorchServe's module-level entry point."""
    if not _service.initialized:
        _service.initialize(context)
    if data is None:
        return None
    return _service.handle(data, context)
