"""Overload protection of the shared app over real HTTP (uvicorn on loopback, the tiny engine).

Size limit, bounded queue, disconnects and draining; the same app under Ray Serve is covered by
test_overload_local.py. Timing bounds are generous: tight figures live in benchmarks/.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from serving_support import held_post, metric_value, sse_events, uvicorn_app, wait_for_metrics

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.serving_limits import (
    drain_grace_s,
    queue_limit,
    request_bytes,
    termination_grace_s,
)
from llmctl.serving.common.api import build_app
from llmctl.serving.common.limits import Limits
from llmctl.serving.common.overload import OverloadConfig

LIMITS = Limits(max_context=256, max_new_tokens=200)
TEN_MB = 10 * 1024 * 1024


_metric = metric_value


def _chat(tokens: int, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": tokens,
        "temperature": 0,
        "stream": stream,
    }


def test_limits_derive_from_the_blueprint() -> None:
    bp = load_blueprint("tiny-cpu")
    assert request_bytes(bp) == 2048 * 32 + 64 * 1024
    assert queue_limit(bp) == bp.serving.max_concurrent_requests == 4
    assert drain_grace_s(bp) == 256 // 5 + 1 + 10  # 256 tokens at 5 tokens/s, plus the margin
    assert termination_grace_s(bp) == 5 + drain_grace_s(bp) + 10
    data = bp.model_dump(mode="json")
    data["serving"].update({"max_queued_requests": 0, "max_request_bytes": 4096})
    custom = Blueprint.model_validate(data)
    assert (queue_limit(custom), request_bytes(custom)) == (0, 4096)
    data["serving"]["max_queued_reqests"] = 1
    with pytest.raises(ValueError, match="max_queued_reqests"):
        Blueprint.model_validate(data)


def test_a_huge_body_is_refused_before_parsing(engine: Any) -> None:
    app = build_app(engine, LIMITS, overload=OverloadConfig(request_bytes=64 * 1024))
    body = b'{"model": "tiny", "prompt": "' + b"a" * TEN_MB + b'"}'
    with uvicorn_app(app) as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        started = time.perf_counter()
        refused = client.post("/v1/completions", content=body, headers={"content-type": "application/json"})
        elapsed = time.perf_counter() - started
        assert refused.status_code == 413, refused.text
        error = refused.json()["error"]
        assert error["code"] == "request_too_large" and "65536 bytes" in error["message"]
        assert elapsed < 2.0  # generous: the benchmark records the real figure

        def chunks() -> Any:  # no Content-Length: counted while read
            for _ in range(20):
                yield b"a" * 8192

        chunked = client.post("/v1/completions", content=chunks())
        assert chunked.status_code == 413
        ok = client.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2})
        assert ok.status_code == 200  # the connection and the server keep serving
        metrics = client.get("/metrics").text
        assert _metric(metrics, "llmctl_requests_rejected_total", reason="too_large", status="413") == 2


def test_a_burst_beyond_the_queue_is_refused_fast_with_a_retry_hint(engine: Any) -> None:
    slots, queue = 2, 2
    app = build_app(engine, LIMITS, overload=OverloadConfig(request_bytes=1 << 20, slots=slots, queue=queue))

    async def burst(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            return await asyncio.gather(
                *(client.post("/v1/chat/completions", json=_chat(24)) for _ in range(10 * (slots + queue)))
            )

    with uvicorn_app(app) as (url, _):
        started = time.perf_counter()
        answers = asyncio.run(burst(url))
        assert time.perf_counter() - started < 60  # nothing hangs
        codes = [a.status_code for a in answers]
        assert set(codes) <= {200, 429}
        # the first slots + queue to arrive always find a place
        assert slots + queue <= codes.count(200) and codes.count(429) >= 10 * (slots + queue) - 2 * (
            slots + queue
        )
        for answer in answers:
            if answer.status_code == 200:
                assert answer.json()["usage"]["completion_tokens"] == 24
            else:
                assert answer.headers["retry-after"] == "1"
                assert answer.json()["error"]["code"] == "rate_limit_exceeded"
        metrics = httpx.get(f"{url}/metrics").text
        assert _metric(metrics, "llmctl_requests_rejected_total", reason="queue_full") == codes.count(429)
        assert _metric(metrics, "llmctl_slots_in_use") == 0 and _metric(metrics, "llmctl_queue_depth") == 0


def test_exactly_slots_plus_queue_are_admitted_and_the_next_is_refused(engine: Any) -> None:
    """Requests held open (their bodies not yet complete) keep their places: 2 slots and 2 queued
    are taken, the fifth is refused at once, and all four held ones are answered once released."""
    slots, queue = 2, 2
    app = build_app(engine, LIMITS, overload=OverloadConfig(request_bytes=1 << 20, slots=slots, queue=queue))

    async def scenario(url: str) -> tuple[list[httpx.Response], httpx.Response, str, str]:
        release = asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            held = [
                asyncio.create_task(held_post(client, "/v1/chat/completions", _chat(2), release))
                for _ in range(slots + queue)
            ]
            full = await wait_for_metrics(
                client, "/metrics", {"llmctl_slots_in_use": slots, "llmctl_queue_depth": queue}
            )
            refused = await client.post("/v1/chat/completions", json=_chat(2))
            release.set()
            answers = await asyncio.gather(*held)
            return answers, refused, full, (await client.get("/metrics")).text

    with uvicorn_app(app) as (url, _):
        answers, refused, full, after = asyncio.run(scenario(url))
    assert _metric(full, "llmctl_requests_rejected_total", reason="queue_full") == 0
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert "(2 requests in flight, 2 waiting)" in refused.json()["error"]["message"]
    assert [a.status_code for a in answers] == [200] * (slots + queue)
    assert _metric(after, "llmctl_requests_rejected_total", reason="queue_full") == 1
    assert _metric(after, "llmctl_slots_in_use") == 0 and _metric(after, "llmctl_queue_depth") == 0


def test_with_no_queue_the_request_after_the_last_slot_is_refused(engine: Any) -> None:
    app = build_app(engine, LIMITS, overload=OverloadConfig(request_bytes=1 << 20, slots=3, queue=0))

    async def scenario(url: str) -> tuple[list[httpx.Response], httpx.Response]:
        release = asyncio.Event()
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            held = [
                asyncio.create_task(
                    held_post(
                        client, "/v1/completions", {"model": "tiny", "prompt": "hi", "max_tokens": 2}, release
                    )
                )
                for _ in range(3)
            ]
            await wait_for_metrics(client, "/metrics", {"llmctl_slots_in_use": 3, "llmctl_queue_depth": 0})
            refused = await client.post(
                "/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2}
            )
            release.set()
            return await asyncio.gather(*held), refused

    with uvicorn_app(app) as (url, _):
        answers, refused = asyncio.run(scenario(url))
    assert refused.status_code == 429 and "(3 requests in flight, 0 waiting)" in refused.text
    assert [a.status_code for a in answers] == [200] * 3


def test_dropped_streams_free_their_slots(engine: Any) -> None:
    app = build_app(engine, LIMITS, overload=OverloadConfig(request_bytes=1 << 20, slots=8, queue=0))

    async def drop(url: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            for _ in range(8):
                async with client.stream("POST", "/v1/chat/completions", json=_chat(200, True)) as r:
                    assert r.status_code == 200
                    async for _line in r.aiter_lines():
                        break  # the first chunk, then the client goes away

    with uvicorn_app(app) as (url, _):
        asyncio.run(drop(url))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _metric(httpx.get(f"{url}/metrics").text, "llmctl_slots_in_use") == 0:
                break
            time.sleep(0.05)
        metrics = httpx.get(f"{url}/metrics").text
        assert _metric(metrics, "llmctl_slots_in_use") == 0
        assert _metric(metrics, "llmctl_requests_in_flight") == 0  # the generations stopped too
        # all 8 slots are free again: 8 concurrent requests are admitted at once
        done = asyncio.run(_many(url, 8, 4))
        assert [r.status_code for r in done] == [200] * 8


async def _many(url: str, count: int, tokens: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        return await asyncio.gather(
            *(client.post("/v1/chat/completions", json=_chat(tokens)) for _ in range(count))
        )


async def _stream(client: httpx.AsyncClient, started: asyncio.Event, counter: list[int]) -> list[str]:
    lines: list[str] = []
    async with client.stream("POST", "/v1/chat/completions", json=_chat(200, True)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: ") and not lines:
                counter[0] += 1
                if counter[0] == 4:
                    started.set()
            lines.append(line)
    return sse_events(lines)


def test_drain_turns_readiness_off_then_ends_streams_with_an_error_event(engine: Any) -> None:
    app = build_app(engine, LIMITS, overload=OverloadConfig(request_bytes=1 << 20, slots=4, queue=2))

    async def scenario(url: str, loop: asyncio.AbstractEventLoop) -> tuple[list[list[str]], Any, Any]:
        started, counter = asyncio.Event(), [0]
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            streams = [asyncio.create_task(_stream(client, started, counter)) for _ in range(4)]
            await asyncio.wait_for(started.wait(), 30)
            drain = asyncio.run_coroutine_threadsafe(app.state.admission.drain(0.0), loop)
            await asyncio.sleep(0.05)
            health = await client.get("/healthz")
            refused = await client.post("/v1/chat/completions", json=_chat(2))
            events = await asyncio.gather(*streams)
            return events, (health, refused), await asyncio.wrap_future(drain)

    with uvicorn_app(app) as (url, loop):
        events, (health, refused), summary = asyncio.run(scenario(url, loop))
    assert health.status_code == 503 and health.json()["status"] == "draining"
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "server_shutting_down"
    assert summary["in_flight"] == 4 and summary["left"] == 0 and summary["aborted"] >= 1
    for stream in events:
        assert stream[-1] == "[DONE]"
        last = json.loads(stream[-2])
        if "error" in last:
            assert last["error"]["code"] == "server_shutting_down"
        else:
            assert last["choices"][0]["finish_reason"] in ("length", "stop")
    assert any("error" in json.loads(stream[-2]) for stream in events)


def test_the_drain_marker_of_a_pods_prestop_hook_drains_the_app(engine: Any, tmp_path: Any) -> None:
    marker = tmp_path / "drain"
    config = OverloadConfig(request_bytes=1 << 20, slots=2, queue=0, grace_s=5.0, drain_file=str(marker))
    app = build_app(engine, LIMITS, overload=config)
    with uvicorn_app(app) as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        assert client.get("/healthz").status_code == 200
        marker.write_text("stop")  # what `python -m llmctl.serving.drain` does
        idle = tmp_path / "drain.idle"
        deadline = time.monotonic() + 10
        while not idle.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(idle.read_text())["left"] == 0
        assert client.get("/healthz").json()["status"] == "draining"
        refused = client.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        metrics = client.get("/metrics").text
        assert _metric(metrics, "llmctl_draining") == 1
        assert _metric(metrics, "llmctl_requests_rejected_total", reason="draining", status="503") == 1
