"""Parsing a stream's recorded bytes after the window (client.parse_stream), on exact inputs.

Each read is a (arrival stamp, bytes) pair as the hot path keeps it; an event belongs to the read
that completed it (its blank line), whatever the other reads carried.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from llmctl.serving.client.bench.client import RequestRecord, StampingHandler, parse_stream


def _event(
    content: str | None = None, finish: str | None = None, usage: dict[str, int] | None = None
) -> bytes:
    chunk: dict[str, Any] = {
        "choices": [] if content is None else [{"delta": {"content": content}, "finish_reason": finish}]
    }
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _parsed(*reads: tuple[float, bytes]) -> RequestRecord:
    record = RequestRecord(index=0, endpoint="http://x/v1", status="received", raw=list(reads))
    parse_stream(record)
    return record


def test_each_chunk_takes_the_stamp_of_the_read_that_completed_its_event() -> None:
    first, second = _event("Hello"), _event(" world", "stop")
    usage = _event(usage={"prompt_tokens": 7, "completion_tokens": 2})
    record = _parsed(
        (1.0, first[:10]),  # half an event: nothing complete yet
        (2.0, first[10:] + second[:5]),  # completes "Hello"
        (3.0, second[5:] + usage + b"data: [DONE]\n\n"),
    )
    assert record.ok and not record.raw
    assert record.chunk_times == [2.0, 3.0] and record.chunk_texts == ["Hello", " world"]
    assert (record.usage_prompt_tokens, record.usage_completion_tokens) == (7, 2)
    assert record.finish_reason == "stop" and record.end == 3.0


def test_crlf_line_ends_comments_and_events_of_several_lines() -> None:
    payload = json.dumps({"choices": [{"delta": {"content": "a"}, "finish_reason": None}]}).encode()
    record = _parsed(
        (1.0, b": keep-alive\r\n\r\nevent: message\r\nid: 1\r\ndata: " + payload + b"\r\n\r"),
        (2.0, b"\n" + _event("b", "length").replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"),
    )
    assert record.ok and record.chunk_texts == ["a", "b"] and record.chunk_times == [2.0, 2.0]


def test_a_payload_that_is_not_one_json_value_fails_the_request_and_keeps_what_came_before() -> None:
    broken = b'data: {"choices": []} {"choices": []}\n\n'  # two values on one data line
    record = _parsed(
        (1.0, _event("kept")), (2.0, broken), (3.0, _event("lost", "stop") + b"data: [DONE]\n\n")
    )
    assert record.status == "error" and record.error_type == "bad_event"
    assert record.chunk_texts == ["kept"] and record.end == 2.0


def test_an_error_event_is_a_stream_error() -> None:
    record = _parsed((1.0, _event("x")), (2.0, b'data: {"error": {"message": "overloaded"}}\n\n'))
    assert (record.status, record.error_type, record.error) == ("error", "stream_error", "overloaded")
    assert record.chunk_texts == ["x"]


def test_a_stream_without_done_or_finish_reason_is_incomplete() -> None:
    record = _parsed((1.0, _event("x")), (2.0, _event("y")[:-1]))  # the last event never ended
    assert record.error_type == "incomplete_stream" and record.chunk_texts == ["x"]


def test_bytes_that_are_no_bytes_keep_the_arrival_stamp() -> None:
    """aiohttp's resume feeds the protocol no bytes (``data_received(b"")``, when a pause left
    something unparsed): the stamp stays the moment the last bytes came in, not that call's."""

    async def stamps() -> tuple[float, float]:
        handler = StampingHandler(loop=asyncio.get_running_loop())
        handler.data_received(b"HTTP/1.1 200 OK\r\n")
        came_in = handler.arrived
        time.sleep(0.002)
        handler.data_received(b"")
        return came_in, handler.arrived

    came_in, after = asyncio.run(stamps())
    assert came_in > 0 and after == came_in


def test_a_resume_feeds_the_parser_only_after_a_pause() -> None:
    """After each chunk a task reads, aiohttp resumes the protocol; with nothing paused that is no
    work at all, after a pause it is aiohttp's own resume (the parser fed, the flag cleared)."""

    async def fed_after(paused: bool) -> tuple[list[bytes], bool]:
        handler = StampingHandler(loop=asyncio.get_running_loop())
        fed: list[bytes] = []
        handler.data_received = fed.append  # type: ignore[method-assign]
        handler._reading_paused = paused
        handler.resume_reading()
        return fed, handler._reading_paused

    assert asyncio.run(fed_after(False)) == ([], False)
    assert asyncio.run(fed_after(True)) == ([b""], False)
