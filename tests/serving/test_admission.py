"""The overload guard's decisions, called directly (no server, no engine): which request takes a
slot, which waits, which is refused and how, at each limit and on both sides of it.

test_overload.py checks the same guard over real HTTP; these run in milliseconds, so they are also
what `make mutation` runs against serving/common/overload.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any, TypeVar

import pytest
from prometheus_client import generate_latest
from serving_support import metric_value

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.serving_limits import drain_grace_s, queue_limit, request_bytes
from llmctl.serving.common.metrics import Metrics
from llmctl.serving.common.overload import (
    DRAIN_FILE_ENV,
    Admission,
    OverloadConfig,
    OverloadGuard,
    Refused,
)

Message = dict[str, Any]
T = TypeVar("T")


def admission(slots: int | None, queue: int = 0, **config: Any) -> tuple[Admission, list[str]]:
    aborted: list[str] = []

    def abort(reason: str) -> int:
        aborted.append(reason)
        return 3

    return Admission(
        OverloadConfig(request_bytes=100, slots=slots, queue=queue, **config), Metrics("m"), abort
    ), aborted


def gauges(adm: Admission) -> tuple[float, float]:
    text = generate_latest(adm.metrics.registry).decode()
    return metric_value(text, "llmctl_slots_in_use"), metric_value(text, "llmctl_queue_depth")


def run(coro: Awaitable[T]) -> T:
    """Run a scenario; one that hangs (a waiter never woken) fails within seconds, not never."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, 5)

    return asyncio.run(bounded())


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_slots_then_exactly_the_queue_then_429_naming_both_limits() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=2, queue=2)
        await adm.enter()
        await adm.enter()
        assert (adm.active, adm.waiting) == (2, 0) and gauges(adm) == (2, 0)
        waiters = [asyncio.create_task(adm.enter()) for _ in range(2)]
        await settle()
        assert (adm.active, adm.waiting) == (2, 2) and gauges(adm) == (2, 2)
        with pytest.raises(Refused) as refused:
            await adm.enter()
        error = refused.value.error
        assert (error.status, error.code, refused.value.reason, refused.value.retry_after_s) == (
            429,
            "rate_limit_exceeded",
            "queue_full",
            1,
        )
        assert error.type == "rate_limit_error"
        assert error.message == "the server is at capacity (2 requests in flight, 2 waiting); retry after 1s"
        # one slot given back: exactly one waiter takes it, the other keeps waiting
        await adm.leave()
        await settle()
        assert sum(w.done() for w in waiters) == 1 and (adm.active, adm.waiting) == (2, 1)
        assert gauges(adm) == (2, 1)
        await adm.leave()
        await asyncio.gather(*waiters)
        assert (adm.active, adm.waiting) == (2, 0) and gauges(adm) == (2, 0)
        await adm.leave()
        await adm.leave()
        assert (adm.active, adm.waiting) == (0, 0) and gauges(adm) == (0, 0)

    run(scenario())


def test_no_queue_refuses_the_request_after_the_last_slot() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=1, queue=0)
        await adm.enter()
        with pytest.raises(Refused, match=r"\(1 requests in flight, 0 waiting\)"):
            await adm.enter()
        assert (adm.active, adm.waiting) == (1, 0)
        await adm.leave()
        await adm.enter()  # the slot is free again
        assert adm.active == 1

    run(scenario())


def test_without_a_slot_bound_every_request_is_admitted() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=None)
        for _ in range(50):
            await adm.enter()
        assert (adm.active, adm.waiting) == (50, 0)

    run(scenario())


