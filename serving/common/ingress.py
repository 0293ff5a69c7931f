"""The Ray Serve deployment around the shared FastAPI app.

:func:`build_application` is what each runtime's ``app_builder`` returns: one deployment whose
replicas build their engine (``engine_factory(blueprint, options)``), warm it up, and serve
:func:`llmctl.serving.common.api.build_app` through ``@serve.ingress``. An ``api_key`` arg (or
``$LLMCTL_API_KEY`` in the replica's environment) turns on the app's bearer-key check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmctl.blueprints import serving_limits
from llmctl.blueprints.schema import Blueprint
from llmctl.serving.common.auth import resolve_api_key
from llmctl.serving.common.deps import require
from llmctl.serving.common.engine import Engine
from llmctl.serving.common.limits import Limits

EngineFactory = Callable[[Blueprint, dict[str, Any]], Engine]

#: requests Ray may hand a replica beyond its slots and queue: the cheap routes (/healthz,
#: /metrics, /v1/models) and the drain call must reach a full replica, which refuses the rest itself
HEADROOM = 4


# Args every app built on the shared ingress accepts besides ``blueprint`` (each runtime adds its own).
SHARED_ARGS = frozenset(
    {"model_path", "served_model_name", "num_replicas", "num_cpus", "deployment_name", "api_key"}
)


def parse_args(
    args: dict[str, Any], allowed: frozenset[str] | None = None
) -> tuple[Blueprint, dict[str, Any]]:
    """Split ``app_builder`` args into the blueprint and the remaining overrides.

    With ``allowed``, any other key is refused (a typo in a Serve config fails at deploy time,
    not silently); the blueprint is validated with the same schema as the catalog.
    """
    from llmctl.errors import ServingError, did_you_mean

    if "blueprint" not in args:
        raise ServingError(
            "the serving app needs a 'blueprint' argument (Blueprint.model_dump(mode='json'))",
            "set applications[].args.blueprint in the Serve config",
        )
    options = {k: v for k, v in args.items() if k != "blueprint"}
    unknown = sorted(set(options) - allowed) if allowed is not None else []
    if unknown and allowed is not None:
        raise ServingError(
            f"unknown serving app argument(s): {', '.join(unknown)}",
            did_you_mean(unknown[0], sorted(allowed)) or f"accepted: blueprint, {', '.join(sorted(allowed))}",
        )
    raw = args["blueprint"]
    blueprint = raw if isinstance(raw, Blueprint) else Blueprint.model_validate(raw)
    return blueprint, options


def max_ongoing_requests(blueprint: Blueprint) -> int:
    """What Ray routes to one replica: twice its slots and queue, plus :data:`HEADROOM`.

    Beyond slots + queue the replica refuses at once (429), so the extra room lets a burst reach
    the replica and be refused there in milliseconds instead of waiting in Ray's proxy queue for
    a slot only to be refused then.
    """
    return 2 * (blueprint.serving.max_concurrent_requests + serving_limits.queue_limit(blueprint)) + HEADROOM


def shedding_options(max_queued: int, *, backpressure: bool) -> dict[str, Any]:
    """Ray's own bound on the requests a caller (proxy or handle) queues for a deployment.

    Ray counts a request as queued from its arrival until a replica is picked, so a burst that
    arrives at once is counted in full even when the replicas have room: the bound must cover
    what the replicas can take, not only what should wait. ``backpressure``: the installed Ray
    takes ``backpressure_config`` (2.58 and later), so refusals are 429 with ``Retry-After``
    instead of a bare 503.
    """
    out: dict[str, Any] = {"max_queued_requests": max(1, max_queued)}
    if backpressure:
        out["backpressure_config"] = {"status_code": 429, "retry_after_s": serving_limits.RETRY_AFTER_S}
    return out


def ray_supports_backpressure_config(serve: Any) -> bool:
    """Whether ``serve.deployment`` takes ``backpressure_config`` (Ray 2.58+)."""
    import inspect

    return "backpressure_config" in inspect.signature(serve.deployment).parameters


def deployment_options(
    blueprint: Blueprint,
    options: dict[str, Any],
    resources: dict[str, float] | None = None,
    *,
    backpressure: bool = False,
) -> dict[str, Any]:
    """Ray Serve deployment options from the blueprint (replicas, concurrency, shedding, resources)."""
    scaling = blueprint.scaling
    actor: dict[str, Any] = {"num_cpus": options.get("num_cpus", blueprint.compute.cpus_per_replica or 1)}
    if blueprint.compute.memory_gib_per_replica and "num_cpus" not in options:
        actor["memory"] = int(blueprint.compute.memory_gib_per_replica * 1024**3)
    if resources:
        actor["resources"] = resources
    out: dict[str, Any] = {
        "name": options.get("deployment_name", "openai"),
        "max_ongoing_requests": max_ongoing_requests(blueprint),
        # a backstop: the replicas shed first; a proxy holds at most what all of them can take
        **shedding_options(max_ongoing_requests(blueprint) * scaling.max_replicas, backpressure=backpressure),
        "ray_actor_options": actor,
        "health_check_period_s": 10,
        "health_check_timeout_s": 30,
        # Ray waits this long for a stopping replica's requests; the app's own drain ends them
        # (with an error event) STOP_MARGIN_S earlier
        "graceful_shutdown_timeout_s": serving_limits.drain_grace_s(blueprint) + serving_limits.STOP_MARGIN_S,
    }
    if "num_replicas" in options:
        out["num_replicas"] = int(options["num_replicas"])
    elif scaling.min_replicas == scaling.max_replicas:
        out["num_replicas"] = scaling.max_replicas
    else:
        out["autoscaling_config"] = autoscaling_config(blueprint)
    return out


def autoscaling_config(blueprint: Blueprint) -> dict[str, Any]:
    """Ray Serve's autoscaling_config from the blueprint's scaling section: ongoing requests per
    replica, the bounds (min_replicas 0 lets Serve stop the last replica; its proxy holds a request
    until one starts again), and the delays and the metrics window (`look_back_period_s`) when the
    blueprint sets them."""
    scaling = blueprint.scaling
    config: dict[str, Any] = {
        "min_replicas": scaling.min_replicas,
        "initial_replicas": scaling.replicas,
        "max_replicas": scaling.max_replicas,
        "target_ongoing_requests": scaling.target_ongoing_requests,
    }
    # Serve's own names; each only when the blueprint sets it (else Serve's default)
    for name in ("upscale_delay_s", "downscale_delay_s", "downscale_to_zero_delay_s", "look_back_period_s"):
        value = getattr(scaling, name)
        if value is not None:
            config[name] = value
    return config


def limits_for(blueprint: Blueprint, engine: Engine) -> Limits:
    """The request limits of a replica: the blueprint's, capped by what the engine supports."""
    return Limits(
        max_context=min(blueprint.model.max_context, engine.max_context),
        max_new_tokens=blueprint.serving.max_new_tokens,
    )


