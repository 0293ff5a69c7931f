"""The engine-independent part of a Ray Serve LLM ``LLMConfig``, from a blueprint.

A Ray Serve LLM runtime passes its engine's kwargs and environment; everything Ray Serve LLM itself
reads (model loading, deployment options, callback) is set here the same way for
every such runtime. The field names are Ray Serve LLM's ``LLMConfig``
(``ray.llm._internal.serve.configs.server_models.LLMConfig`` in Ray 2.58).
"""

from __future__ import annotations

from typing import Any

from llmctl.blueprints import serving_limits
from llmctl.blueprints.schema import Blueprint
from llmctl.serving.common.ingress import autoscaling_config, shedding_options
from llmctl.serving.serve_llm.routing import request_router_config

#: the app args every Ray Serve LLM runtime accepts besides ``blueprint``
ARGS = frozenset({"model_source", "served_model_name", "num_replicas"})
# No ``accelerator_type``: Ray Serve LLM would add ``accelerator_type:<GPU>: 0.001`` to every placement
# bundle (Ray 2.58 ``core/configs/accelerators.py`` ``GPUAccelerator.default_bundles``), a resource the
# KubeRay autoscaler never sees on a worker group (``autoscaler/_private/kuberay/autoscaling_config.py``
# reads only the group's ``resources``, ``rayStartParams`` and container limits). A replica beyond the
# running workers would then look infeasible and no worker would be added. The worker group's
# nodeSelector already pins the instance type, so every GPU a replica can land on is the right one.


def model_source(blueprint: Blueprint, explicit: str | None) -> str | dict[str, str]:
    """The ``model_source`` arg, else the S3 mirror (``LLMCTL_MODEL_URI``), else the hub id.

    An ``s3://`` source becomes Ray Serve LLM's cloud mirror config: each replica downloads it
    before the engine loads, so the app builder (on the Ray head) never pulls weights itself.
    """
    from llmctl.serving.model_mirror import mirror_uri, split_s3_uri

    source = explicit or mirror_uri() or blueprint.model.id
    if source.startswith("s3://"):
        split_s3_uri(source)  # a malformed URI fails here with a clear message
        return {"bucket_uri": source}
    return source


def deployment_config(blueprint: Blueprint, options: dict[str, Any], *, backpressure: bool) -> dict[str, Any]:
    """Replicas (fixed by ``num_replicas`` or autoscaled), concurrency, shedding and drain.

    The request router is ``serving.request_router``'s (:mod:`.routing`; none: Ray's default).
    Shedding is Ray's: ``max_queued_requests`` bounds what waits for the LLM replicas (429 with
    ``Retry-After`` when the installed Ray takes ``backpressure_config``, else Ray's 503), and
    ``graceful_shutdown_timeout_s`` lets a stopping replica finish a generation.
    """
    config: dict[str, Any] = {
        "max_ongoing_requests": blueprint.serving.max_concurrent_requests,
        **shedding_options(
            blueprint.serving.max_concurrent_requests + serving_limits.queue_limit(blueprint),
            backpressure=backpressure,
        ),
        "graceful_shutdown_timeout_s": serving_limits.drain_grace_s(blueprint) + serving_limits.STOP_MARGIN_S,
    }
    if "num_replicas" in options:
        config["num_replicas"] = int(options["num_replicas"])
    else:
        config["autoscaling_config"] = autoscaling_config(blueprint)
    router = request_router_config(blueprint)  # serving.request_router (routing.py)
    if router is not None:
        config["request_router_config"] = router
    return config


def llm_config(
    blueprint: Blueprint,
    options: dict[str, Any],
    *,
    engine_kwargs: dict[str, Any],
    env: dict[str, str],
    callback_class: str | None = None,
    backpressure: bool = False,
) -> dict[str, Any]:
    """The ``LLMConfig`` (as a dict) around a runtime's ``engine_kwargs`` and replica ``env``."""
    config: dict[str, Any] = {
        "model_loading_config": {
            "model_id": options.get("served_model_name") or blueprint.model.id,
            "model_source": model_source(blueprint, options.get("model_source")),
        },
        "engine_kwargs": engine_kwargs,
        "deployment_config": deployment_config(blueprint, options, backpressure=backpressure),
        "runtime_env": {"env_vars": env},
    }
    if callback_class:
        config["callback_config"] = {"callback_class": callback_class}
    return config