def test_draining_refuses_new_and_waiting_requests_with_503() -> None:
    async def scenario() -> None:
        adm, aborted = admission(slots=1, queue=1)
        await adm.enter()
        waiter = asyncio.create_task(adm.enter())
        await settle()
        assert metric_value(generate_latest(adm.metrics.registry).decode(), "llmctl_draining") == 0
        drain = asyncio.create_task(adm.drain(5.0))
        await settle()
        assert metric_value(generate_latest(adm.metrics.registry).decode(), "llmctl_draining") == 1
        with pytest.raises(Refused) as refused:
            await waiter
        error = refused.value.error
        assert (error.status, error.code, error.type, refused.value.reason) == (
            503,
            "server_shutting_down",
            "server_error",
            "draining",
        )
        assert refused.value.retry_after_s == 1 and adm.waiting == 0
        with pytest.raises(Refused, match="shutting down"):
            await adm.enter()
        assert not drain.done()  # the request in flight still has its grace period
        loop = asyncio.get_running_loop()
        left_at = loop.time()
        await adm.leave()
        summary = await drain
        # the drain notices within its 50 ms poll (1 s is a bound a busy machine keeps)
        assert loop.time() - left_at < 1.0
        assert (summary["in_flight"], summary["aborted"], summary["left"]) == (1, 0, 0)
        assert summary["seconds"] < 5.0 and aborted == []

    run(scenario())


def test_a_drain_whose_grace_runs_out_aborts_what_is_left() -> None:
    async def scenario() -> None:
        adm, aborted = admission(slots=2)
        await adm.enter()

        async def finish_when_aborted() -> None:
            while not aborted:
                await asyncio.sleep(0.01)
            await adm.leave()

        finisher = asyncio.create_task(finish_when_aborted())
        loop = asyncio.get_running_loop()
        started = loop.time()
        summary = await adm.drain(0.1)
        await finisher
        # the abort is noticed within the 50 ms poll, not at the 5 s limit (1 s: a busy machine's bound)
        assert loop.time() - started < 1.0
        assert (summary["in_flight"], summary["aborted"], summary["left"]) == (1, 3, 0)
        assert aborted == ["the server is shutting down and the drain grace period ran out"]
        assert summary["seconds"] >= 0.1

    run(scenario())


def test_requests_still_running_after_the_abort_get_five_more_seconds_then_are_reported_left() -> None:
    async def scenario() -> dict[str, Any]:
        adm, aborted = admission(slots=2)
        await adm.enter()  # a request the abort does not end
        summary = await asyncio.wait_for(adm.drain(0.0), 10)
        assert aborted and adm.active == 1
        return summary

    summary = asyncio.run(scenario())
    assert (summary["in_flight"], summary["aborted"], summary["left"]) == (1, 3, 1)
    assert 5.0 <= summary["seconds"] < 5.9  # the 5 s wait after the abort, polled every 50 ms


def test_an_idle_drain_aborts_nothing_and_uses_the_configured_grace() -> None:
    async def scenario() -> None:
        adm, aborted = admission(slots=2, grace_s=0.0)
        summary = await adm.drain()
        assert summary == {"in_flight": 0, "aborted": 0, "left": 0, "seconds": summary["seconds"]}
        assert aborted == [] and adm.draining

    run(scenario())


def test_the_drain_marker_starts_the_drain_and_the_idle_file_holds_its_summary(tmp_path: Path) -> None:
    async def scenario() -> dict[str, Any]:
        adm, _ = admission(slots=2, grace_s=0.0)
        marker = tmp_path / "drain"
        watcher = asyncio.create_task(adm.watch(str(marker), period_s=0.01))
        await asyncio.sleep(0.05)
        assert not adm.draining
        marker.write_text("stop")
        await asyncio.wait_for(watcher, 5)
        assert adm.draining
        return dict(json.loads((tmp_path / "drain.idle").read_text()))

    assert run(scenario())["left"] == 0


def test_the_drain_marker_is_polled_twice_a_second_by_default(tmp_path: Path) -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=2, grace_s=0.0)
        marker = tmp_path / "drain"
        watcher = asyncio.create_task(adm.watch(str(marker)))
        await settle()
        marker.write_text("stop")
        await asyncio.wait_for(watcher, 1.2)  # seen at the next 0.5 s poll

    run(scenario())


