"""The front of a TorchServe pod: llmctl's API key checked before anything reaches TorchServe.

TorchServe listens on the pod's loopback only (inference and management, `config.py`); this gateway
listens on the serving port and forwards each request to TorchServe's inference API. It runs beside
TorchServe in the container (started by ``start.py``), on the standard library alone (the
TorchServe image's Python gets no extra packages).

- **llmctl's key.** With ``LLMCTL_API_KEY`` set (``exposure.api_key``), every request but
  ``GET /ping`` (the probes) must carry ``Authorization: Bearer <key>``, compared in constant time;
  otherwise a 401 and nothing forwarded.
- **TorchServe's own token.** When TorchServe's token authorization is on (built in from 0.11.1,
  with the endpoint plugin in 0.11.0), it writes ``key_file.json`` in its working directory: an
  inference key, a management key and an API key, the first two with an ``expiration time``
  (``token_expiration_min``, 60 minutes by default). The gateway forwards with the current
  inference key, reads the file again whenever it changes, and before the key expires asks
  TorchServe for a new one (``GET /token?type=inference`` on the management API with the API key).
  A request TorchServe refuses for its key (400 ``InvalidKeyException``) is sent once more with the
  key read again. Without the file the request goes as it came, minus the client's key.
- **One request per connection.** The request (its body read whole, at most ``max_request_size``)
  goes to TorchServe with ``Connection: close`` and the answer streams back as TorchServe sends it
  (chunked token streams included), then both connections close: a second request can never ride
  on a connection that was checked once. A chunked request body gets 411.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import re
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from llmctl.serving.common.auth import resolve_api_key

LISTEN_PORT_ENV = "LLMCTL_TS_LISTEN_PORT"
BACKEND_PORT_ENV = "LLMCTL_TS_BACKEND_PORT"
MANAGEMENT_PORT_ENV = "LLMCTL_TS_MANAGEMENT_PORT"
KEY_FILE_ENV = "LLMCTL_TS_KEY_FILE"
MAX_BODY_ENV = "LLMCTL_TS_MAX_BODY"
PARENT_ENV = "LLMCTL_TS_PARENT_PID"  # the process that becomes TorchServe: the gateway ends with it
KEY_FILE = "key_file.json"  # TorchServe's name, in its working directory
OPEN_PATHS = frozenset({"/ping"})
#: a key this close to its expiration time is renewed before the request is forwarded
RENEW_MARGIN_S = 120.0
_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "expect", "authorization"}
)
_INSTANT = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$")


def parse_instant(text: str) -> float:
    """Unix seconds of a Java ``Instant.toString()`` (``2024-02-16T21:12:24.801167Z``)."""
    match = _INSTANT.match(text.strip())
    if not match:
        raise ValueError(f"not an instant: {text!r}")
    whole = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return whole.timestamp() + float("0." + (match.group(2) or "0"))


@dataclass
class InferenceKey:
    """TorchServe's current inference key, from its key file, renewed before it expires."""

    path: Path
    management_port: int
    _mtime: int | None = None
    _key: str | None = None
    _expires: float = 0.0
    _api_key: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _read(self) -> bool:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._mtime, self._key = None, None
            return False
        if mtime != self._mtime:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                key, api_key = str(data["inference"]["key"]), str(data["API"]["key"])
                expires = parse_instant(str(data["inference"]["expiration time"]))
            except (OSError, ValueError, KeyError, TypeError):
                return self._key is not None  # caught mid-write: the last key, and read it again next time
            self._key, self._api_key, self._expires, self._mtime = key, api_key, expires, mtime
        return True

    def current(self, *, reread: bool = False) -> str | None:
        """The key to forward with (None: TorchServe's token authorization is off)."""
        with self._lock:
            if reread:
                self._mtime = None
            if not self._read():
                return None
            if self._expires - time.time() < RENEW_MARGIN_S:
                self._renew()
            return self._key

    def _renew(self) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.management_port}/token?type=inference",
            headers={"Authorization": f"Bearer {self._api_key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                reply.read()
        except OSError:
            return  # TorchServe refuses the old key once it expires; the next request tries again
        self._mtime = None  # TorchServe rewrote the file
        self._read()


def _field(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name.strip(), value.strip()


def _response(status: int, reason: str, body: dict[str, object], extra: str = "") -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        f"{extra}Connection: close\r\n\r\n"
    )
    return head.encode() + data


def _refusal(status: int, reason: str, message: str, extra: str = "") -> bytes:
    return _response(status, reason, {"code": status, "type": "llmctl", "message": message}, extra)


@dataclass
class Gateway:
    """The serving port's listener (see the module docstring)."""

    backend_port: int
    key: InferenceKey
    api_key: str | None
    max_body: int

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._handle(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = [*lines[0].split(" ", 2), "", ""][:3]
        headers = [_field(line) for line in lines[1:] if ":" in line]
        fields = {name.lower(): value for name, value in headers}
        refused = self._check(method, target, fields)
        if refused:
            writer.write(refused)
            await writer.drain()
            return
        if fields.get("expect", "").lower() == "100-continue":  # curl, for bodies over 1 KiB
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        body = await reader.readexactly(int(fields.get("content-length") or 0))
        kept = [(n, v) for n, v in headers if n.lower() not in _HOP]
        key = await asyncio.to_thread(self.key.current)
        answer = await self._forward(method, target, kept, body, key, writer, retry=key is not None)
        if answer is not None:  # TorchServe refused its key: read it again, once
            key = await asyncio.to_thread(self.key.current, reread=True)
            await self._forward(method, target, kept, body, key, writer, retry=False)

    def _check(self, method: str, target: str, fields: dict[str, str]) -> bytes | None:
        path = target.split("?", 1)[0]
        if self.api_key is not None and not (method == "GET" and path in OPEN_PATHS):
            scheme, _, presented = fields.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                presented.strip().encode(), self.api_key.encode()
            ):
                message = (
                    "incorrect API key provided"
                    if presented
                    else "missing API key: send 'Authorization: Bearer <key>'"
                )
                return _refusal(401, "Unauthorized", message, "WWW-Authenticate: Bearer\r\n")
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return _refusal(411, "Length Required", "send the request body with a Content-Length")
        length = fields.get("content-length") or "0"
        if not length.isdigit():
            return _refusal(400, "Bad Request", "the Content-Length is not a number")
        if int(length) > self.max_body:
            return _refusal(413, "Payload Too Large", f"the request body is over {self.max_body} bytes")
        return None

    async def _forward(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        key: str | None,
        writer: asyncio.StreamWriter,
        *,
        retry: bool,
    ) -> bytes | None:
        """Send the request to TorchServe and stream its answer back; with ``retry``, a refusal of
        TorchServe's key is returned instead of sent."""
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend_port)
        except OSError:
            writer.write(_refusal(502, "Bad Gateway", "TorchServe is not answering yet"))
            await writer.drain()
            return None
        try:
            lines = [f"{method} {target} HTTP/1.1", *(f"{n}: {v}" for n, v in headers), "Connection: close"]
            if key is not None:
                lines.append(f"Authorization: Bearer {key}")
            up_writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await up_writer.drain()
            head = await up_reader.readuntil(b"\r\n\r\n")
            if retry and head.split(b" ", 2)[1:2] == [b"400"]:
                rest = await up_reader.read()
                if b"InvalidKeyException" in rest:
                    return head + rest
                writer.write(head + rest)
                await writer.drain()
                return None
            writer.write(head)
            while chunk := await up_reader.read(1 << 16):
                writer.write(chunk)
                await writer.drain()
            await writer.drain()
            return None
        finally:
            up_writer.close()


