"""One streamed chat-completion request, timed chunk by chunk (asyncio + aiohttp, no SDK).

The client reads the raw SSE byte stream; each read is stamped with the moment its bytes came off
the socket (:class:`StampingHandler`, in the protocol's ``data_received``, before the loop resumes
the reading task), else with ``time.perf_counter()`` when the read returns; every event completed
by that read gets that arrival time (they did arrive together).
While the stream runs, the hot path only stamps and keeps the bytes: parsing the events (JSON) is
deferred to :func:`parse_stream`, which the load generator calls after the measured window, so
that no stream's parsing delays another stream's arrival stamps. Content deltas, the server's
``usage`` and any error are then stored on the :class:`RequestRecord`, which is filled in place so
that a request that times out or is cancelled keeps what it received.

Latencies count from ``record.sent``: the moment the request's last byte was handed to the socket
(aiohttp writes headers and a small body in one write, with TCP_NODELAY). The connect time of a new
connection and the client's own preparation before the write are recorded apart.

The requests use aiohttp, whose HTTP parser is written in C: profiled at concurrency 64 against
the fake server, httpx's pure-Python stack (httpcore + h11) took about three times the CPU per
streamed chunk, and that time delays every other stream's arrival stamps. The probe (``GET
/models``) uses aiohttp too, so ``llmctl bench`` does not import httpx (about 0.14 s of CPU with
its command-line module); ``llmctl chat`` keeps httpx.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from aiohttp.client_proto import ResponseHandler

from llmctl.errors import EndpointError


@dataclass
class RequestRecord:
    """Everything measured about one request; times are ``perf_counter`` seconds."""

    index: int
    endpoint: str
    warmup: bool = False
    input_tokens_sent: int = 0
    max_tokens: int = 0
    scheduled: float | None = None
    issued: float = 0.0
    start: float = 0.0
    connected: float | None = None
    written: float | None = None
    first_byte: float | None = None
    end: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    finish_reason: str | None = None
    status: str = "pending"  # ok | error
    error_type: str | None = None
    error: str | None = None
    http_status: int | None = None
    raw: list[tuple[float, bytes]] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def sent(self) -> float:
        """Where latencies count from: the request fully written, else when it went to the network."""
        return self.start if self.written is None else self.written

    @property
    def connect_s(self) -> float | None:
        """The TCP connect of a new connection (None when a pooled connection was reused)."""
        return None if self.connected is None else self.connected - self.start

    def fail(self, error_type: str, message: str) -> None:
        if self.end is None:
            self.end = time.perf_counter()
        self.status = "error"
        self.error_type = error_type
        self.error = message[:500]


def normalize_base_url(url: str) -> str:
    """An OpenAI base URL: ``http(s)://host[:port]/path``; a bare host gets ``/v1`` appended."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(
            f"not an http(s) endpoint URL: {url!r}",
            "give the OpenAI base URL, e.g. --endpoint http://localhost:8000/v1",
        )
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError as error:
        raise EndpointError(f"bad port in endpoint URL {url!r}", "e.g. http://localhost:8000/v1") from error
    path = parts.path.rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        path = path.removesuffix(suffix)
    if not path:
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def unreachable(base_url: str, error: Exception) -> EndpointError:
    """The error for an endpoint nothing answers at (``error``: the HTTP client's transport error)."""
    return EndpointError(
        f"cannot reach {base_url}: {type(error).__name__}: {error}",
        "check the URL and that the server runs (for a deployed blueprint: `llmctl status`)",
    )


