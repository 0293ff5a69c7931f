"""Whether a blueprint serves on Ray's fast path, and why not where it cannot.

The fast path (docs/serving.md, "The fast path (HAProxy and direct streaming)") is three switches of
Ray Serve and Ray Serve LLM, all read from the environment of every Ray process:

- ``RAY_SERVE_ENABLE_HA_PROXY=1``: HAProxy replaces Serve's Python proxy (Ray 2.58.0
  ``ray/serve/_private/constants.py``; the controller reads it when it starts, so it must be set
  on the head, not in a deployment's runtime_env);
- ``RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING=1``: Ray Serve LLM's ``LLMServer`` replica becomes the
  HTTP ingress and HAProxy forwards to it, with no ``OpenAiIngress`` hop (Ray 2.58.0
  ``ray/llm/_internal/serve/core/ingress/builder.py`` ``build_openai_app``);
- ``RAY_SERVE_THROUGHPUT_OPTIMIZED=1`` (the same ``constants.py``: gRPC between actors, buffered
  request logs, user code on the replica's own loop).

It needs a Ray with both switches, 2.55 or later: Ray 2.53.0 has neither
``RAY_SERVE_ENABLE_HA_PROXY`` nor ``RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING`` (its wheel's
``ray/serve`` and ``ray/llm`` read only ``RAY_SERVE_THROUGHPUT_OPTIMIZED``), and Ray Serve LLM, since
direct streaming is its own. Pure: no I/O beyond the packaged version pins.
"""

from __future__ import annotations

import re

from llmctl.blueprints.runtimes import runtime
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.versions import versions

#: the first Ray whose Serve has the HAProxy ingress and whose Serve LLM has direct streaming
MIN_RAY = (2, 55, 0)
_TAG_RAY = re.compile(r"^(?:docker\.io/)?rayproject/ray(?:-llm)?:(\d+)\.(\d+)\.(\d+)")


def blueprint_ray(blueprint: Blueprint) -> str:
    """The Ray the blueprint's pods run: a rayproject image's own (its tag), the one versions.yaml records
    for a pinned image whose tag does not say (AWS's Ray LLM DLC), else the runtime's pin (Ray Serve
    LLM on Neuron: ``python.ray_neuron_vllm``, the newest Ray whose Serve LLM imports vLLM 0.13)."""
    if runtime(blueprint.runtime).serve_llm and blueprint.is_neuron:
        return versions().python["ray_neuron_vllm"].value
    found = _TAG_RAY.match(blueprint.image.base)
    if found:
        return ".".join(found.groups())
    base = blueprint.image.base.split("@", 1)[0]
    recorded = [entry.ray for entry in versions().images.values() if entry.image == base and entry.ray]
    return recorded[0] if recorded else versions().python["ray"].value


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def blocker(blueprint: Blueprint) -> str | None:
    """Why the blueprint cannot take the fast path, or None when it can."""
    if not runtime(blueprint.runtime).serve_llm:
        return (
            f"{blueprint.runtime} does not serve Ray Serve LLM's app: the fast path's gain is direct "
            "streaming (the LLMServer replica serving HTTP itself), which only Ray Serve LLM has; "
            "HAProxy alone in front of llmctl's own app is not measured, so it is not offered"
        )
    ray = blueprint_ray(blueprint)
    if version_tuple(ray) < MIN_RAY:
        why = (
            " (the Neuron vLLM container's vLLM 0.13 runs only this Ray's Serve LLM)"
            if blueprint.is_neuron
            else ""
        )
        return (
            f"its Ray is {ray}{why}; the HAProxy ingress and direct streaming came in Ray "
            f"{'.'.join(map(str, MIN_RAY[:2]))}"
        )
    return None


def enabled(blueprint: Blueprint) -> bool:
    """Whether the RayService renders the fast path: ``serving.ray_fast_path`` when set, else on
    wherever the blueprint can take it."""
    explicit = blueprint.serving.ray_fast_path
    if explicit is not None:
        return explicit and blocker(blueprint) is None
    return blocker(blueprint) is None


def describe(blueprint: Blueprint) -> dict[str, object]:
    """`blueprints show`: whether the fast path is on and why (or why it cannot be)."""
    why_not = blocker(blueprint)
    on = enabled(blueprint)
    if why_not is not None:
        reason = f"cannot: {why_not}"
    elif blueprint.serving.ray_fast_path is False:
        reason = "off: serving.ray_fast_path is false (Ray's Python proxy and OpenAiIngress)"
    else:
        reason = (
            f"on: Ray {blueprint_ray(blueprint)} with Ray Serve LLM; HAProxy and direct streaming on head and "
            "workers (not yet measured in the pinned layout on a GPU: docs/serving.md)"
        )
    return {"ray_fast_path": on, "ray_fast_path_reason": reason}
