"""The front of a TorchServe pod: llmctl's API key checked before anything reaches TorchServe.

TorchServe listens on the pod's loopback only (inference and management, `config.py`); this gateway
listens on the serving port and forwards each request to TorchServe's inference API. It runs beside
TorchServe in the container (started by ``start.py``); aiohttp carries the HTTP on both sides
(``aiohttp.web`` serves the port, an ``aiohttp.ClientSession`` forwards), pinned in
``requirements.txt`` and installed from the runtime's lock.

- **llmctl's key.** With ``LLMCTL_API_KEY`` set (``exposure.api_key``), every request but
  ``GET /ping`` (the probes) must carry ``Authorization: Bearer <key>``; otherwise the same 401 as
  the shared app's (``serving/common/auth.py``, :func:`check_bearer`: constant-time compare, OpenAI
  error body) and nothing forwarded.
- **TorchServe's own token.** When TorchServe's token authorization is on, the gateway forwards with
  its current inference key (:mod:`.inference_key`: read from ``key_file.json``, renewed in the
  background before it expires, through this gateway's own client session). A request TorchServe
  refuses for its key (400 ``InvalidKeyException``) is sent once more with the key read again.
  Without the file the request goes as it came, minus the client's key.
- **Listening, or saying why not.** ``main`` tells the start module on the pipe named by
  ``LLMCTL_TS_READY_FD`` whether it listens (``listening``) or why it cannot (the port taken), so
  the container stops before TorchServe starts behind a port that is not the gateway's.
- **Each request checked on its own.** aiohttp parses every request on a kept-alive connection
  separately (a request with both ``Content-Length`` and ``Transfer-Encoding`` is refused by its
  parser), and each one passes the key check before anything is read or forwarded. The body is read
  whole, at most ``max_request_size`` (``client_max_size``; a larger ``Content-Length`` gets 413
  before the body is sent, a chunked body over it 413 as it arrives), goes to TorchServe on a fresh
  connection, and the answer streams back as TorchServe sends it (chunked token streams included).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler
from yarl import URL

from llmctl.serving.common.auth import check_bearer, resolve_api_key
from llmctl.serving.torchserve_neuronx.config import RESPONSE_TIMEOUT_S
from llmctl.serving.torchserve_neuronx.inference_key import InferenceKey

LISTEN_PORT_ENV = "LLMCTL_TS_LISTEN_PORT"
BACKEND_PORT_ENV = "LLMCTL_TS_BACKEND_PORT"
MANAGEMENT_PORT_ENV = "LLMCTL_TS_MANAGEMENT_PORT"
KEY_FILE_ENV = "LLMCTL_TS_KEY_FILE"
MAX_BODY_ENV = "LLMCTL_TS_MAX_BODY"
PARENT_ENV = "LLMCTL_TS_PARENT_PID"  # the process that becomes TorchServe: the gateway ends with it
READY_FD_ENV = "LLMCTL_TS_READY_FD"  # a pipe to the start module: one line, LISTENING or why not
LISTENING = "listening"
KEY_FILE = "key_file.json"  # TorchServe's name, in its working directory
OPEN_PATHS = frozenset({"/ping"})
#: never forwarded either way: hop-by-hop fields (aiohttp frames each side itself) and the client's key
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "authorization",
        "content-length",
    }
)


#: as long as TorchServe itself waits for an answer (the first request after a cold start may
#: compile); aiohttp's default, 300 s in all (aiohttp/client.py DEFAULT_TIMEOUT), cut such a request off
UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=RESPONSE_TIMEOUT_S)


def _refusal(status: int, message: str) -> web.Response:
    """The gateway's own errors (413, 502), in TorchServe's error shape."""
    return web.json_response({"code": status, "type": "llmctl", "message": message}, status=status)


@dataclass
class Gateway:
    """The serving port's listener (see the module docstring)."""

    backend_port: int
    key: InferenceKey
    api_key: str | None
    max_body: int
    _session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        """The aiohttp application: every method and path, each request checked on its own."""
        app = web.Application(client_max_size=self.max_body)
        app.router.add_route("*", "/{path:.*}", self.handle, expect_handler=self.expect)
        app.cleanup_ctx.append(self._client)
        return app

    async def _client(self, app: web.Application) -> AsyncIterator[None]:
        # one connection to TorchServe per request (Connection: close): nothing pooled between clients
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=UPSTREAM_TIMEOUT
        ) as session:
            self._session = session
            try:
                yield
            finally:
                await self.key.close()  # a renewal still under way uses this session
        self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The client to TorchServe (inference and token APIs alike), while the application runs."""
        assert self._session is not None, "the gateway's application is not running"
        return self._session

    async def expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect: 100-continue`` (curl, for PUTs and POST bodies over 1 MB: everything.curl.dev
        http/post/expect100): refused before the body is sent,
        or answered by aiohttp's own handler."""
        refused = self._check(request)
        if refused is not None:
            return refused
        await _default_expect_handler(request)
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        refused = self._check(request)
        if refused is not None:
            return refused
        try:
            body = await request.read()  # aiohttp stops at client_max_size, chunked bodies included
        except web.HTTPRequestEntityTooLarge:
            return _refusal(413, f"the request body is over {self.max_body} bytes")
        headers = [(n, v) for n, v in request.headers.items() if n.lower() not in _HOP]
        key = await self.key.current(self.session)
        answer = await self._forward(request, headers, body, key, retry=key is not None)
        if answer is None:  # TorchServe refused its key: read it again, once
            key = await self.key.current(self.session, reread=True)
            answer = await self._forward(request, headers, body, key, retry=False)
        assert answer is not None
        return answer

    def _check(self, request: web.Request) -> web.Response | None:
        if self.api_key is not None and not (request.method == "GET" and request.path in OPEN_PATHS):
            refused = check_bearer(request.headers.get("Authorization"), self.api_key)
            if refused is not None:
                return web.Response(status=refused.status, body=refused.body(), headers=refused.headers())
        if (request.content_length or 0) > self.max_body:
            return _refusal(413, f"the request body is over {self.max_body} bytes")
        return None

    async def _forward(
        self,
        request: web.Request,
        headers: list[tuple[str, str]],
        body: bytes,
        key: str | None,
        *,
        retry: bool,
    ) -> web.StreamResponse | None:
        """Send the request to TorchServe and stream its answer back; with ``retry``, a refusal of
        TorchServe's key gives None (nothing sent to the client yet)."""
        sent = [*headers, *([("Authorization", f"Bearer {key}")] if key is not None else [])]
        response: web.StreamResponse | None = None
        url = URL(f"http://127.0.0.1:{self.backend_port}{request.raw_path}", encoded=True)
        try:
            async with self.session.request(
                request.method,
                url,
                headers=sent,
                data=body,
                allow_redirects=False,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
            ) as upstream:
                back = [(n, v) for n, v in upstream.headers.items() if n.lower() not in _HOP]
                if retry and upstream.status == 400:
                    refusal = await upstream.read()
                    if b"InvalidKeyException" in refusal:
                        return None
                    return web.Response(status=400, body=refusal, headers=back)
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=back)
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():  # token streams as TorchServe sends them
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientConnectorError:
            return _refusal(502, "TorchServe is not answering yet")
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            if response is not None:  # the answer has begun: the connection closes mid-stream
                raise
            return _refusal(502, f"TorchServe failed the request ({type(error).__name__}: {error})")