def model_ids(base_url: str, status: int, body: bytes) -> list[str]:
    """The model ids in a ``GET /models`` answer (its status and body); EndpointError when the key
    was refused.

    A server without ``/models`` (or with an odd answer) yields an empty list.
    """
    if status in (401, 403):
        raise EndpointError(f"{base_url} refused the API key (HTTP {status})", "pass --api-key")
    if status != 200:
        return []
    try:
        return [str(m["id"]) for m in json.loads(body).get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


async def probe(session: aiohttp.ClientSession, base_url: str, api_key: str | None) -> list[str]:
    """Check that an endpoint answers and return the model ids it lists (may be empty)."""
    try:
        async with session.get(
            f"{base_url}/models", headers=auth_headers(api_key), timeout=aiohttp.ClientTimeout(total=10.0)
        ) as response:
            return model_ids(base_url, response.status, await response.read())
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as error:
        raise unreachable(base_url, error) from error


def chat_body(
    model: str,
    prompt: str,
    max_tokens: int,
    *,
    fixed_output: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one streamed chat completion."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if fixed_output:
        body["ignore_eos"] = True
        body["min_tokens"] = max_tokens
    if extra:
        body.update(extra)
    return body


class StampingHandler(ResponseHandler):
    """aiohttp's protocol, noting when each read came off the socket.

    The event loop runs the protocols' ``data_received`` for every socket that became readable
    before it resumes the tasks those reads wake up; at concurrency 64 a stream's task can wait
    behind dozens of other tasks' steps, and a stamp taken there carries that wait. ``arrived`` is
    the moment the latest bytes of this connection came in.
    """

    arrived = 0.0

    def data_received(self, data: bytes) -> None:
        # aiohttp calls this with no bytes too: each read of a chunk resumes the protocol, which
        # feeds its parser ``b""`` (base_protocol.resume_reading); stamped, that made every chunk's
        # arrival the moment its task read it, not the moment it came in
        if data:
            self.arrived = time.perf_counter()
        super().data_received(data)

    def resume_reading(self, resume_parser: bool = True) -> None:
        """Resume only what was paused. aiohttp calls this after every chunk a task reads, and its
        own version re-feeds the parser ``b""`` (to finish what a pause left unparsed) and resumes
        the transport each time (aiohttp base_protocol.py, ``BaseProtocol.resume_reading``); with
        nothing paused both are no-ops, yet they were 5-15 % of the client's CPU in a c64 window.
        ``_reading_paused`` / ``_buffer_paused``: the protocol's own pause flags (read with care,
        absent in older versions: then every call goes through)."""
        if getattr(self, "_reading_paused", True) or getattr(self, "_buffer_paused", False):
            super().resume_reading(resume_parser)


def make_session() -> aiohttp.ClientSession:
    """The aiohttp session of one run: one connection pool for every request, no overall timeout.

    Call it inside the running event loop. TCP_NODELAY is aiohttp's default (without it a request's
    body would wait for the ACK of its headers: Nagle + delayed ACK). ``record.start`` is stamped
    from the session's trace hooks (see :func:`stream_request`).
    """
    trace = aiohttp.TraceConfig()
    trace.on_connection_create_start.append(_on_wire)
    trace.on_connection_reuseconn.append(_on_wire)
    trace.on_connection_create_end.append(_on_connected)
    trace.on_request_chunk_sent.append(_on_written)
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    if isinstance(getattr(connector, "_factory", None), functools.partial):
        # aiohttp builds each connection's protocol with this factory (a private attribute, read
        # with care: without it, chunks are stamped when their task reads them)
        factory = functools.partial(StampingHandler, loop=asyncio.get_running_loop())
        connector._factory = cast("functools.partial[ResponseHandler]", factory)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0),
        trace_configs=[trace],
    )


async def _on_wire(session: aiohttp.ClientSession, context: SimpleNamespace, params: Any) -> None:
    record = context.trace_request_ctx
    if isinstance(record, RequestRecord) and record.start == record.issued:
        record.start = time.perf_counter()


async def _on_connected(session: aiohttp.ClientSession, context: SimpleNamespace, params: Any) -> None:
    record = context.trace_request_ctx
    if isinstance(record, RequestRecord):
        record.connected = time.perf_counter()


async def _on_written(session: aiohttp.ClientSession, context: SimpleNamespace, params: Any) -> None:
    # aiohttp awaits this right before the write of the chunk (headers and body together for a
    # small body), with no await in between: the stamp is the moment the request goes out
    record = context.trace_request_ctx
    if isinstance(record, RequestRecord):
        record.written = time.perf_counter()


def request_headers(api_key: str | None) -> dict[str, str]:
    """The headers of every streamed request (built once per run)."""
    return {"Accept": "text/event-stream", "Content-Type": "application/json", **auth_headers(api_key)}


async def stream_request(
    session: aiohttp.ClientSession,
    record: RequestRecord,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float = 120.0,
    parse: bool = True,
) -> RequestRecord:
    """Send one request (``body`` is the JSON bytes) and fill ``record``; never raises for a failed
    request (except cancellation). ``parse=False`` leaves the events unparsed (status
    ``"received"``) for a later :func:`parse_stream`.

    A request that exceeds ``timeout`` seconds (from sending to the end of the stream) is recorded
    as ``error_type='timeout'`` with whatever chunks arrived before.

    ``record.issued`` is when the client began the request; ``record.start`` is when it went to the
    network: the start of the TCP connect when a new connection is needed, else the moment a pooled
    connection was taken for it (right before its headers are written), from aiohttp's trace
    hooks. ``record.written`` is when its last byte was handed to the socket; latencies count from
    there (``record.sent``), and the client's own preparation time is reported separately.
    """
    record.issued = record.start = time.perf_counter()
    try:
        try:
            if sys.version_info >= (3, 11):
                # a deadline on this task: wait_for would start one more task per request (3.11)
                async with asyncio.timeout(timeout):
                    await _stream(session, record, body, headers)
            else:  # pragma: no cover - Python 3.10
                await asyncio.wait_for(_stream(session, record, body, headers), timeout)
        finally:
            if parse:
                parse_stream(record)
    except asyncio.TimeoutError:
        record.fail("timeout", f"no complete answer within {timeout:g} s")
    except asyncio.CancelledError:
        record.fail("cancelled", "stopped before the answer completed")
        raise
    except aiohttp.ClientConnectorError as error:
        record.fail("connect_error", str(error) or type(error).__name__)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as error:
        record.fail("protocol_error", str(error) or type(error).__name__)
    except (aiohttp.ClientError, OSError) as error:
        record.fail("transport_error", f"{type(error).__name__}: {error}")
    return record


