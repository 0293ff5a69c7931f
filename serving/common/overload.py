"""Overload protection of the shared app: request-size limit, bounded queue, draining.

:class:`OverloadGuard` is an ASGI middleware that runs before the body is parsed or tokenised:

- a body over ``request_bytes`` is refused with 413 from its ``Content-Length`` alone (a chunked
  body is counted while it is read, up to the limit);
- a generation request (chat, completions, ``/infer``) takes one of ``slots`` places; up to
  ``queue`` more wait for one; beyond that the answer is 429 with ``Retry-After`` at once;
- while draining, new generation requests get 503 with ``Retry-After`` and requests still waiting
  for a slot are refused the same way; the slot is held until the response has been sent, so a
  stream keeps it until it ends or its client goes away (cancellation frees it).

:class:`Admission` holds the counts; :meth:`Admission.drain` is what a stopping replica runs:
readiness (``/healthz``) turns 503 first, in-flight requests get ``grace_s`` to finish, and then
the engine ends what is left with an error event (see ``ThreadedEngine.abort_all``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmctl.serving.common.auth import _route_path
from llmctl.serving.common.metrics import Metrics
from llmctl.serving.common.protocol import APIError

if TYPE_CHECKING:  # starlette comes with the serving extra
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

GENERATION_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/infer"})
DRAIN_FILE_ENV = "LLMCTL_DRAIN_FILE"


@dataclass(frozen=True)
class OverloadConfig:
    """Per-replica limits (see :mod:`llmctl.blueprints.serving_limits` for the derivation)."""

    request_bytes: int
    slots: int | None = None  # None: no bound (plain uvicorn tests and benchmarks)
    queue: int = 0
    retry_after_s: int = 1
    grace_s: float = 30.0
    drain_file: str | None = None

    @classmethod
    def for_context(cls, max_context: int) -> OverloadConfig:
        """Only the size limit, derived from a context length (no queue bound)."""
        from llmctl.blueprints.serving_limits import BODY_OVERHEAD_BYTES, BYTES_PER_TOKEN

        return cls(request_bytes=max_context * BYTES_PER_TOKEN + BODY_OVERHEAD_BYTES)

    @classmethod
    def from_blueprint(cls, blueprint: Any) -> OverloadConfig:
        """The blueprint's limits; the drain file comes from ``$LLMCTL_DRAIN_FILE`` (set in pods)."""
        from llmctl.blueprints import serving_limits as sl

        return cls(
            request_bytes=sl.request_bytes(blueprint),
            slots=blueprint.serving.max_concurrent_requests,
            queue=sl.queue_limit(blueprint),
            retry_after_s=sl.RETRY_AFTER_S,
            grace_s=float(sl.drain_grace_s(blueprint)),
            drain_file=os.environ.get(DRAIN_FILE_ENV) or None,
        )


