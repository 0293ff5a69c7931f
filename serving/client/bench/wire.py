"""HTTP/1.1 for ``llmctl bench``: keep-alive connections on asyncio that stamp every socket read.

A response's bytes are parsed as they come in by httptools (the llhttp parser uvicorn uses), inside
the connection's protocol: ``data_received`` notes the moment of each read, and every piece of body
that read carried is kept with that moment (:attr:`Connection.raw`). The task that sent the request
is woken once, when its response is complete (or early, when a read carries ``watch``: a stream's
error event), not once per chunk. At concurrency 64 with 100 chunks a request, that is 25,600
task wake-ups fewer in a 256-request window; measured against the recording server, the client's
CPU in the window went from 1.05-1.29 s with aiohttp's streams to 0.45-0.58 s (docs/bench.md).

What a load generator needs and nothing else: ``http`` and ``https`` (certificates verified with
the system's trust store, made on the first ``https`` connection), one connection pool per run with
reuse of idle connections, ``Content-Length`` and chunked bodies and bodies that end when the
server closes, TCP_NODELAY, headers and body in one write. No redirects, proxies, cookies or
compression: a benchmark's request goes where it is sent, as it is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
import sys
import time
from collections.abc import Awaitable
from typing import NamedTuple, TypeVar, cast
from urllib.parse import quote, urlsplit

import httptools


class WireError(Exception):
    """A request that did not get a whole HTTP answer."""


class ConnectError(WireError):
    """No connection to the server (refused, unresolvable, TLS refused, or too slow to connect)."""


class ProtocolError(WireError):
    """The server closed the connection before the answer was complete, or broke HTTP."""


T = TypeVar("T")


async def within(seconds: float, step: Awaitable[T]) -> T:
    """``step``, or TimeoutError after ``seconds``: a deadline on this task on Python 3.11+ (3.11's
    ``wait_for`` can swallow a cancellation that comes as its inner task ends)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await step
    return await asyncio.wait_for(step, seconds)  # pragma: no cover - Python 3.10


class Target(NamedTuple):
    """Where a URL's requests go: the connection's origin and the request line's path."""

    scheme: str
    host: str
    port: int
    host_header: str
    path: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)


