"""Ray Serve LLM's OpenAI app (its ingress + one LLM deployment per config), for any runtime on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmctl.serving.common.deps import require
from llmctl.serving.common.ingress import ray_supports_backpressure_config


def openai_app(configs: Callable[[bool], list[dict[str, Any]]], *, purpose: str) -> Any:
    """The bound Serve application; ``configs(backpressure)`` gives the ``LLMConfig`` dicts, told
    whether the installed Ray takes ``backpressure_config``."""
    llm = require("ray.serve.llm", install="pip install 'ray[serve,llm]'", purpose=purpose)
    backpressure = ray_supports_backpressure_config(require("ray.serve"))
    return llm.build_openai_app({"llm_configs": configs(backpressure)})