async def serve(listen_port: int, gateway: Gateway, host: str = "0.0.0.0") -> asyncio.Server:
    """Start listening (the caller runs the loop)."""
    return await asyncio.start_server(gateway.handle, host, listen_port, limit=1 << 16)


def gateway_from_env() -> tuple[int, Gateway]:
    """(listen port, gateway) from the variables ``start.py`` sets."""
    management = int(os.environ[MANAGEMENT_PORT_ENV])
    key = InferenceKey(Path(os.environ.get(KEY_FILE_ENV) or KEY_FILE), management)
    gateway = Gateway(
        backend_port=int(os.environ[BACKEND_PORT_ENV]),
        key=key,
        api_key=resolve_api_key(),
        max_body=int(os.environ.get(MAX_BODY_ENV) or 6553500),
    )
    return int(os.environ[LISTEN_PORT_ENV]), gateway


def main() -> None:
    """``python -m llmctl.serving.torchserve_neuronx.gateway``: serve until TorchServe (the process
    ``start.py`` became) is gone."""
    port, gateway = gateway_from_env()
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())

    async def run() -> None:
        server = await serve(port, gateway)
        async with server:
            while os.getppid() == parent:
                await asyncio.sleep(1.0)

    asyncio.run(run())


if __name__ == "__main__":
    main()