@functools.lru_cache(maxsize=64)
def target(url: str) -> Target:
    """The :class:`Target` of an absolute ``http(s)://`` URL (ValueError for anything else): the
    host in its IDNA form, the path and query percent-encoded where a request line needs it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    default = 443 if parts.scheme == "https" else 80
    port = parts.port or default
    try:
        host = (
            parts.hostname.encode("idna").decode("ascii") if not parts.hostname.isascii() else parts.hostname
        )
    except UnicodeError as error:
        raise ValueError(f"not a valid host name: {parts.hostname!r}") from error
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if parts.port in (None, default) else f"{shown}:{port}"
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return Target(parts.scheme, host, port, host_header, path)


def header_block(headers: dict[str, str]) -> bytes:
    """Header lines (each ending in CRLF) to send with every request; ValueError for a name or
    value that would break the request (a line break in an API key, say)."""
    lines = []
    for name, value in headers.items():
        if not name or any(c in name for c in ":\r\n ") or "\r" in value or "\n" in value:
            raise ValueError(f"header {name!r} holds a line break or a character a header name cannot")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("latin-1")


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; :meth:`send` starts an exchange, :meth:`wait` ends it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.now = 0.0  # when the latest read came off the socket (perf_counter)
        self.raw: list[tuple[float, bytes]] = []  # the body of the current answer, read by read
        self.status = 0
        self.first_byte: float | None = None
        self.complete = False
        self.keep_alive = False
        self.watch = b""
        self.error: WireError | None = None
        self._framed = False  # the answer has a Content-Length or is chunked (else it ends at close)
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[None] | None = None

    # asyncio's protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # asyncio and uvloop set it on TCP sockets already; a request must not wait for an ACK
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.now = time.perf_counter()
        parser = self._parser
        if parser is None or self.complete:
            self._fail(ProtocolError("the server sent bytes nobody asked for"))
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(ProtocolError(f"the server's answer is not valid HTTP/1.1 ({error})"))
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolError("the server switched protocols (HTTP 101); a benchmark needs HTTP/1.1"))

    def eof_received(self) -> bool:
        # the server is done with this connection (an idle one timed out, say): no request may
        # take it from the pool any more, though connection_lost comes only on a later turn
        self.closed = True
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._parser is not None and not self.complete:
            if self.status and not self._framed and exc is None:
                self.on_message_complete()  # an answer that ends where the connection does
            else:
                reason = f": {exc}" if exc else ""
                self._fail(ProtocolError(f"the server closed the connection before the answer ended{reason}"))

    # httptools' callbacks

    def on_message_begin(self) -> None:
        self.first_byte = self.now

    def on_header(self, name: bytes, value: bytes) -> None:
        lowered = name.lower()
        if lowered == b"content-length" or (lowered == b"transfer-encoding" and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self.status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.raw.append((self.now, body))
        if self.watch and self.watch in body:
            self._wake()

    def on_message_complete(self) -> None:
        assert self._parser is not None
        if 100 <= self.status < 200:
            # an interim answer (103 Early Hints, say): the real one follows on the same connection
            self.status, self._framed = 0, False
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()

    # the exchange

    def send(
        self,
        request: bytes,
        raw: list[tuple[float, bytes]] | None = None,
        *,
        watch: bytes = b"",
    ) -> float:
        """Write ``request`` (head and body) in one write; the answer's body goes to ``raw``.

        Returns the moment of the write (right before the bytes go to the socket).
        """
        assert self.transport is not None and self._waiter is None
        self.raw = [] if raw is None else raw
        self.status, self.first_byte, self.complete, self.keep_alive = 0, None, False, False
        self.watch, self._framed, self.error = watch, False, None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter = asyncio.get_running_loop().create_future()
        written = time.perf_counter()
        self.transport.write(request)
        return written

    async def wait(self) -> None:
        """Until the answer is complete, or a read carried ``watch`` (then ``complete`` is still
        False and the next call waits on); ProtocolError when the connection broke first."""
        if self.error is not None:
            raise self.error
        if self.complete:
            return
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        await waiter

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.closed

    @property
    def unanswered(self) -> bool:
        """The server closed the connection without a byte of answer to the request sent on it."""
        return self.error is not None and self.first_byte is None

    def finish(self) -> None:
        """The exchange is over: nothing more is awaited (bytes that still come are an error)."""
        self._waiter = None
        self._parser = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, error: WireError) -> None:
        self.error = error
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self._parser = None
        self.close()


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    # the system's trust store (SSL_CERT_FILE / SSL_CERT_DIR honoured), made on the first https
    # connection only: loading it costs tens of milliseconds
    return ssl.create_default_context()


class Pool:
    """The connections of one run: idle ones are reused (last in, first out), new ones opened on
    demand with a connect timeout. Use it inside one running event loop; :meth:`close` at the end."""

    def __init__(self, connect_timeout: float = 10.0, tls: ssl.SSLContext | None = None) -> None:
        self.connect_timeout = connect_timeout
        self.tls = tls  # for https: None is the system's trust store
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._all: set[Connection] = set()

    async def acquire(self, where: Target, *, fresh: bool = False) -> tuple[Connection, bool]:
        """An open connection to ``where`` (a new one with ``fresh``) and whether it is new;
        ConnectError when none opens."""
        idle = self._idle.get(where.origin)
        while idle and not fresh:
            connection = idle.pop()
            transport = connection.transport
            if not connection.closed and transport is not None and not transport.is_closing():
                return connection, False
            connection.close()
            self._all.discard(connection)
        loop = asyncio.get_running_loop()
        tls = (self.tls or _tls_context()) if where.scheme == "https" else None
        opening = loop.create_connection(
            Connection, where.host, where.port, ssl=tls, server_hostname=where.host if tls else None
        )
        try:
            _transport, connection = await within(self.connect_timeout, opening)
        except asyncio.TimeoutError as error:
            raise ConnectError(
                f"no connection to {where.host}:{where.port} within {self.connect_timeout:g} s"
            ) from error
        except (OSError, ssl.SSLError) as error:
            raise ConnectError(f"cannot connect to {where.host}:{where.port}: {error}") from error
        self._all.add(connection)
        return connection, True

    def release(self, where: Target, connection: Connection) -> None:
        """Hand a connection back after its exchange: kept when it can carry another, else closed."""
        connection.finish()
        if connection.reusable():
            self._idle.setdefault(where.origin, []).append(connection)
        else:
            connection.close()
            self._all.discard(connection)

    def close(self) -> None:
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()


def request_bytes(method: str, where: Target, headers: bytes, body: bytes = b"") -> bytes:
    """One request's bytes: the request line, Host, Content-Length (with a body), ``headers``."""
    length = f"Content-Length: {len(body)}\r\n" if body or method == "POST" else ""
    head = f"{method} {where.path} HTTP/1.1\r\nHost: {where.host_header}\r\n{length}"
    return head.encode("latin-1") + headers + b"\r\n" + body


# how long a plain GET (the endpoint probe, a connection's first request) may take
FETCH_TIMEOUT_S = 10.0


async def fetch(
    pool: Pool, url: str, headers: bytes = b"", *, timeout: float = FETCH_TIMEOUT_S
) -> tuple[int, bytes]:
    """``GET url``: its status and whole body (WireError, or TimeoutError after ``timeout`` s)."""
    where = target(url)

    async def get() -> tuple[int, bytes]:
        connection, _new = await pool.acquire(where)
        try:
            connection.send(request_bytes("GET", where, headers))
            await connection.wait()
            return connection.status, b"".join(piece for _now, piece in connection.raw)
        finally:
            pool.release(where, connection)

    return await within(timeout, get())
