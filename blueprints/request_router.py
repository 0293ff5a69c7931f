"""Whether a blueprint can route by prompt prefix (``serving.request_router: prefix_aware``), and why not.

Ray Serve LLM's ``PrefixCacheAffinityRouter`` is in both pinned Rays (2.58.0 and the Neuron image's
2.53.0: each wheel's ``ray/serve/llm/request_router.py``); what it does and how llmctl wires it is in
serving/serve_llm/routing.py. It is refused where it cannot help or cannot work:

- a runtime that does not serve Ray Serve LLM's app (no deployment router to configure);
- an engine without prefix caching: llmctl's Neuron vLLM runs with ``enable_prefix_caching`` off
  (serving/ray_vllm/app.py), so there is no cache to be affine to;
- direct streaming on a Ray before 2.56.1, where the router received the raw body and every request
  hung (ray-project/ray#64326, fixed by #64328 and its 2.56.1 cherry-pick #64488).

Pure: no I/O beyond the packaged version pins.
"""

from __future__ import annotations

from llmctl.blueprints import fast_path
from llmctl.blueprints.runtimes import runtime
from llmctl.blueprints.schema import Blueprint

#: the first Ray whose direct streaming hands a prefix router the parsed request body
MIN_RAY_DIRECT = (2, 56, 1)


def blocker(blueprint: Blueprint) -> str | None:
    """Why the blueprint cannot route by prefix, or None when it can."""
    if not runtime(blueprint.runtime).serve_llm:
        return f"{blueprint.runtime} does not serve Ray Serve LLM's app, whose deployment router this sets"
    if blueprint.is_neuron:
        return "its vLLM on Neuron runs without prefix caching (a contiguous KV cache), so no replica holds a prefix"
    ray = fast_path.blueprint_ray(blueprint)
    if fast_path.enabled(blueprint) and fast_path.version_tuple(ray) < MIN_RAY_DIRECT:
        return (
            f"its Ray is {ray}: with direct streaming (serving.ray_fast_path) the prefix router hangs every "
            "request before Ray 2.56.1 (ray-project/ray#64326); set serving.ray_fast_path false"
        )
    return None


def describe(blueprint: Blueprint) -> dict[str, object]:
    """`blueprints show`: which router picks the replica, and why."""
    chosen = blueprint.serving.request_router
    why_not = blocker(blueprint)
    if chosen == "default":
        if not runtime(blueprint.runtime).serve_llm:
            reason = "default: the runtime's own (no Ray Serve LLM deployment router)"
        elif fast_path.enabled(blueprint):
            reason = "default: Ray Serve LLM's RoundRobinRouter (its default under direct streaming)"
        else:
            reason = "default: Ray Serve's PowerOfTwoChoicesRequestRouter (the shorter queue of two)"
        if why_not is None:
            reason += "; prefix_aware can be set (not yet measured: docs/serving.md)"
    elif why_not is not None:
        reason = f"cannot: {why_not}"
    else:
        direct = (
            ", recording its own picks; HAProxy forwards the body" if fast_path.enabled(blueprint) else ""
        )
        reason = f"prefix_aware: Ray Serve LLM's PrefixCacheAffinityRouter{direct} (docs/serving.md)"
    return {"request_router": chosen, "request_router_reason": reason}
