"""Overload limits derived from a blueprint: request size, queue bound and the drain grace period.

One place for the figures the serving apps (`serving/common/overload.py`), the runtimes' own
configs (TorchServe, Triton, Ray Serve LLM) and the workload builders (`preStop`,
`terminationGracePeriodSeconds`) share, so the app and the pod agree on how long a drain may take.
"""

from __future__ import annotations

import math

from llmctl.blueprints.runtimes import runtime
from llmctl.blueprints.schema import Blueprint

#: bytes a request may spend per token of context: UTF-8 of a long token, JSON escaping (\\uXXXX)
BYTES_PER_TOKEN = 32
#: room for the JSON around the prompt (messages, roles, sampling fields)
BODY_OVERHEAD_BYTES = 64 * 1024
#: seconds the preStop hook keeps a pod serving after readiness turns false, so the endpoints
#: controller and the load balancer stop sending new requests before the server drains
PRESTOP_DELAY_S = 5
#: slack between the drain deadline and the kubelet's SIGKILL (error events, process exit)
STOP_MARGIN_S = 10
#: the longest grace period derived (one hour), whatever max_new_tokens asks for
MAX_GRACE_S = 3600
#: seconds a refused client is told to wait (Retry-After)
RETRY_AFTER_S = 1


def request_bytes(blueprint: Blueprint) -> int:
    """The largest request body accepted: the blueprint's, else derived from the context length."""
    explicit = blueprint.serving.max_request_bytes
    if explicit is not None:
        return explicit
    return blueprint.model.max_context * BYTES_PER_TOKEN + BODY_OVERHEAD_BYTES


def queue_limit(blueprint: Blueprint) -> int:
    """Requests that may wait per replica beyond the concurrent ones (default: as many again)."""
    queued = blueprint.serving.max_queued_requests
    return blueprint.serving.max_concurrent_requests if queued is None else queued


def drain_grace_s(blueprint: Blueprint) -> int:
    """Seconds in-flight requests get to finish once a replica drains.

    A request of ``serving.max_new_tokens`` at the runtime's slowest expected token rate (the
    registry's ``min_token_rate``), plus the margin, capped at :data:`MAX_GRACE_S`.
    """
    rate = runtime(blueprint.runtime).min_token_rate
    return int(min(MAX_GRACE_S, math.ceil(blueprint.serving.max_new_tokens / rate) + STOP_MARGIN_S))


def termination_grace_s(blueprint: Blueprint) -> int:
    """``terminationGracePeriodSeconds`` of a serving pod: preStop delay + drain + margin."""
    return PRESTOP_DELAY_S + drain_grace_s(blueprint) + STOP_MARGIN_S
