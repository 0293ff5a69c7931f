"""A fake OpenAI-compatible server that streams tokens on a known schedule.

Used by the test suite and by ``benchmarks/bench_loadgen.py`` to check that ``llmctl bench``
measures what the server really did. It is a plain ASGI app served by uvicorn (no framework), and
it speaks real Server-Sent Events in the OpenAI chat-completions format, including the final
``usage`` chunk when the request sets ``stream_options.include_usage``.

Timing model (all times measured from the moment the request body has been read):

* a role chunk (``delta.role``, empty content) is sent at once, or with ``role_with_first_token``
  just before the first token's chunk, as vLLM does (its stream generator sends the role chunk in
  the engine iteration that brings the first token);
* token chunk ``j`` (0-based) holds ``tokens_per_chunk`` tokens and is sent at
  ``ttft + j * tokens_per_chunk * tpot``; the schedule uses absolute deadlines, so a late chunk
  does not delay the ones after it;
* every token is one word with a leading space (" alpha"), so the approximate tokenizer of
  :mod:`llmctl.serving.client.bench.tokens` counts it exactly;
* with ``empty_every`` = n, chunks 0, n, 2n, ... (never the last) go out as ``"content": ""`` and
  their words ride with the next chunk: what vLLM's incremental detokenizer streams while a token
  is an incomplete UTF-8 sequence;
* with ``reasoning_tokens`` = r, the first r tokens (the chunks that start within them) go out in ``delta.<reasoning_field>``
  (``reasoning``, vLLM's name since it renamed it, or ``reasoning_content``) before the answer's
  content; the usage counts them, as vLLM's does.

Failure injection: every ``error_every``-th request answers HTTP ``error_status``; every
``stall_every``-th request stops after ``stall_after`` tokens and then hangs for
``stall_seconds``; every ``midstream_error_every``-th request sends an ``error`` event after
``stall_after`` tokens and closes the stream.

With ``prefix_cache`` set (``POST /_config``), every chat prompt is counted in a model of vLLM's
prefix cache and ``GET /metrics`` serves vLLM's two prefix cache counters (testserver_cache.py).

The timing can be changed at run time with ``POST /_config`` (JSON with the fields of
:class:`FakeTiming`); ``GET /_stats`` returns the number of requests served and ``GET /_timeline``
what the server really did for each completed stream: when it had read the request, when it sent
the first and the last token chunk of any channel (``time.monotonic()``, the clock of the client's
``perf_counter`` on Linux), how many tokens it sent, the request's index (read from the
``[<nonce>-<index>]`` tag that opens an ``llmctl bench`` prompt; -1 without one), so each stream can
be paired with the client's record of it, and when it sent the first non-empty answer content
(0.0 when none). ``GET /_stats`` also says how many reads were stamped with
the kernel's receive time and how many with the moment ``select()`` returned (``read_stamps``). ``POST /_config`` clears both.

Run it on its own with ``python -m llmctl.serving.client.bench.testserver --port 8000``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import platform
import re
import selectors
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

from llmctl.serving.client.bench.testserver_cache import PrefixCache

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
)


# Timers fire a little late (about 0.1 ms with the select() loop used here). The server aims early
# by the running average of that lateness, which centres send times on the schedule.
_INITIAL_LEAD = 0.0001


@dataclass
class FakeTiming:
    """What the fake server does; every field can be changed with ``POST /_config``."""

    ttft: float = 0.03
    tpot: float = 0.005
    tokens_per_chunk: int = 1
    default_max_tokens: int = 16
    model: str = "fake-model"
    error_every: int = 0
    error_status: int = 500
    stall_every: int = 0
    stall_after: int = 2
    stall_seconds: float = 3600.0
    midstream_error_every: int = 0
    role_with_first_token: int = 0
    empty_every: int = 0
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning"
    #: count prompts in a prefix cache and serve its counters on GET /metrics (testserver_cache.py)
    prefix_cache: int = 0

    def update(self, data: dict[str, Any]) -> None:
        """Set the given fields (unknown keys or a bad reasoning field raise ValueError)."""
        names = {f.name: f for f in dataclasses.fields(self)}
        for key, value in data.items():
            if key not in names:
                raise ValueError(f"unknown field {key!r}")
            if key == "reasoning_field" and value not in REASONING_FIELDS:
                raise ValueError(f"reasoning_field must be one of {', '.join(REASONING_FIELDS)}")
            current = getattr(self, key)
            setattr(self, key, type(current)(value))


# where servers stream reasoning tokens: vLLM's DeltaMessage.reasoning, and reasoning_content before
REASONING_FIELDS = ("reasoning", "reasoning_content")


def count_words(text: str) -> int:
    """The server's prompt token count: the same rule as the bench's approximate tokenizer."""
    from llmctl.serving.client.bench.tokens import ApproxTokenizer

    return ApproxTokenizer().count(text)


class FakeOpenAI:
    """The ASGI application."""

    def __init__(self, timing: FakeTiming | None = None) -> None:
        self.timing = timing or FakeTiming()
        self.requests = 0
        self.lead = _INITIAL_LEAD
        self.timeline: list[tuple[float, float, float, int, int, float]] = []
        # how the requests' read moments were stamped (the server's selector keeps the counts)
        self.read_stamps: dict[str, int] = {}
        self.cache = PrefixCache()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        # when the request's last bytes came off the socket (the protocol's stamp, before this
        # task got its turn on a busy loop), else now
        started = scope.get("state", {}).get("read_at") or time.monotonic()
        path: str = scope["path"].rstrip("/")
        method: str = scope["method"]
        if method == "GET" and path in ("/v1/models", "/models"):
            models = {"object": "list", "data": [{"id": self.timing.model, "object": "model"}]}
            await _json(send, 200, models)
        elif method == "POST" and path == "/_config":
            try:
                self.timing.update(json.loads(body or b"{}"))
            except (ValueError, TypeError) as error:
                await _json(send, 400, {"error": {"message": str(error)}})
                return
            self.requests = 0
            self.timeline = []
            self.cache = PrefixCache()
            await _json(send, 200, dataclasses.asdict(self.timing))
        elif method == "GET" and path == "/metrics":
            text = self.cache.metrics_text(self.timing.model).encode()
            headers = [
                (b"content-type", b"text/plain; version=0.0.4"),
                (b"content-length", str(len(text)).encode()),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": text})
        elif method == "GET" and path == "/_stats":
            await _json(send, 200, {"requests": self.requests, "read_stamps": self.read_stamps})
        elif method == "GET" and path == "/_timeline":
            await _json(send, 200, {"streams": self.timeline[-100_000:]})
        elif method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            await self._chat(send, body, started)
        else:
            await _json(send, 404, {"error": {"message": f"no route {method} {path}"}})

    async def _chat(self, send: Send, body: bytes, started: float) -> None:
        timing = self.timing
        self.requests += 1
        number = self.requests
        try:
            request = json.loads(body)
            messages = request["messages"]
        except (ValueError, KeyError, TypeError):
            await _json(send, 400, {"error": {"message": "body must be JSON with 'messages'"}})
            return
        if timing.prefix_cache:
            self.cache.observe(messages)
        if timing.error_every and number % timing.error_every == 0:
            await _json(send, timing.error_status, {"error": {"message": "injected failure"}})
            return
        max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 0)
        max_tokens = max_tokens or timing.default_max_tokens

        # Work before the first token is kept to a minimum: a burst of requests is handled one after
        # the other, so every microsecond here delays the next request's clock. The prompt is
        # counted only when its usage is sent, the words are made chunk by chunk.
        def prompt_tokens() -> int:
            return sum(count_words(str(m.get("content", ""))) for m in messages)

        def word(k: int) -> str:
            return " " + WORDS[(number + k) % len(WORDS)]

        model = str(request.get("model") or timing.model)
        if not request.get("stream"):
            await asyncio.sleep(timing.ttft + max(0, max_tokens - 1) * timing.tpot)
            completion = {
                "id": f"cmpl-{number}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(map(word, range(max_tokens)))},
                        "finish_reason": "length",
                    }
                ],
                "usage": _usage(prompt_tokens(), max_tokens),
            }
            await _json(send, 200, completion)
            return
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")],
            }
        )
        head = json.dumps({"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "model": model})
        head = "data: " + head[:-1] + ', "choices": [{"index": 0, "delta": '

        async def event(data: dict[str, Any] | str) -> None:
            payload = data if isinstance(data, str) else json.dumps({**base, **data})
            await send(
                {"type": "http.response.body", "body": f"data: {payload}\n\n".encode(), "more_body": True}
            )

        async def content(channel: str, text: str, finish: str | None) -> None:
            # the JSON of one token chunk, assembled from pieces: this runs once per token and
            # json.dumps of the whole chunk would make the server, not the client, the bottleneck
            reason = "null" if finish is None else f'"{finish}"'
            body = f'{head}{{"{channel}": {json.dumps(text)}}}, "finish_reason": {reason}}}]}}\n\n'
            await send({"type": "http.response.body", "body": body.encode(), "more_body": True})

        base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "model": model}
        role = f'{head}{{"role": "assistant", "content": ""}}, "finish_reason": null}}]}}\n\n'.encode()
        if not timing.role_with_first_token:
            await send({"type": "http.response.body", "body": role, "more_body": True})
        per_chunk = max(1, timing.tokens_per_chunk)
        thinking = max(0, timing.reasoning_tokens)
        held = ""  # the words of an empty chunk (an incomplete UTF-8 sequence), sent with the next
        stall = bool(timing.stall_every) and number % timing.stall_every == 0
        broken = bool(timing.midstream_error_every) and number % timing.midstream_error_every == 0
        loop = asyncio.get_running_loop()
        offset = started - time.monotonic() + loop.time()
        sent = 0
        first_sent = first_answer = 0.0
        for j, first in enumerate(range(0, max_tokens, per_chunk)):
            if (stall or broken) and sent >= timing.stall_after:
                if broken:
                    await event({"error": {"message": "injected mid-stream failure", "code": 500}})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                await asyncio.sleep(timing.stall_seconds)
            deadline = offset + timing.ttft + j * per_chunk * timing.tpot
            delay = deadline - loop.time() - self.lead
            if delay > 0:
                await asyncio.sleep(delay)
                late = loop.time() - (deadline - self.lead)
                self.lead = min(0.001, max(0.0, 0.98 * self.lead + 0.02 * late))
            last = min(first + per_chunk, max_tokens)
            # a chunk's tokens are in the channel of its first one
            channel = timing.reasoning_field if first < thinking else "content"
            text = held + "".join(word(k) for k in range(first, last))
            sent += last - first
            if timing.empty_every and j % timing.empty_every == 0 and sent < max_tokens:
                held, text = text, ""
            else:
                held = ""
            if not first_sent and timing.role_with_first_token:
                await send({"type": "http.response.body", "body": role, "more_body": True})
            # stamped as the first chunk is handed to the socket (a client on the other core may
            # read it before the write call returns)
            first_sent = first_sent or time.monotonic()
            if channel == "content" and text and not first_answer:
                first_answer = time.monotonic()
            await content(channel, text, "length" if sent >= max_tokens else None)
        self.timeline.append(
            (started, first_sent, time.monotonic(), sent, _request_index(messages), first_answer)
        )
        if include_usage:
            await event({"choices": [], "usage": _usage(prompt_tokens(), sent)})
        await event("[DONE]")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


_TAG = re.compile(r"\[[0-9a-f]+-(\d+)\]")


def _request_index(messages: Any) -> int:
    """The index in the ``[<nonce>-<index>]`` tag that opens an llmctl bench prompt (the last message:
    the question behind a shared system prompt or a conversation's earlier turns), else -1."""
    try:
        found = _TAG.match(str(messages[-1].get("content", "")))
    except (IndexError, AttributeError, TypeError):
        return -1
    return int(found.group(1)) if found else -1


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _json(send: Send, status: int, data: Any) -> None:
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(host: str = "127.0.0.1", port: int = 0, timing: FakeTiming | None = None) -> None:
    """Serve until killed; prints ``listening on http://HOST:PORT`` once the socket is bound.

    The event loop polls with ``select()``, whose timeout has microsecond resolution; the default
    epoll selector rounds every timer up to the next millisecond, which would blur the schedule.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
    if _SO_TIMESTAMPNS is not None:
        # inherited too: a connection's first request, in its socket before the protocol could ask
        # for receive times, has one as well (_StampingSelector)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    sock.bind((host, port))
    sock.listen(1024)
    bound = sock.getsockname()[1]
    selector = _StampingSelector()
    app = FakeOpenAI(timing)
    app.read_stamps = selector.stamps
    config = uvicorn.Config(
        app,
        loop="none",
        http=_stamping_protocol(selector) if _has("httptools") else "h11",
        log_level="critical",  # stalled streams are cancelled at shutdown; not an error
        access_log=False,
        backlog=1024,
        timeout_keep_alive=60,
        timeout_graceful_shutdown=1,
    )
    loop = asyncio.SelectorEventLoop(selector)
    asyncio.set_event_loop(loop)
    print(f"listening on http://{host}:{bound}", flush=True)
    try:
        loop.run_until_complete(uvicorn.Server(config).serve(sockets=[sock]))
    finally:
        loop.close()


# SO_TIMESTAMPNS (socket(7)): the kernel notes when each packet came in and recvmsg() hands it over;
# the socket module has no name for it. 35 is SO_TIMESTAMPNS_OLD in the kernel's
# include/uapi/asm-generic/socket.h, which x86_64 and arm64 use; with a 64-bit time_t it is the
# SO_TIMESTAMPNS there, and its control message (SCM_TIMESTAMPNS, the same number) holds a
# struct timespec of two 64-bit fields. Seen here: Debian's linux-libc-dev headers, and the kernel
# answering a recvmsg() with a control message of level 1, type 35.
_SO_TIMESTAMPNS = 35 if sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64") else None


class _StampingSelector(selectors.SelectSelector):
    """``select()``, noting for each readable connection when its bytes reached the server's kernel.

    The moment a request is read by the server's loop carries the loop's own queue: the timers and
    callbacks it was running when the request came in (at c64 and 5 ms a token it writes 64 chunks
    every 5 ms), and the other sockets that became readable with it. That wait is the server's,
    yet it would count as the client's way out. So each connection's socket gets the kernel's
    receive timestamps (SO_TIMESTAMPNS), and when ``select()`` returns, each readable connection's
    unread bytes are peeked (``MSG_PEEK``: nothing is consumed) for the receive time the kernel
    gives them (for bytes that came in several segments TCP may have merged, the newest merged
    one's), turned from the kernel's wall clock to ``time.monotonic()``. Where that is not
    available, the stamp is the moment ``select()`` returned; ``stamps`` counts both kinds.
    """

    def __init__(self) -> None:
        super().__init__()
        self.ready_at = 0.0
        self.arrived: dict[int, float] = {}
        self.stamps = {"kernel": 0, "select": 0}
        # fd -> a socket object on the connection's own descriptor (not a duplicate: the
        # descriptors must stay below select()'s 1,024), detached before the connection closes it
        self._peers: dict[int, socket.socket] = {}

    def watch(self, fd: int) -> None:
        """Start stamping the connection on ``fd`` (call :meth:`forget` before it is closed)."""
        if _SO_TIMESTAMPNS is None or fd < 0:
            return
        self.forget(fd)  # never drop a socket object on a descriptor undetached: it would close it
        try:
            peer = socket.socket(fileno=fd)
        except OSError:
            return
        try:
            peer.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        except OSError:
            peer.detach()
            return
        self._peers[fd] = peer

    def forget(self, fd: int) -> None:
        peer = self._peers.pop(fd, None)
        if peer is not None:
            peer.detach()  # the descriptor is the connection's to close
        self.arrived.pop(fd, None)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(timeout)
        now = time.monotonic()
        self.ready_at = now
        offset: float | None = None
        for key, mask in events:
            peer = self._peers.get(key.fd)
            if peer is not None and mask & selectors.EVENT_READ:
                if offset is None:
                    offset = _wall_to_monotonic()
                came, stamp = _kernel_stamp(peer, offset)
                if came:  # bytes, not the end of the connection
                    self.stamps["kernel" if stamp is not None else "select"] += 1
                self.arrived[key.fd] = stamp if stamp is not None else now
        return events


def _wall_to_monotonic() -> float:
    """What to add to a wall-clock time to get ``time.monotonic()``: the wall clock read on both
    sides of the monotonic one (again when a preemption came between them)."""
    offset, spread = 0.0, float("inf")
    for _ in range(3):
        before = time.time()
        monotonic = time.monotonic()
        after = time.time()
        if after - before < spread:
            offset, spread = monotonic - (before + after) / 2, after - before
        if spread < 50e-6:
            break
    return offset


def _kernel_stamp(peer: socket.socket, offset: float) -> tuple[bool, float | None]:
    """Whether ``peer`` has unread bytes, and when they came in (``time.monotonic()``; None if the
    kernel did not say)."""
    try:
        data, ancillary, _flags, _address = peer.recvmsg(
            1, socket.CMSG_SPACE(16), socket.MSG_PEEK | socket.MSG_DONTWAIT
        )
    except OSError:
        return False, None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(payload) >= 16:
            seconds, nanoseconds = struct.unpack("@qq", payload[:16])
            return bool(data), float(seconds + nanoseconds / 1e9 + offset)
    return bool(data), None


def _stamping_protocol(selector: _StampingSelector) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol, stamping when the bytes that completed each request reached
    the server (the oldest unread ones of the read that completed it).

    The app's own clock starts only when its task runs; with 64 requests arriving in one burst the
    last one waits for the other 63, and that wait is the server's, not the client's; so is the
    wait before the loop reads a socket (:class:`_StampingSelector`). The stamp goes to
    ``scope["state"]["read_at"]`` (``time.monotonic()``).
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class StampingProtocol(HttpToolsProtocol):
        _arrived = 0.0
        _fd = -1

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            self._fd = sock.fileno() if sock is not None else -1
            selector.watch(self._fd)
            super().connection_made(transport)  # type: ignore[arg-type]

        def connection_lost(self, exc: Exception | None) -> None:
            selector.forget(self._fd)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self._arrived = selector.arrived.get(self._fd, selector.ready_at)
            super().data_received(data)

        def on_message_complete(self) -> None:
            self.scope["state"]["read_at"] = self._arrived
            super().on_message_complete()

    return StampingProtocol


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@contextlib.contextmanager
def running_server(timing: FakeTiming | None = None, startup_timeout: float = 30.0) -> Iterator[str]:
    """Start the fake server in a child process and yield its OpenAI base URL (``.../v1``).

    A separate process keeps the server's work off the load generator's event loop, as a real
    server would be.
    """
    args = [sys.executable, "-m", "llmctl.serving.client.bench.testserver", "--port", "0"]
    for field in dataclasses.fields(FakeTiming):
        if timing is not None:
            args += [f"--{field.name.replace('_', '-')}", str(getattr(timing, field.name))]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + startup_timeout
        line = ""
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if line.startswith("listening on ") or not line:
                break
        if not line.startswith("listening on "):
            raise RuntimeError(f"fake server did not start (exit code {process.poll()})")
        url = line.split("listening on ", 1)[1].strip()
        _wait_ready(url)
        yield url + "/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(url: str, timeout: float = 15.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url + "/_stats", timeout=1.0).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def configure(base_url: str, **fields: Any) -> dict[str, Any]:
    """Change a running fake server's timing (``base_url`` as yielded by :func:`running_server`)."""
    import httpx

    root = base_url.removesuffix("/v1")
    response = httpx.post(root + "/_config", json=fields, timeout=5.0)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def read_stamps(base_url: str) -> dict[str, int]:
    """How a running fake server stamped its reads so far: ``{"kernel": n, "select": m}``."""
    import httpx

    response = httpx.get(base_url.removesuffix("/v1") + "/_stats", timeout=10.0)
    response.raise_for_status()
    return {str(k): int(v) for k, v in response.json()["read_stamps"].items()}


def timeline(base_url: str) -> list[tuple[float, float, float, int, int]]:
    """What a running fake server did, per stream: (read, first token sent (any channel), last
    token sent, tokens, request index or -1)."""
    return [(a, b, c, n, i) for a, b, c, n, i, _answer in full_timeline(base_url)]


def full_timeline(base_url: str) -> list[tuple[float, float, float, int, int, float]]:
    """:func:`timeline` with, last in each stream, when the first non-empty answer content was sent
    (0.0 when none was)."""
    import httpx

    response = httpx.get(base_url.removesuffix("/v1") + "/_timeline", timeout=10.0)
    response.raise_for_status()
    return [
        (float(a), float(b), float(c), int(n), int(i), float(f))
        for a, b, c, n, i, f in response.json()["streams"]
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI server with known token timings.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    defaults = FakeTiming()
    for field in dataclasses.fields(FakeTiming):
        value = getattr(defaults, field.name)
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args(argv)
    timing = FakeTiming(**{f.name: getattr(args, f.name) for f in dataclasses.fields(FakeTiming)})
    serve(args.host, args.port, timing)


if __name__ == "__main__":
    main()
