"""The bench client's HTTP/1.1 connections (serving/client/bench/wire.py) against real sockets.

Each test starts a small asyncio server in the test's own event loop that writes exactly the bytes
the case needs (chunked, Content-Length, ended by a close, broken, TLS), and drives the client's
connections and pool through it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from llmctl.errors import EndpointError
from llmctl.serving.client.bench import wire
from llmctl.serving.client.bench.client import RequestRecord, request_headers, stream_request

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler, tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    return server, f"{'https' if tls else 'http'}://127.0.0.1:{port}"


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    return head + (await reader.readexactly(length) if length else b"")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(main())  # type: ignore[arg-type]


def test_each_read_keeps_its_moment_and_the_task_wakes_once_per_answer() -> None:
    pieces = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]
    writing: list[float] = []  # the moment before each piece's write

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(CHUNKED)
        for piece in pieces:
            writing.append(time.perf_counter())
            writer.write(_chunk(piece))
            await writer.drain()
            await asyncio.sleep(0.03)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await reader.read()  # until the client closes

    async def main() -> tuple[list[tuple[float, bytes]], int, wire.Connection]:
        server, url = await _serve(handler)
        pool = wire.Pool()
        where = wire.target(url + "/v1/chat/completions")
        connection, new = await pool.acquire(where)
        assert new
        sent = connection.send(wire.request_bytes("POST", where, b"", b"{}"))
        wakes = 0
        while not connection.complete:
            await connection.wait()
            wakes += 1
        assert connection.first_byte is not None and sent <= connection.first_byte
        raw = list(connection.raw)
        pool.release(where, connection)
        pool.close()
        server.close()
        return raw, wakes, connection

    raw, wakes, connection = _run(main)
    assert wakes == 1  # not once per chunk
    assert [piece for _now, piece in raw] == pieces
    stamps = [now for now, _piece in raw]
    # the last piece was written at least two sleeps after the first began, one after the first
    # piece was read (a busy loop may read the first late, never after the second was written)
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 0.025
    # each piece is stamped when its read came in: after the server began writing it, and before it
    # began the next (server and client share one loop: the read runs before the server's timer)
    for i, stamp in enumerate(stamps):
        assert writing[i] <= stamp
        if i + 1 < len(writing):
            assert stamp < writing[i + 1]
    assert connection.status == 200 and connection.keep_alive


def test_an_idle_connection_is_reused_and_one_the_server_closes_is_not() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await _read_request(reader)
            close = b"/close" in request.split(b"\r\n", 1)[0]
            extra = b"Connection: close\r\n" if close else b""
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + extra + b"\r\nok")
            await writer.drain()
            if close:
                writer.close()
                return

    async def main() -> list[bool]:
        server, url = await _serve(handler)
        pool = wire.Pool()
        news = []
        for path in ("/a", "/b", "/close", "/c"):
            where = wire.target(url + path)
            connection, new = await pool.acquire(where)
            news.append(new)
            connection.send(wire.request_bytes("GET", where, b""))
            await connection.wait()
            assert (connection.status, b"".join(p for _n, p in connection.raw)) == (200, b"ok")
            pool.release(where, connection)
        pool.close()
        server.close()
        return news

    # the first opens, the next two reuse it, and after "Connection: close" a new one is opened
    assert _run(main) == [True, False, False, True]


def test_a_body_without_length_ends_where_the_connection_does() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
        await writer.drain()
        writer.close()

    async def main() -> tuple[int, bytes]:
        server, url = await _serve(handler)
        pool = wire.Pool()
        try:
            return await wire.fetch(pool, url + "/v1/models")
        finally:
            pool.close()
            server.close()

    assert _run(main) == (200, b"all of it")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (CHUNKED + _chunk(b"data: one\n\n"), "closed the connection before the answer ended"),
        (b"SMTP ready\r\n\r\n", "not valid HTTP/1.1"),
    ],
)
def test_a_broken_answer_is_a_protocol_error_that_keeps_what_came(answer: bytes, message: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(answer)
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()

    async def main() -> RequestRecord:
        server, url = await _serve(handler)
        pool = wire.Pool()
        record = RequestRecord(index=0, endpoint=url + "/v1")
        try:
            return await stream_request(pool, record, b"{}", request_headers(None), timeout=5, parse=False)
        finally:
            pool.close()
            server.close()

    record = _run(main)
    assert record.error_type == "protocol_error" and message in (record.error or "")
    if answer.startswith(b"HTTP"):
        assert [piece for _now, piece in record.raw] == [b"data: one\n\n"] and record.http_status == 200


def test_an_error_event_wakes_the_task_before_the_answer_ends() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(CHUNKED + _chunk(b'data: {"error": {"message": "overloaded"}}\n\n'))
        await writer.drain()
        await asyncio.sleep(30)  # a server that never ends the stream

    async def main() -> tuple[RequestRecord, float]:
        server, url = await _serve(handler)
        pool = wire.Pool()
        record = RequestRecord(index=0, endpoint=url + "/v1")
        began = time.perf_counter()
        try:
            await stream_request(pool, record, b"{}", request_headers(None), timeout=20, parse=False)
            return record, time.perf_counter() - began
        finally:
            pool.close()
            server.close()

    record, took = _run(main)
    assert (record.error_type, record.error) == ("stream_error", "overloaded")
    assert took < 10  # it did not wait for the timeout


def test_refused_and_unresolvable_are_connect_errors() -> None:
    async def main(url: str) -> str:
        pool = wire.Pool(connect_timeout=5)
        try:
            await pool.acquire(wire.target(url))
        except wire.ConnectError as error:
            return str(error)
        finally:
            pool.close()
        raise AssertionError("connected")

    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        assert f"cannot connect to 127.0.0.1:{port}" in _run(lambda: main(f"http://127.0.0.1:{port}/v1"))
    # refused by the resolver, or (offline, a slow one) not in time: a ConnectError naming the host
    assert "no-such-host.invalid:80" in _run(lambda: main("http://no-such-host.invalid/v1"))


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_https_verifies_the_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _read_request(reader)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
        await writer.drain()

    async def main(trusted: ssl.SSLContext | None) -> tuple[int, bytes] | str:
        server, url = await _serve(handler, server_tls)
        pool = wire.Pool(tls=trusted)
        try:
            return await wire.fetch(pool, url + "/v1/models")
        except wire.ConnectError as error:
            return str(error)
        finally:
            pool.close()
            server.close()

    # the system's trust store does not know this certificate: refused, with the reason
    refused = _run(lambda: main(None))
    assert isinstance(refused, str) and "CERTIFICATE_VERIFY_FAILED" in refused
    assert _run(lambda: main(ssl.create_default_context(cafile=str(cert)))) == (200, b"secret")


def test_an_api_key_that_would_break_the_request_is_refused() -> None:
    assert request_headers("sk-1") == (
        b"Accept: text/event-stream\r\nContent-Type: application/json\r\n"
        b"User-Agent: llmctl-bench\r\nAuthorization: Bearer sk-1\r\n"
    )
    with pytest.raises(EndpointError, match="line break"):
        request_headers("sk-1\r\nX-Admin: yes")


def test_a_request_is_written_in_one_piece_with_host_and_length() -> None:
    where = wire.target("https://bücher.example/v1/modèles a?q=é")
    assert (where.host, where.host_header, where.port) == ("xn--bcher-kva.example",) * 2 + (443,)
    assert where.path == "/v1/mod%C3%A8les%20a?q=%C3%A9"
    with pytest.raises(ValueError, match="not a valid host name"):
        wire.target("http://" + "a" * 70 + "é.example/v1")
    where = wire.target("http://[::1]:8000/v1/chat/completions?x=1")
    assert (where.host, where.port, where.host_header, where.path) == (
        "::1",
        8000,
        "[::1]:8000",
        "/v1/chat/completions?x=1",
    )
    assert wire.request_bytes("POST", where, b"A: b\r\n", b"{}") == (
        b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: [::1]:8000\r\nContent-Length: 2\r\nA: b\r\n\r\n{}"
    )
    assert wire.target("https://api.example.com/v1/models").port == 443
    with pytest.raises(ValueError, match="not an http"):
        wire.target("ftp://example.com/")


def test_a_pooled_connection_the_server_closed_is_replaced() -> None:
    """The server closes a kept-alive connection (its idle timeout) either before the next request
    (the pool sees it and opens another) or as the request goes out, unanswered (the request goes
    once more, on a new connection): no request fails for it."""
    served: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = len(served)
        served.append(number)
        await _read_request(reader)
        body = b"data: [DONE]\n\n"
        writer.write(CHUNKED + _chunk(body) + b"0\r\n\r\n")
        await writer.drain()
        if number == 0:
            writer.close()  # idle timeout: closed at once, before the next request
            return
        if number == 1:
            await _read_request(reader)  # the next request came in time, and is dropped
            writer.close()
            return
        await reader.read()

    async def main() -> list[RequestRecord]:
        server, url = await _serve(handler)
        pool = wire.Pool()
        records = []
        try:
            for index in range(3):
                record = RequestRecord(index=index, endpoint=url + "/v1")
                await stream_request(pool, record, b"{}", request_headers(None), timeout=5, parse=False)
                records.append(record)
                await asyncio.sleep(0.05)  # the first close reaches the client
            return records
        finally:
            pool.close()
            server.close()

    first, second, third = _run(main)
    assert [r.status for r in (first, second, third)] == ["received"] * 3, [r.error for r in (second, third)]
    assert first.connected is not None and second.connected is not None  # a new connection each
    assert third.connected is not None  # sent on the kept one, dropped, then sent again on a new one
    assert len(served) == 3


def test_an_interim_answer_is_skipped_and_an_upgrade_is_refused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await _read_request(reader)
        if b"/upgrade" in request.split(b"\r\n", 1)[0]:
            writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.02)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read()

    async def main(path: str) -> tuple[int, bytes] | str:
        server, url = await _serve(handler)
        pool = wire.Pool()
        try:
            return await wire.fetch(pool, url + path)
        except wire.ProtocolError as error:
            return str(error)
        finally:
            pool.close()
            server.close()

    assert _run(lambda: main("/v1/models")) == (200, b"ok")
    assert "switched protocols" in _run(lambda: main("/upgrade"))


def test_a_timed_out_request_leaves_no_connection_behind() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(CHUNKED + _chunk(b"data: one\n\n"))
        await writer.drain()
        await asyncio.sleep(30)

    async def main() -> tuple[RequestRecord, int, bool]:
        server, url = await _serve(handler)
        pool = wire.Pool()
        record = RequestRecord(index=0, endpoint=url + "/v1")
        try:
            await stream_request(pool, record, b"{}", request_headers(None), timeout=0.3, parse=False)
            kept = len(pool._all) + sum(len(idle) for idle in pool._idle.values())
            return record, kept, record.raw == [] or record.raw[0][1] == b"data: one\n\n"
        finally:
            pool.close()
            server.close()

    record, kept, kept_what_came = _run(main)
    assert record.error_type == "timeout" and kept == 0 and kept_what_came
