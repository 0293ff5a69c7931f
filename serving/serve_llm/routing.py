"""Which replica of a Ray Serve LLM deployment takes a request: ``serving.request_router``.

What Ray 2.58.0 ships and does (its wheel, paths under ``ray/``):

- Request routers are per deployment: ``deployment_config.request_router_config`` of the
  ``LLMConfig`` (``llm/_internal/serve/core/configs/llm_config.py`` lists it among the supported
  options) is Serve's ``RequestRouterConfig`` (``serve/config.py``): ``request_router_class`` (an
  import path, ``module:Class`` or ``module.Class``; the class is imported where the app is built and
  cloudpickled by value) and ``request_router_kwargs`` (passed to the class's ``initialize_state``).
- Ray Serve LLM's routers (``serve/llm/request_router.py``): ``PrefixCacheAffinityRouter`` (beta;
  ``llm/_internal/serve/routing_policies/prefix_aware/``) keeps a character prefix tree of the prompts
  each replica was sent in one detached ``LlmPrefixTreeActor`` per deployment, and sends a request to
  the replica whose tree matches most of its prompt (``messages`` / ``prompt``), or, below a 10% match,
  to the replica with the fewest characters in the tree; kwargs ``imbalanced_threshold`` (default
  inf: load is never considered), ``match_rate_threshold`` 0.1, ``do_eviction`` False and the eviction
  sizes. ``KVAwareRouter`` (alpha; ``routing_policies/kv_aware/``) scores replicas on the engines' KV
  events and needs ``ai-dynamo``'s ``SelectionService``, which ``ray[llm]`` does not install: without it
  every routed request fails with 503 (``kv_token_tracker.py`` ``select_worker``), so llmctl does not
  offer it.
- The default: Serve's ``PowerOfTwoChoicesRequestRouter`` (``serve/_private/constants.py``
  ``DEFAULT_REQUEST_ROUTER_PATH``); under direct streaming Ray Serve LLM sets ``RoundRobinRouter``
  instead when the config names none (``llm/_internal/serve/core/ingress/builder.py``
  ``_get_direct_streaming_serve_options``).
- Who picks under direct streaming (the fast path): HAProxy asks the ``LLMRouter`` deployment (the
  app's ``ingress_request_router``, one replica per proxy node) at ``POST /internal/route``; its
  handle to the ``LLMServer`` deployment runs the configured router class (``handle.choose_replica``
  with ``_reserve=False``) and HAProxy forwards the request straight to the picked replica
  (``llm/_internal/serve/core/ingress/router.py``). Two catches, both read from the code:

  1. HAProxy sends ``/internal/route`` an empty body unless
     ``RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY=1`` (``serve/_private/constants.py``, default
     False; ``serve/_private/ingress_request_router.lua.tmpl``): without it a prefix router sees no
     prompt and load-balances. Bodies above ``RAY_SERVE_HAPROXY_INGRESS_REQUEST_ROUTER_BUFSIZE``
     (256 KiB) are cut and no longer parse, so those requests load-balance too. The fast path's
     environment carries the switch when this router is on (infra/workload/builders/fast_path.py).
  2. On that pick-only path (``serve/_private/router.py`` ``choose_replica``, ``reserve=False``) Serve
     never calls the router's ``on_request_routed``, which is where ``PrefixCacheAffinityRouter``
     records the prompt in its tree (the only ``insert``). Its tree stays empty: every request is a
     0% match, all replicas tie as the smallest, and ``LLMRouter`` takes the first of the tie, so
     every request goes to one replica. :mod:`.prefix_router` records the pick itself on that path;
     the app names it instead of Ray's class when direct streaming is on.

  The hang of ray-project/ray#64326 (2.56: the raw body reached the router, which raised) was fixed by
  #64328 (``_parse_routing_payload``), cherry-picked into 2.56.1 (#64488); 2.58.0 has it.
- Ray 2.53.0 (the Neuron vLLM image's) has ``PrefixCacheAffinityRouter`` too, with no direct
  streaming; llmctl's Neuron engines run without prefix caching (serving/ray_vllm/app.py), so the
  blueprint rules refuse the router there (blueprints/request_router.py).

Pure: imports no Ray; the app builder calls :func:`request_router_config`.
"""

from __future__ import annotations

import os
from typing import Any

from llmctl.blueprints.schema import Blueprint

#: Ray Serve LLM's own prefix router (Ray >= 2.53: both pinned Rays ship it)
RAY_PREFIX_ROUTER = "ray.serve.llm.request_router:PrefixCacheAffinityRouter"
#: the same router recording its own picks, for direct streaming's pick-only path (prefix_router.py)
DIRECT_PREFIX_ROUTER = "llmctl.serving.serve_llm.prefix_router:DirectStreamingPrefixRouter"
#: what Ray Serve LLM's builder reads to serve by direct streaming (llm/_internal/serve/constants.py)
DIRECT_STREAMING_ENV = "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"


def direct_streaming() -> bool:
    """Whether this process builds the app for direct streaming, read as Ray Serve LLM reads it."""
    return os.environ.get(DIRECT_STREAMING_ENV, "0") == "1"


def request_router_config(blueprint: Blueprint, *, direct: bool | None = None) -> dict[str, Any] | None:
    """The deployment's ``request_router_config``, or None for Ray's default router.

    ``direct`` (default: :func:`direct_streaming`) picks the class: Ray's own on the default path,
    where Serve records each pick through ``on_request_routed``; llmctl's subclass under direct
    streaming, where Serve does not. Ray's kwargs are left at their defaults."""
    if blueprint.serving.request_router != "prefix_aware":
        return None
    direct = direct_streaming() if direct is None else direct
    return {"request_router_class": DIRECT_PREFIX_ROUTER if direct else RAY_PREFIX_ROUTER}