def test_the_config_derives_from_the_blueprint_and_the_drain_file_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bp = load_blueprint("tiny-cpu")
    monkeypatch.delenv(DRAIN_FILE_ENV, raising=False)
    config = OverloadConfig.from_blueprint(bp)
    assert config == OverloadConfig(
        request_bytes=request_bytes(bp),
        slots=bp.serving.max_concurrent_requests,
        queue=queue_limit(bp),
        retry_after_s=1,
        grace_s=float(drain_grace_s(bp)),
        drain_file=None,
    )
    monkeypatch.setenv(DRAIN_FILE_ENV, "/tmp/drain")
    assert OverloadConfig.from_blueprint(bp).drain_file == "/tmp/drain"
    assert OverloadConfig.for_context(1000) == OverloadConfig(request_bytes=1000 * 32 + 64 * 1024)
    # plain uvicorn (tests, benchmarks): no slot bound, no queue, 1 s retry hint, 30 s grace
    bare = OverloadConfig(request_bytes=1)
    with pytest.raises(FrozenInstanceError):
        bare.queue = 3  # type: ignore[misc]
    assert (bare.slots, bare.queue, bare.retry_after_s, bare.grace_s, bare.drain_file) == (
        None,
        0,
        1,
        30.0,
        None,
    )


# --- the ASGI middleware ---------------------------------------------------------------------------


def scope(path: str, headers: list[tuple[bytes, bytes]]) -> Message:
    return {"type": "http", "path": path, "raw_path": path.encode(), "root_path": "", "headers": headers}


async def call(guard: Guarded, request: Message, body: list[Message]) -> tuple[list[Message], list[Message]]:
    """Run the guard; what it sent, and what the app behind it received."""
    sent: list[Message] = []
    pending = list(body)
    guard.reads = 0

    async def receive() -> Message:
        guard.reads += 1
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    guard.received.clear()
    await guard.guard(request, receive, send)
    return sent, list(guard.received)


class Guarded:
    """The guard in front of an app that reads the whole body, notes how many slots were taken
    when it ran and what it received, then answers 200."""

    def __init__(self, adm: Admission, seen: list[int]) -> None:
        self.received: list[Message] = []
        self.reads = 0  # messages read from the client
        self.read_before_app = 0  # of which before the app ran

        async def app(scope: Message, receive: Callable[[], Awaitable[Message]], send: Any) -> None:
            seen.append(adm.active)
            self.read_before_app = self.reads
            while True:
                message = await receive()
                self.received.append(message)
                if not message.get("more_body", False):
                    break
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        self.guard = OverloadGuard(app, admission=adm)  # type: ignore[arg-type]


def guard_with(adm: Admission, seen: list[int]) -> Guarded:
    return Guarded(adm, seen)


def status(sent: list[Message]) -> int:
    return int(sent[0]["status"])


def test_a_body_is_refused_above_the_limit_and_admitted_at_it() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=4)
        seen: list[int] = []
        guard = guard_with(adm, seen)
        at = [{"type": "http.request", "body": b"x" * 100, "more_body": False}]
        sent, _ = await call(guard, scope("/v1/completions", [(b"content-length", b"100")]), at)
        assert status(sent) == 200 and seen == [1] and adm.active == 0
        assert guard.read_before_app == 0  # a body with a Content-Length is left to the app to read
        sent, _ = await call(guard, scope("/v1/completions", [(b"Content-Length", b"101")]), at)
        assert status(sent) == 413 and seen == [1]
        error = json.loads(sent[1]["body"])["error"]
        assert error["code"] == "request_too_large"
        assert error["message"].startswith(
            "the request body is 101 bytes; this endpoint accepts at most 100 bytes"
        )
        assert dict(sent[0]["headers"])[b"content-length"] == str(len(sent[1]["body"])).encode()
        assert b"retry-after" not in dict(sent[0]["headers"])
        text = generate_latest(adm.metrics.registry).decode()
        assert metric_value(text, "llmctl_requests_rejected_total", reason="too_large", status="413") == 1

    run(scenario())


