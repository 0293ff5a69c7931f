"""Ray Serve LLM hooks of the ray-vllm replica (imported by Ray inside the replica only).

- :class:`PhaseCallback`, named in the ``LLMConfig``'s ``callback_config``: Ray Serve LLM runs its
  ``on_before_node_init`` / ``on_after_node_init`` around the model download.
- :class:`LlmctlVLLMEngine`, named by ``RAYLLM_VLLM_ENGINE_CLS`` (the engine class Ray Serve LLM's
  ``LLMServer`` instantiates): Ray's ``VLLMEngine`` with its start wrapped and the first passing
  health check logged.

Both exist in the pinned Neuron Ray (2.53) and in the GPU image's Ray; the logic is in
:mod:`.replica`, which does not import Ray.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ray.llm._internal.common.callbacks.base import CallbackBase
from ray.llm._internal.serve.engines.vllm.vllm_engine import VLLMEngine

from llmctl.serving.ray_vllm.neuron_cache import NeuronCompileCache
from llmctl.serving.ray_vllm.replica import HealthOnce, after_weights, before_weights, start_engine

CACHE_SLOT = "llmctl_compile_cache"


def _source(llm_config: Any) -> str:
    source = getattr(getattr(llm_config, "model_loading_config", None), "model_source", None)
    uri = getattr(source, "bucket_uri", None) or (
        source.get("bucket_uri") if isinstance(source, dict) else None
    )
    return str(uri or source or getattr(llm_config, "model_id", "?"))


class PhaseCallback(CallbackBase):
    """Logs the weights phase and prepares the compile cache once the weights are on the node."""

    async def on_before_node_init(self) -> None:
        await asyncio.to_thread(before_weights, _source(self.llm_config))

    async def on_after_node_init(self) -> None:
        # Ray Serve LLM's node init points the engine at the folder it downloaded into
        # (``serve/utils/node_initialization_utils.py``: ``get_engine_config().hf_model_id = paths[0]``)
        local = getattr(self.llm_config.get_engine_config(), "hf_model_id", None)
        self.ctx.custom_data[CACHE_SLOT] = await after_weights(_source(self.llm_config), local)


class LlmctlVLLMEngine(VLLMEngine):
    """Ray Serve LLM's vLLM engine, publishing compiled Neuron artifacts after its first start."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._llmctl_health = HealthOnce()

    def _llmctl_cache(self) -> NeuronCompileCache | None:
        callback = self.llm_config.get_or_create_callback()
        found = callback.ctx.custom_data.get(CACHE_SLOT) if callback is not None else None
        return found if isinstance(found, NeuronCompileCache) else None

    async def start(self) -> None:
        await start_engine(super().start, self._llmctl_cache)

    async def check_health(self) -> None:
        await super().check_health()
        self._llmctl_health.passed()