class Refused(Exception):
    """A request turned away by the guard (carries the OpenAI error and a Retry-After)."""

    def __init__(self, error: APIError, reason: str, retry_after_s: int | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.reason = reason
        self.retry_after_s = retry_after_s


class Admission:
    """Slots and the bounded queue of one replica (one event loop)."""

    def __init__(self, config: OverloadConfig, metrics: Metrics, abort: Callable[[str], int]) -> None:
        self.config = config
        self.metrics = metrics
        self._abort = abort
        self.active = 0
        self.waiting = 0
        self.draining = False
        self._changed: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _publish(self) -> None:
        self.metrics.queue_depth.labels(self.metrics.model).set(self.waiting)
        self.metrics.slots_in_use.labels(self.metrics.model).set(self.active)

    def _refuse_draining(self) -> Refused:
        error = APIError(
            503,
            "this replica is shutting down; retry the request",
            type="server_error",
            code="server_shutting_down",
        )
        return Refused(error, "draining", self.config.retry_after_s)

    async def enter(self) -> None:
        """Take a slot (waiting in the bounded queue if need be), or raise :class:`Refused`."""
        slots = self.config.slots
        if self.draining:
            raise self._refuse_draining()
        if slots is None or self.active < slots:
            self.active += 1
            self._publish()
            return
        if self.waiting >= self.config.queue:
            error = APIError(
                429,
                f"the server is at capacity ({slots} requests in flight, {self.config.queue} waiting); "
                f"retry after {self.config.retry_after_s}s",
                type="rate_limit_error",
                code="rate_limit_exceeded",
            )
            raise Refused(error, "queue_full", self.config.retry_after_s)
        cond = self._cond()
        self.waiting += 1
        self._publish()
        try:
            async with cond:
                await cond.wait_for(lambda: self.draining or self.active < slots)
                if self.draining:
                    raise self._refuse_draining()
                self.active += 1
        finally:
            self.waiting -= 1
            self._publish()

    async def leave(self) -> None:
        """Give the slot back and wake one waiter."""
        self.active -= 1
        self._publish()
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def drain(self, grace_s: float | None = None) -> dict[str, Any]:
        """Stop admitting, let in-flight requests finish within ``grace_s``, then end the rest."""
        grace = self.config.grace_s if grace_s is None else grace_s
        started = time.monotonic()
        self.draining = True
        self.metrics.draining.labels(self.metrics.model).set(1)
        cond = self._cond()
        async with cond:
            cond.notify_all()  # waiters are refused with 503
        in_flight = self.active
        deadline = started + grace
        while self.active > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        aborted = 0
        if self.active > 0:
            aborted = self._abort("the server is shutting down and the drain grace period ran out")
            end = time.monotonic() + 5.0
            while self.active > 0 and time.monotonic() < end:
                await asyncio.sleep(0.05)
        return {
            "in_flight": in_flight,
            "aborted": aborted,
            "left": self.active,
            "seconds": round(time.monotonic() - started, 3),
        }

    async def watch(self, path: str, period_s: float = 0.5) -> None:
        """Drain when ``path`` appears (a pod's preStop hook creates it); write ``path.idle`` after."""
        marker = Path(path)
        while not marker.exists():
            await asyncio.sleep(period_s)
        summary = await self.drain()
        with contextlib.suppress(OSError):
            marker.with_name(marker.name + ".idle").write_text(json.dumps(summary))


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _has_body(scope: Scope) -> bool:
    return any(
        name.lower() in (b"content-length", b"transfer-encoding") for name, _ in scope.get("headers", [])
    )


async def send_error(send: Send, error: APIError, retry_after_s: int | None = None) -> None:
    """An OpenAI error body (``Connection: close`` when the client may still be sending)."""
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after_s is not None:
        headers.append((b"retry-after", str(retry_after_s).encode()))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class OverloadGuard:
    """ASGI middleware: size limit, admission and draining in front of the OpenAI routes."""

    def __init__(self, app: ASGIApp, *, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    def _too_large(self, size: int | None) -> APIError:
        limit = self.admission.config.request_bytes
        got = f"{size} bytes" if size is not None else f"more than {limit} bytes"
        return APIError(
            413,
            f"the request body is {got}; this endpoint accepts at most {limit} bytes "
            "(serving.max_request_bytes, derived from the model's context length)",
            code="request_too_large",
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        metrics = self.admission.metrics
        path = _route_path(scope)
        limit = self.admission.config.request_bytes
        size = _content_length(scope)
        if size is not None and size > limit:
            metrics.rejected(path, 413, "too_large")
            await send_error(send, self._too_large(size))
            return
        if size is None and _has_body(scope):
            try:
                receive = await _buffer(receive, limit)
            except _TooLarge:
                metrics.rejected(path, 413, "too_large")
                await send_error(send, self._too_large(None))
                return
        if path not in GENERATION_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            await self.admission.enter()
        except Refused as refused:
            metrics.rejected(path, refused.error.status, refused.reason)
            await send_error(send, refused.error, refused.retry_after_s)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            await self.admission.leave()


async def _buffer(receive: Receive, limit: int) -> Receive:
    """Read a body of unknown length up to ``limit`` bytes; a receive that replays it."""
    messages: list[Message] = []
    total = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        total += len(message.get("body", b""))
        if total > limit:
            raise _TooLarge
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return replay