def test_a_chunked_body_is_counted_while_read_and_replayed_whole_when_small_enough() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=4)
        seen: list[int] = []
        guard = guard_with(adm, seen)
        chunked = [(b"transfer-encoding", b"chunked")]
        small = [
            {"type": "http.request", "body": b"x" * 60, "more_body": True},
            {"type": "http.request", "body": b"x" * 40, "more_body": False},
        ]
        sent, got = await call(guard, scope("/v1/chat/completions", chunked), small)
        assert status(sent) == 200 and [m["body"] for m in got] == [b"x" * 60, b"x" * 40]
        assert guard.read_before_app == 2  # a body of unknown length is counted before admission
        assert guard.reads == 2  # the body, and not one message past its end
        big = [
            {"type": "http.request", "body": b"x" * 60, "more_body": True},
            {"type": "http.request", "body": b"x" * 41, "more_body": True},
            {"type": "http.request", "body": b"x", "more_body": False},
        ]
        sent, _ = await call(guard, scope("/v1/chat/completions", chunked), big)
        assert status(sent) == 413 and seen == [1] and guard.reads == 2  # stops reading at the limit
        assert "more than 100 bytes" in json.loads(sent[1]["body"])["error"]["message"]
        text = generate_latest(adm.metrics.registry).decode()
        assert metric_value(text, "llmctl_requests_rejected_total", reason="too_large", status="413") == 1
        # ASGI's more_body defaults to false: a message without it is the end of the body
        last = [{"type": "http.request", "body": b"x" * 10}]
        sent, got = await call(guard, scope("/v1/chat/completions", chunked), last)
        assert status(sent) == 200 and got == last and guard.reads == 1
        # a disconnect before the end of the body is passed on to the app, not an error
        sent, got = await call(guard, scope("/v1/chat/completions", chunked), [])
        assert status(sent) == 200 and got == [{"type": "http.disconnect"}]

    run(scenario())


def test_a_broken_content_length_is_read_as_a_body_of_unknown_length() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=4)
        guard = guard_with(adm, [])
        body = [{"type": "http.request", "body": b"x" * 101, "more_body": False}]
        sent, _ = await call(guard, scope("/v1/completions", [(b"content-length", b"ten")]), body)
        assert status(sent) == 413

    run(scenario())


def test_only_generation_routes_take_a_slot_and_refusals_are_counted() -> None:
    async def scenario() -> None:
        adm, _ = admission(slots=1, queue=0)
        seen: list[int] = []
        guard = guard_with(adm, seen)
        await adm.enter()  # the only slot is taken
        for path in ("/v1/models", "/healthz", "/metrics"):
            sent, _ = await call(guard, scope(path, []), [])
            assert status(sent) == 200
        for path in ("/v1/chat/completions", "/v1/completions", "/infer"):
            sent, _ = await call(guard, scope(path, []), [])
            assert status(sent) == 429 and dict(sent[0]["headers"])[b"retry-after"] == b"1"
        assert seen == [1, 1, 1]
        text = generate_latest(adm.metrics.registry).decode()
        assert metric_value(text, "llmctl_requests_rejected_total", reason="queue_full", status="429") == 3

    run(scenario())


def test_a_websocket_or_lifespan_scope_passes_straight_through() -> None:
    async def scenario() -> list[str]:
        adm, _ = admission(slots=0)
        seen: list[str] = []

        async def app(scope: Message, receive: Any, send: Any) -> None:
            seen.append(scope["type"])

        guard = OverloadGuard(app, admission=adm)  # type: ignore[arg-type]

        async def nothing() -> Message:
            return {}

        async def ignore(message: Message) -> None:
            return None

        await guard({"type": "lifespan"}, nothing, ignore)
        return seen

    assert run(scenario()) == ["lifespan"]