async def _stream(
    session: aiohttp.ClientSession, record: RequestRecord, body: bytes, headers: dict[str, str]
) -> None:
    url = record.endpoint + "/chat/completions"
    async with session.post(url, data=body, headers=headers, trace_request_ctx=record) as response:
        record.http_status = response.status
        if response.status != 200:
            text = (await response.read()).decode(errors="replace")
            record.fail(f"http_{response.status}", text)
            return
        await _read(response, record)


async def _read(response: aiohttp.ClientResponse, record: RequestRecord) -> None:
    # the hot path: a stamp and the bytes, nothing else (see the module docstring)
    raw = record.raw
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    stamped = protocol if isinstance(protocol, StampingHandler) else None
    record.first_byte = time.perf_counter()
    if stamped is not None:
        record.first_byte = min(stamped.arrived, record.first_byte)
    async for data in response.content.iter_any():
        # when the latest bytes of the connection came in (never before the ones read now did;
        # never after this read), else the read itself
        now = time.perf_counter()
        if stamped is not None:
            now = min(stamped.arrived, now)
        raw.append((now, data))
        if b"[DONE]" in data:
            record.end = now
        elif b'"error"' in data and _parse(record, final=False):
            return  # an error event: the server ends the stream, the client stops reading
    if record.end is None:
        record.end = time.perf_counter()
    record.status = "received"


def parse_stream(record: RequestRecord) -> None:
    """Turn the bytes a request received into its chunks, usage, finish reason and status."""
    if record.raw or record.status == "received":
        _parse(record, final=True)
    record.raw = []


def _parse(record: RequestRecord, *, final: bool) -> bool:
    """Parse ``record.raw`` from the start; True when it holds an error (the record then failed).

    ``final``: the stream is over, so the status is decided (a failure already recorded, such as a
    timeout, stays).
    """
    times: list[float] = []
    texts: list[str] = []
    done = False
    for now, payload in _data_lines(record.raw):
        if payload == b"[DONE]":
            done = True
            record.end = now
            continue
        text = payload.decode()
        try:
            # one JSON value, the whole payload: what json.loads checks, without its two Python
            # layers per call (a c64 run parses 25,600 chunks)
            chunk, end = _DECODER.raw_decode(text)
            if end != len(text):
                raise ValueError("extra data after the JSON value")
        except ValueError:
            _failed(record, times, texts, now, "bad_event", payload[:200].decode(errors="replace"))
            return True
        if "error" in chunk:
            err = chunk["error"]
            message = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            _failed(record, times, texts, now, "stream_error", str(message))
            return True
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content") or choice.get("text")
            if content:
                times.append(now)
                texts.append(content)
            if choice.get("finish_reason"):
                record.finish_reason = choice["finish_reason"]
        usage = chunk.get("usage")
        if usage:
            record.usage_prompt_tokens = usage.get("prompt_tokens")
            record.usage_completion_tokens = usage.get("completion_tokens")
    _keep(record, times, texts)
    if not final or record.status != "received":
        return False
    if not done and record.finish_reason is None:
        record.fail("incomplete_stream", "the stream ended without [DONE] or a finish_reason")
    elif not texts:
        record.fail("empty_response", "the server streamed no content")
    else:
        record.status = "ok"
    return False


# raw_decode of a JSON text that starts with a value (leading whitespace is stripped before)
_DECODER = json.JSONDecoder()


def _data_lines(raw: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """The ``data:`` payloads of the complete events in ``raw``, each with the arrival of the read
    that completed its event (an event ends at a blank line; an unfinished last one is left out)."""
    lines: list[tuple[float, bytes]] = []
    buffer = b""
    for now, data in raw:
        buffer = buffer + data if buffer else data
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        if b"\n\n" not in buffer:
            continue
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            lines.extend((now, line[5:].strip()) for line in event.split(b"\n") if line.startswith(b"data:"))
    return lines


def _keep(record: RequestRecord, times: list[float], texts: list[str]) -> None:
    record.chunk_times[:] = times
    record.chunk_texts[:] = texts


def _failed(
    record: RequestRecord, times: list[float], texts: list[str], when: float, error_type: str, message: str
) -> None:
    """An error event or a broken one at ``when``: what came before it is kept."""
    _keep(record, times, texts)
    if record.status in ("pending", "received"):
        record.end = when
        record.fail(error_type, message)
