"""Parsing a stream's recorded bytes after the window (client.parse_stream), on exact inputs.

Each read is a (arrival stamp, bytes) pair as the hot path keeps it; an event belongs to the read
that completed it (its blank line), whatever the other reads carried.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from llmctl.serving.client.bench.client import RequestRecord, parse_stream


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


@pytest.mark.parametrize(
    "reads",
    [
        [b"data: one\n\n", b"data: two\n\n"],  # an event a read: the common case
        [b"data: one\n\ndata: two\n\n"],  # two events in one read
        [b"data: on", b"e\n\ndata: two\n", b"\n"],  # events split across reads
        [b"data:one\r\n\r\n", b"data: two \n\n"],  # CRLF, no space, trailing blanks
        [b": comment\n\n", b"data: one\n\n", b"event: x\ndata: two\n\n"],  # not only data lines
        [b"data: one\n\n", b"data: tw", b"data: o\n\n"],  # a common read after a partial one
    ],
)
def test_every_way_of_splitting_events_into_reads_gives_the_same_lines(reads: list[bytes]) -> None:
    from llmctl.serving.client.bench.client import _data_lines

    raw = [(float(i), data) for i, data in enumerate(reads)]
    # the reference: the whole stream split into events at once; each event's stamp is the read
    # in which its blank line arrived
    stream = b"".join(reads).replace(b"\r\n", b"\n")
    ends, total = [], 0
    for i, data in enumerate(reads):
        total += len(data.replace(b"\r\n", b"\n"))
        ends.append((total, float(i)))
    expected, offset = [], 0
    for event in stream.split(b"\n\n")[:-1]:
        offset += len(event) + 2
        stamp = next(when for end, when in ends if end >= offset)
        expected += [(stamp, line[5:].strip()) for line in event.split(b"\n") if line.startswith(b"data:")]
    assert _data_lines(raw) == expected