async def serve(listen_port: int, gateway: Gateway, host: str = "0.0.0.0") -> web.AppRunner:
    """Start listening (the caller runs the loop, and ``cleanup()``s the runner to stop)."""
    runner = web.AppRunner(gateway.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, listen_port).start()
    return runner


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


def _tell_start(line: str) -> None:
    """One line to the start module, when it waits for one (``READY_FD_ENV``)."""
    fd = os.environ.get(READY_FD_ENV)
    if fd:
        os.write(int(fd), f"{line}\n".encode())
        os.close(int(fd))


def main() -> None:
    """``python -m llmctl.serving.torchserve_neuronx.gateway``: serve until TorchServe (the process
    ``start.py`` became) is gone. A port it cannot listen on ends it at once (exit 1), the reason
    told to the start module (or printed, run on its own)."""
    port, gateway = gateway_from_env()
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())

    async def run() -> None:
        try:
            runner = await serve(port, gateway)
        except OSError as error:
            if os.environ.get(READY_FD_ENV):
                _tell_start(str(error))
                raise SystemExit(1) from None
            raise SystemExit(f"llmctl's gateway cannot listen on port {port}: {error}") from None
        _tell_start(LISTENING)
        try:
            while os.getppid() == parent:
                await asyncio.sleep(1.0)
        finally:
            await runner.cleanup()

    asyncio.run(run())


if __name__ == "__main__":
    main()
