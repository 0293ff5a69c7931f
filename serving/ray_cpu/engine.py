"""A Hugging Face transformers engine on CPU (bf16/fp32, or int8 by dynamic quantisation)."""

from __future__ import annotations

import threading
from typing import Any

from llmctl.errors import ServingError
from llmctl.serving.common.deps import require
from llmctl.serving.common.engine import SamplingParams, ThreadedEngine, TokenSink

_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int8": "float32"}


class TransformersEngine(ThreadedEngine):
    """``model.generate`` in a worker thread, streaming through a token streamer."""

    def __init__(
        self,
        model_path: str,
        *,
        model_id: str,
        dtype: str = "fp32",
        max_context: int = 4096,
        workers: int = 1,
        threads: int | None = None,
    ) -> None:
        torch = require("torch")
        transformers = require("transformers")
        if threads:
            torch.set_num_threads(threads)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                model_path, dtype=getattr(torch, _TORCH_DTYPES[dtype])
            )
        except (OSError, ValueError) as error:
            raise ServingError(
                f"could not load the model from {model_path!r}: {error}",
                "pass a directory holding config.json, the weights and the tokenizer",
            ) from None
        model.eval()
        if dtype == "int8":
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self._torch = torch
        self._transformers = transformers
        self.model = model
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = tokenizer.eos_token_id
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        self._pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos_ids or [0])[0]
        limit = int(getattr(model.config, "max_position_embeddings", max_context) or max_context)
        super().__init__(
            tokenizer,
            model_id=model_id,
            max_context=min(max_context, limit),
            eos_ids=eos_ids,
            workers=workers,
        )

    def run_blocking(
        self, prompt_ids: list[int], params: SamplingParams, streamer: TokenSink, cancelled: threading.Event
    ) -> None:
        torch = self._torch

        class _Cancelled(self._transformers.StoppingCriteria):  # type: ignore[name-defined,misc]
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                return torch.full((input_ids.shape[0],), cancelled.is_set(), dtype=torch.bool)

        sampling: dict[str, Any] = {"do_sample": False}
        if not params.greedy:
            sampling = {
                "do_sample": True,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "top_k": 0,
            }
            if params.seed is not None:
                torch.manual_seed(params.seed)
        ids = torch.tensor([prompt_ids], dtype=torch.long)
        with torch.inference_mode():
            self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=params.max_tokens,
                streamer=streamer,
                stopping_criteria=self._transformers.StoppingCriteriaList([_Cancelled()]),
                pad_token_id=self._pad,
                **sampling,
            )


def engine_from_blueprint(blueprint: Any, options: dict[str, Any]) -> TransformersEngine:
    """Build (and warm up) the CPU engine of a blueprint.

    Weights: ``options["model_path"]``, else the S3 mirror (``LLMCTL_MODEL_URI``), else the hub.
    """
    from llmctl.serving.model_source import model_dir

    engine = TransformersEngine(
        model_dir(blueprint, options.get("model_path")),
        model_id=options.get("served_model_name") or blueprint.model.id,
        dtype=blueprint.model.dtype,
        max_context=blueprint.model.max_context,
        workers=int(options.get("workers", 1)),
        threads=options.get("threads"),
    )
    engine.warmup()
    return engine
