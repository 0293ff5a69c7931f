"""One streamed chat-completion request, timed chunk by chunk (asyncio + httptools, no SDK).

The client reads the raw SSE byte stream over :mod:`wire`'s connections: each piece of the body is
kept with the moment its socket read came in (in the protocol's ``data_received``, before the
event loop resumes any task), and every event completed by that read gets that arrival time (they
did arrive together). While the stream runs, the hot path only stamps and keeps the bytes, and the
request's task is woken once, when the answer is complete: parsing the events (JSON) is deferred to
:func:`parse_stream`, which the load generator calls after the measured window, so that no
stream's parsing delays another stream's arrival stamps. Token events, the server's ``usage`` and
any error are then stored on the :class:`RequestRecord`, which is filled in place so that a
request that times out or is cancelled keeps what it received.

A token event is a streamed choice that carries a generated token in any channel: non-empty
``content`` (completions: ``text``), ``reasoning`` / ``reasoning_content`` or ``tool_calls``, or a
delta without ``role`` that holds any of those keys even empty, not null (vLLM's incremental
detokenizer streams ``"content": ""`` while a token is an incomplete UTF-8 sequence). The role chunk
(``{"role": "assistant", "content": ""}``) is not one. TTFT counts from the first token event,
whatever its channel, as vLLM's own ``vllm bench serve`` and its server histogram do; the first
non-empty answer content is kept beside it (``first_answer``).

Latencies count from ``record.sent``: the moment the request (headers and body, one write, with
TCP_NODELAY) was handed to the socket. The connect time of a new connection and the client's own
preparation before the write are recorded apart.

Why not an HTTP client library: profiled at concurrency 64 against the recording server, httpx's
pure-Python stack (httpcore + h11) took about three times aiohttp's CPU per streamed chunk, and
aiohttp about twice what :mod:`wire` takes (its response streams wake the reading task for every
chunk); that CPU delays every other stream's arrival stamps. ``llmctl chat`` keeps httpx.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from llmctl.errors import EndpointError
from llmctl.serving.client.bench import wire


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
    # one entry per token event (any channel): its arrival, and its reasoning + answer text
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    # the arrival of the first non-empty answer content (after any reasoning)
    first_answer: float | None = None
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
        """Where latencies count from: the moment the request was handed to the socket (its one
        write; a large body on a slow link is still going out after it), else when it went to the
        network."""
        return self.start if self.written is None else self.written

    @property
    def connect_s(self) -> float | None:
        """Opening a new connection: name lookup, TCP connect and, for https, the TLS handshake
        (None when a pooled connection was reused)."""
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
    base = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    try:
        wire.target(base)
    except ValueError as error:
        raise EndpointError(f"bad endpoint URL {url!r}: {error}", "e.g. http://localhost:8000/v1") from error
    return base


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def unreachable(base_url: str, error: Exception) -> EndpointError:
    """The error for an endpoint nothing answers at (``error``: the HTTP client's transport error)."""
    timed_out = isinstance(error, asyncio.TimeoutError)
    reason = str(error) or (f"no answer within {wire.FETCH_TIMEOUT_S:g} s" if timed_out else "")
    return EndpointError(
        f"cannot reach {base_url}: {type(error).__name__}: {reason}",
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


async def probe(pool: wire.Pool, base_url: str, api_key: str | None) -> list[str]:
    """Check that an endpoint answers and return the model ids it lists (may be empty)."""
    try:
        status, body = await wire.fetch(pool, f"{base_url}/models", request_headers(api_key, stream=False))
    except (wire.WireError, OSError, asyncio.TimeoutError) as error:
        raise unreachable(base_url, error) from error
    return model_ids(base_url, status, body)


def chat_body(
    model: str,
    prompt: str,
    max_tokens: int,
    *,
    fixed_output: bool = True,
    extra: dict[str, Any] | None = None,
    messages: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """The JSON body of one streamed chat completion (``messages``: (role, content) pairs sent instead
    of the single user message ``prompt``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": role, "content": content} for role, content in messages]
        or [{"role": "user", "content": prompt}],
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


def request_headers(api_key: str | None, *, stream: bool = True) -> bytes:
    """The header lines of every request of a run (built once); EndpointError for an API key that
    cannot go into a header."""
    headers = {"User-Agent": "llmctl-bench", **auth_headers(api_key)}
    if stream:
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json", **headers}
    try:
        return wire.header_block(headers)
    except ValueError as error:
        raise EndpointError(
            "the API key holds a line break or a character an HTTP header cannot carry",
            'pass the key alone, e.g. --api-key "$(cat key.txt)" with no trailing newline',
        ) from error


# a stream's error event carries this key: the task is woken to look (the server ends such a
# stream, and the client stops reading it)
_ERROR_MARK = b'"error"'


async def stream_request(
    pool: wire.Pool,
    record: RequestRecord,
    body: bytes,
    headers: bytes,
    *,
    timeout: float = 120.0,
    parse: bool = True,
) -> RequestRecord:
    """Send one request (``body`` is the JSON bytes, ``headers`` from :func:`request_headers`) and
    fill ``record``; never raises for a failed request (except cancellation). ``parse=False``
    leaves the events unparsed (status ``"received"``) for a later :func:`parse_stream`.

    A request that exceeds ``timeout`` seconds (from sending to the end of the stream) is recorded
    as ``error_type='timeout'`` with whatever chunks arrived before.

    ``record.issued`` is when the client began the request; ``record.start`` is when it went to the
    network: the start of the TCP connect when a new connection is needed, else the moment a pooled
    connection was taken for it. ``record.written`` is the moment of the request's one write;
    latencies count from there (``record.sent``), and the client's own preparation time is
    reported separately.
    """
    record.issued = record.start = time.perf_counter()
    try:
        try:
            # a deadline on this task (wait_for would start one more task per request on 3.11)
            await wire.within(timeout, _stream(pool, record, body, headers))
        finally:
            if parse:
                parse_stream(record)
    except asyncio.TimeoutError:
        record.fail("timeout", f"no complete answer within {timeout:g} s")
    except asyncio.CancelledError:
        record.fail("cancelled", "stopped before the answer completed")
        raise
    except wire.ConnectError as error:
        record.fail("connect_error", str(error))
    except wire.ProtocolError as error:
        record.fail("protocol_error", str(error))
    except OSError as error:
        record.fail("transport_error", f"{type(error).__name__}: {error}")
    return record


async def _stream(pool: wire.Pool, record: RequestRecord, body: bytes, headers: bytes) -> None:
    where = wire.target(record.endpoint + "/chat/completions")
    request = wire.request_bytes("POST", where, headers, body)
    if await _exchange(pool, record, where, request, fresh=False):
        # the server had closed the pooled connection (its idle timeout) as the request went out,
        # and answered nothing: the request goes once more, on a new connection
        record.start = time.perf_counter()
        await _exchange(pool, record, where, request, fresh=True)


async def _exchange(
    pool: wire.Pool, record: RequestRecord, where: wire.Target, request: bytes, *, fresh: bool
) -> bool:
    """One try of the request; True when it went out on a pooled connection that the server closed
    without a byte of answer (worth one more try on a new connection)."""
    connection, new = await pool.acquire(where, fresh=fresh)
    if new:
        record.connected = time.perf_counter()
    else:
        record.start = time.perf_counter()
    raw = record.raw
    try:
        record.written = connection.send(request, raw, watch=_ERROR_MARK)
        while True:
            try:
                await connection.wait()
            except wire.ProtocolError:
                if not new and connection.unanswered:
                    return True
                raise
            if connection.complete:
                break
            if connection.status == 200 and _parse(record, final=False):
                return False  # an error event: the stream is over for the client
        record.http_status = connection.status
        if connection.status != 200:
            text = b"".join(piece for _now, piece in raw).decode(errors="replace")
            raw.clear()
            record.fail(f"http_{connection.status}", text)
            return False
        # when the read that completed the answer came in, or the one that carried [DONE]
        record.end = next((now for now, piece in reversed(raw) if b"[DONE]" in piece), connection.now)
        record.status = "received"
        return False
    finally:
        if connection.first_byte is not None:
            record.first_byte = connection.first_byte
        if record.http_status is None and connection.status:
            record.http_status = connection.status
        pool.release(where, connection)


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
    answer: list[float] = []
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
            _failed(record, times, texts, answer, now, "bad_event", payload[:200].decode(errors="replace"))
            return True
        if "error" in chunk:
            err = chunk["error"]
            message = err.get("message", str(err)) if isinstance(err, dict) else str(err)
            _failed(record, times, texts, answer, now, "stream_error", str(message))
            return True
        for choice in chunk.get("choices") or ():
            token = _token(choice)
            if token is not None:
                content, reasoning = token
                times.append(now)
                texts.append(reasoning + content if reasoning else content)
                if content and not answer:
                    answer.append(now)
            if choice.get("finish_reason"):
                record.finish_reason = choice["finish_reason"]
        usage = chunk.get("usage")
        if usage:
            record.usage_prompt_tokens = usage.get("prompt_tokens")
            record.usage_completion_tokens = usage.get("completion_tokens")
    _keep(record, times, texts, answer)
    if not final or record.status != "received":
        return False
    if not done and record.finish_reason is None:
        record.fail("incomplete_stream", "the stream ended without [DONE] or a finish_reason")
    elif not texts and not record.usage_completion_tokens and record.finish_reason is None:
        record.fail("empty_response", "the server streamed no token, no finish_reason and no usage tokens")
    else:
        record.status = "ok"
    return False


# the delta keys that carry a generated token (vLLM's DeltaMessage: content, reasoning, and
# reasoning_content before vLLM renamed it; tool_calls)
_TOKEN_KEYS = ("content", "reasoning", "reasoning_content", "tool_calls")


def _token(choice: dict[str, Any]) -> tuple[str, str] | None:
    """The answer text and the reasoning text of one streamed choice when it carries a token (a
    token event), else None (a role-only chunk, an empty finish chunk)."""
    delta = choice.get("delta")
    if delta is None:  # completions: every chunk with ``text`` is a token, even empty
        text = choice.get("text")
        return None if text is None else (str(text), "")
    content = delta.get("content") or ""
    reasoning = delta.get("reasoning") or delta.get("reasoning_content") or ""
    if content or reasoning or delta.get("tool_calls"):
        return str(content), str(reasoning)
    if "role" not in delta and any(delta.get(key) is not None for key in _TOKEN_KEYS):
        return "", ""  # an incomplete UTF-8 sequence, streamed as an empty delta (null is no token)
    return None


# raw_decode of a JSON text that starts with a value (leading whitespace is stripped before)
_DECODER = json.JSONDecoder()


def _data_lines(raw: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """The ``data:`` payloads of the complete events in ``raw``, each with the arrival of the read
    that completed its event (an event ends at a blank line; an unfinished last one is left out)."""
    lines: list[tuple[float, bytes]] = []
    buffer = b""
    for now, data in raw:
        # the common case: the read is one whole event of one ``data:`` line (a server writes an
        # event at a time), taken apart the way the general case below would
        if (
            not buffer
            and data.startswith(b"data:")
            and data.endswith(b"\n\n")
            and data.count(b"\n") == 2
            and b"\r" not in data
        ):
            lines.append((now, data[5:-2].strip()))
            continue
        buffer = buffer + data if buffer else data
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        if b"\n\n" not in buffer:
            continue
        *events, buffer = buffer.split(b"\n\n")
        for event in events:
            lines.extend((now, line[5:].strip()) for line in event.split(b"\n") if line.startswith(b"data:"))
    return lines


def _keep(record: RequestRecord, times: list[float], texts: list[str], answer: list[float]) -> None:
    record.chunk_times[:] = times
    record.chunk_texts[:] = texts
    record.first_answer = answer[0] if answer else None


def _failed(
    record: RequestRecord,
    times: list[float],
    texts: list[str],
    answer: list[float],
    when: float,
    error_type: str,
    message: str,
) -> None:
    """An error event or a broken one at ``when``: what came before it is kept."""
    _keep(record, times, texts, answer)
    if record.status in ("pending", "received"):
        record.end = when
        record.fail(error_type, message)