def build_application(
    args: dict[str, Any],
    engine_factory: EngineFactory,
    *,
    allowed: frozenset[str] = SHARED_ARGS,
    resources: dict[str, float] | None = None,
) -> Any:
    """A bound Ray Serve application (``serve.run`` it, or name it in a Serve config)."""
    blueprint, options = parse_args(args, allowed)
    serve = require("ray.serve")
    resolve_api_key(options.get("api_key"))  # an empty LLMCTL_API_KEY fails here, not in every replica

    class OpenAIServer:
        def __init__(self, blueprint_json: dict[str, Any], opts: dict[str, Any]) -> None:
            from llmctl.serving.common.api import build_app
            from llmctl.serving.common.overload import OverloadConfig

            bp = Blueprint.model_validate(blueprint_json)
            self.engine = engine_factory(bp, opts)
            self._asgi = build_app(
                self.engine,
                limits_for(bp, self.engine),
                api_key=opts.get("api_key"),
                overload=OverloadConfig.from_blueprint(bp),
            )
            self._healthy_logged = False

        def __serve_build_asgi_app__(self) -> Any:
            return self._asgi

        async def drain(self, grace_s: float | None = None) -> dict[str, Any]:
            """Stop admitting, let in-flight requests finish, end the rest with an error event."""
            summary: dict[str, Any] = await self._asgi.state.admission.drain(grace_s)
            return summary

        def check_health(self) -> None:
            if not self.engine.healthy():
                raise RuntimeError("the engine reported a failure; restarting the replica")
            if not self._healthy_logged:  # the first passing check: the start timeline's last phase
                from llmctl.serving.phases import log_phase

                log_phase("healthy", "done")
                self._healthy_logged = True

    ingress = serve.ingress()(OpenAIServer)
    backpressure = ray_supports_backpressure_config(serve)
    deployment = serve.deployment(
        ingress, **deployment_options(blueprint, options, resources, backpressure=backpressure)
    )
    return deployment.bind(blueprint.model_dump(mode="json"), options)
