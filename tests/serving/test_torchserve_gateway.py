"""llmctl's gateway in front of TorchServe: the API key checked before anything reaches TorchServe, and
TorchServe's own rotating inference key handled for the client (real HTTP on loopback).

TorchServe itself (Java) does not run here; a stand-in on loopback plays its inference and management
APIs with the behaviour recorded from its source, pytorch/serve tag v0.11.0 (commit
34bc370174c7aa4588889b344ca9b5e48ff47a89, the version the pinned Neuron DLC installs; the same in
v0.12.0's ``frontend/server/.../util/TokenAuthorization.java``):

- ``plugins/endpoints/src/main/java/org/pytorch/serve/plugins/endpoint/Token.java``: the key file
  ``key_file.json`` in the working directory, pretty-printed JSON ``{"management": {"key",
  "expiration time"}, "inference": {"key", "expiration time"}, "API": {"key"}}``; keys are 6 random
  bytes in URL-safe base64; the expiration an ``Instant.toString()``; ``GET /token?type=inference``
  (management API, authorized by the API key) makes a new inference key and expiration and rewrites
  the file, answering an empty body; ``checkTokenAuthorization`` takes ``Authorization: Bearer <key>``
  and refuses a different or expired key.
- ``frontend/server/.../http/TokenAuthorizationHandler.java`` throws ``InvalidKeyException`` ("Token
  Authentication failed. Token either incorrect, expired, or not provided correctly"), a
  ``ModelException``, which ``http/HttpRequestHandler.java`` answers with 400 through
  ``util/NettyUtils.sendError``: ``{"code": 400, "type": "InvalidKeyException", "message": ...}``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmctl.serving.torchserve_neuronx.gateway import Gateway, serve
from llmctl.serving.torchserve_neuronx.inference_key import InferenceKey, parse_instant

API_KEY = "sk-llmctl-test-key"
REFUSED = "Token Authentication failed. Token either incorrect, expired, or not provided correctly"
CHUNKS = [b'{"text": "Hello"}\n', b'{"text": " world"}\n', b'{"text": "!"}\n']


def _instant(delta_s: float) -> str:
    """A Java ``Instant.toString()`` of now + delta (microseconds, as Instant.now() gives on Linux)."""
    return (datetime.now(timezone.utc) + timedelta(seconds=delta_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TorchServe:
    """Inference and management APIs on loopback, with or without token authorization."""

    def __init__(
        self, workdir: Path, *, tokens: bool, expires_in_s: float = 3600.0, write_delay_s: float = 0.0
    ) -> None:
        self.key_file = workdir / "key_file.json"
        self.write_delay_s = write_delay_s  # between switching to a new key and rewriting the file
        self.tokens = tokens
        self.seen: list[dict[str, str]] = []
        self.keys = {"management": self._key(), "inference": self._key(), "API": self._key()}
        self.expires = {"management": _instant(expires_in_s), "inference": _instant(expires_in_s)}
        if tokens:
            self._write()
        self.inference = self._server(self._inference)
        self.management = self._server(self._management)

    @staticmethod
    def _key() -> str:
        return base64.urlsafe_b64encode(secrets.token_bytes(6)).decode()

    def _write(self) -> None:
        body = {
            "management": {"key": self.keys["management"], "expiration time": self.expires["management"]},
            "inference": {"key": self.keys["inference"], "expiration time": self.expires["inference"]},
            "API": {"key": self.keys["API"]},
        }
        self.key_file.write_text(json.dumps(body, indent=2))

    def _authorized(self, headers: Any, kind: str) -> bool:
        if not self.tokens:
            return True
        scheme, _, token = (headers.get("Authorization") or "").partition(" ")
        expired = (
            kind != "API" and parse_instant(self.expires[kind]) <= datetime.now(timezone.utc).timestamp()
        )
        return scheme == "Bearer" and token == self.keys[kind] and not expired

    @staticmethod
    def _refuse(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"code": 400, "type": "InvalidKeyException", "message": REFUSED}).encode()
        handler.send_response(400)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _inference(self, handler: BaseHTTPRequestHandler) -> None:
        self.seen.append({k.lower(): v for k, v in handler.headers.items()})
        length = int(handler.headers.get("Content-Length") or 0)
        handler.rfile.read(length)
        if not self._authorized(handler.headers, "inference"):
            self._refuse(handler)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for chunk in CHUNKS:  # a token stream: one HTTP chunk per intermediate response
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")

    def _management(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path != "/token?type=inference" or not self._authorized(handler.headers, "API"):
            self._refuse(handler)
            return
        self.keys["inference"], self.expires["inference"] = self._key(), _instant(3600)
        threading.Event().wait(self.write_delay_s)
        self._write()
        handler.send_response(200)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _server(self, answer: Any) -> ThreadingHTTPServer:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                answer(self)

            def do_POST(self) -> None:
                answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return server

    def close(self) -> None:
        for server in (self.inference, self.management):
            server.shutdown()
            server.server_close()


@pytest.fixture
def run_gateway() -> Iterator[Any]:
    """Start the gateway in front of a TorchServe stand-in; yields a function returning its URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers: list[Any] = []

    def start(torchserve: TorchServe, api_key: str | None = API_KEY, max_body: int = 1 << 20) -> str:
        key = InferenceKey(torchserve.key_file, torchserve.management.server_address[1])
        gateway = Gateway(torchserve.inference.server_address[1], key, api_key, max_body)
        runner = asyncio.run_coroutine_threadsafe(serve(0, gateway, "127.0.0.1"), loop).result(10)
        servers.append((runner, torchserve))
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner, torchserve in servers:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        torchserve.close()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()  # closed here, not by the garbage collector at some later test


def _post(url: str, key: str | None, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{url}/predictions/llama", headers=headers, timeout=10, **kwargs)


def test_without_the_api_key_nothing_reaches_torchserve(tmp_path: Path, run_gateway: Any) -> None:
    torchserve = TorchServe(tmp_path, tokens=True)
    url = run_gateway(torchserve)
    missing = _post(url, None, json={"prompt": "hi"})
    wrong = _post(url, "sk-other", json={"prompt": "hi"})
    assert (missing.status_code, wrong.status_code) == (401, 401)
    # the shared app's 401 (serving/common/auth.py): the OpenAI error body, the Bearer challenge
    assert "missing API key" in missing.json()["error"]["message"]
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert wrong.headers["www-authenticate"] == "Bearer"
    assert torchserve.seen == []
    assert httpx.get(f"{url}/ping", timeout=10).status_code == 200  # the probes' path stays open


def test_with_the_key_the_stream_comes_through_with_torchserves_own_key(
    tmp_path: Path, run_gateway: Any
) -> None:
    torchserve = TorchServe(tmp_path, tokens=True)
    url = run_gateway(torchserve)
    with httpx.stream(
        "POST",
        f"{url}/predictions/llama",
        json={"prompt": "hi"},
        headers={"Authorization": f"Bearer {API_KEY}"},
    ) as reply:
        assert reply.status_code == 200
        assert b"".join(reply.iter_bytes()) == b"".join(CHUNKS)
    forwarded = torchserve.seen[-1]
    # TorchServe gets its inference key, never llmctl's, on a connection of its own
    assert forwarded["authorization"] == f"Bearer {torchserve.keys['inference']}"
    assert forwarded["connection"] == "close" and json.loads('{"prompt": "hi"}')


def test_every_request_on_a_kept_alive_connection_is_checked_on_its_own(
    tmp_path: Path, run_gateway: Any
) -> None:
    torchserve = TorchServe(tmp_path, tokens=True)
    url = run_gateway(torchserve)
    with httpx.Client(base_url=url, timeout=10) as client:  # one connection, kept alive
        ok = client.post(
            "/predictions/llama", json={"prompt": "a"}, headers={"Authorization": f"Bearer {API_KEY}"}
        )
        assert ok.status_code == 200 and ok.content == b"".join(CHUNKS)
        assert client.post("/predictions/llama", json={"prompt": "b"}).status_code == 401
        again = client.post(
            "/predictions/llama", json={"prompt": "c"}, headers={"Authorization": "Bearer sk-x"}
        )
        assert again.status_code == 401
    assert len(torchserve.seen) == 1  # only the keyed request reached TorchServe


def test_a_key_about_to_expire_is_renewed_through_the_token_api(tmp_path: Path, run_gateway: Any) -> None:
    """Renewed in the background: the request goes on with the key that is still valid (or, when the
    renewal beat it to TorchServe, which then refuses the old key, is sent again with the new one),
    the next ones with the new key."""
    torchserve = TorchServe(tmp_path, tokens=True, expires_in_s=30)  # inside the renewal margin
    old = torchserve.keys["inference"]
    url = run_gateway(torchserve)
    assert _post(url, API_KEY, json={"prompt": "hi"}).status_code == 200
    for _ in range(300):  # the renewal answers in milliseconds; 30 s at most
        if torchserve.keys["inference"] != old:
            break
        threading.Event().wait(0.1)
    assert torchserve.keys["inference"] != old
    assert _post(url, API_KEY, json={"prompt": "again"}).status_code == 200
    assert torchserve.seen[-1]["authorization"] == f"Bearer {torchserve.keys['inference']}"


def test_a_key_refused_while_the_file_is_rewritten_is_retried_after_the_renewal(
    tmp_path: Path, run_gateway: Any
) -> None:
    """TorchServe switches to the new key before it rewrites its key file: a request refused in between
    is sent again only once the renewal under way has its answer (file written), with the new key (the
    retry used to read the old file and hand the client TorchServe's 400)."""
    torchserve = TorchServe(tmp_path, tokens=True, expires_in_s=30, write_delay_s=1.0)
    old = torchserve.keys["inference"]
    url = run_gateway(torchserve)
    answers = [_post(url, API_KEY, json={"prompt": str(n)}).status_code for n in range(3)]
    assert answers == [200, 200, 200] and torchserve.keys["inference"] != old
    refused = [h for h in torchserve.seen if h["authorization"] == f"Bearer {old}"]
    assert torchserve.seen[-1]["authorization"] == f"Bearer {torchserve.keys['inference']}"
    assert len(torchserve.seen) == len(answers) + min(len(refused), 1)  # at most one retry


def test_an_expired_key_is_renewed_before_the_request_goes(tmp_path: Path, run_gateway: Any) -> None:
    torchserve = TorchServe(tmp_path, tokens=True, expires_in_s=-5)  # TorchServe refuses it already
    old = torchserve.keys["inference"]
    url = run_gateway(torchserve)
    assert _post(url, API_KEY, json={"prompt": "hi"}).status_code == 200
    assert [h["authorization"] for h in torchserve.seen] == [f"Bearer {torchserve.keys['inference']}"]
    assert torchserve.keys["inference"] != old


def test_a_key_torchserve_rotated_meanwhile_is_read_again(tmp_path: Path, run_gateway: Any) -> None:
    torchserve = TorchServe(tmp_path, tokens=True)
    url = run_gateway(torchserve)
    assert _post(url, API_KEY, json={"prompt": "a"}).status_code == 200
    # someone renewed the key (the /token API); the file changes, the gateway's copy is stale
    torchserve.keys["inference"] = torchserve._key()
    torchserve._write()
    assert _post(url, API_KEY, json={"prompt": "b"}).status_code == 200
    assert torchserve.seen[-1]["authorization"] == f"Bearer {torchserve.keys['inference']}"


def test_without_torchserve_tokens_the_request_goes_without_any_key(tmp_path: Path, run_gateway: Any) -> None:
    torchserve = TorchServe(tmp_path, tokens=False)  # 0.11.0 without the endpoint plugin: no key file
    url = run_gateway(torchserve)
    assert _post(url, API_KEY, json={"prompt": "hi"}).status_code == 200
    assert "authorization" not in torchserve.seen[-1]


def test_bodies_over_the_limit_are_refused_and_chunked_ones_go_with_their_length(
    tmp_path: Path, run_gateway: Any
) -> None:
    torchserve = TorchServe(tmp_path, tokens=False)
    url = run_gateway(torchserve, max_body=64)

    def stream(*parts: bytes) -> Iterator[bytes]:
        yield from parts

    assert _post(url, API_KEY, content=b"x" * 65).status_code == 413
    assert _post(url, API_KEY, content=stream(b"x" * 40, b"x" * 25)).status_code == 413  # chunked, over
    assert torchserve.seen == []
    assert _post(url, API_KEY, content=stream(b'{"prompt":', b' "hi"}')).status_code == 200
    forwarded = torchserve.seen[-1]  # TorchServe gets the whole body with its length, never chunked
    assert forwarded["content-length"] == "16" and "transfer-encoding" not in forwarded


def test_torchserve_not_up_yet_is_a_502(tmp_path: Path, run_gateway: Any) -> None:
    torchserve = TorchServe(tmp_path, tokens=False)
    url = run_gateway(torchserve)
    torchserve.inference.shutdown()
    torchserve.inference.server_close()
    assert httpx.get(f"{url}/ping", timeout=10).status_code == 502


class DroppingTorchServe(TorchServe):
    """Reads the request, then closes the connection without an answer (a worker that died)."""

    def _inference(self, handler: BaseHTTPRequestHandler) -> None:
        handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        handler.close_connection = True


def test_torchserve_dropping_the_connection_is_a_502_naming_it(tmp_path: Path, run_gateway: Any) -> None:
    url = run_gateway(DroppingTorchServe(tmp_path, tokens=False), api_key=None)
    answer = httpx.post(f"{url}/predictions/llama", json={"prompt": "hi"}, timeout=10)
    assert answer.status_code == 502
    assert answer.json()["type"] == "llmctl"
    assert "TorchServe failed the request (ServerDisconnectedError" in answer.json()["message"]


def test_the_gateway_waits_for_torchserve_as_long_as_torchserve_waits_for_its_model() -> None:
    """aiohttp's default (300 s in all) would cut off a first request that compiles."""
    from llmctl.serving.torchserve_neuronx import gateway
    from llmctl.serving.torchserve_neuronx.config import RESPONSE_TIMEOUT_S

    assert gateway.UPSTREAM_TIMEOUT.total == RESPONSE_TIMEOUT_S == 10800


def test_a_torchserve_blueprint_may_ask_for_an_api_key_and_its_container_gets_it() -> None:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
    from llmctl.infra.workload.manifests import build_manifests
    from llmctl.infra.workload.schedulability import validate_workload
    from llmctl.serving.torchserve_neuronx.start import gateway_env

    bp = load_blueprint("llama2-torchserve-inf2")
    keyed = bp.model_copy(update={"exposure": bp.exposure.model_copy(update={"api_key": True})})
    assert [p for p in validate_workload(keyed) if p.where == "exposure"] == []
    config = WorkloadConfig(blueprint=keyed, platform=PlatformFacts.for_blueprint(keyed))
    deployment = next(
        m for m in build_manifests(config, hf_token="hf_x", api_key=API_KEY) if m["kind"] == "Deployment"
    )
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["LLMCTL_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "api-key"
    # the gateway has the serving port (the container's only inference port), TorchServe loopback 8083
    gateway = gateway_env(keyed, Path("/home/model-server/llmctl"))
    assert gateway["LLMCTL_TS_LISTEN_PORT"] == str(
        next(p for p in container["ports"] if p["name"] == "inference")["containerPort"]
    )
    assert gateway["LLMCTL_TS_BACKEND_PORT"] == "8083" and gateway["LLMCTL_TS_KEY_FILE"].endswith(
        "key_file.json"
    )


def test_a_client_waiting_for_100_continue_is_answered_and_torchserve_gets_the_whole_body(
    tmp_path: Path, run_gateway: Any
) -> None:
    import socket

    torchserve = TorchServe(tmp_path, tokens=False)
    port = int(run_gateway(torchserve).rsplit(":", 1)[1])
    body = b'{"prompt": "' + b"x" * 2000 + b'"}'
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = (
            f"POST /predictions/llama HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n"
            f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode())
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue")  # as curl waits for it
        sock.sendall(body)
        answer = b""
        while chunk := sock.recv(1 << 16):
            answer += chunk
    assert answer.startswith(b"HTTP/1.0 200") or answer.startswith(b"HTTP/1.1 200")
    assert "expect" not in torchserve.seen[-1] and torchserve.seen[-1]["content-length"] == str(len(body))


def test_a_client_waiting_for_100_continue_with_a_wrong_key_is_refused_before_sending_the_body(
    tmp_path: Path, run_gateway: Any
) -> None:
    import socket

    torchserve = TorchServe(tmp_path, tokens=False)
    port = int(run_gateway(torchserve).rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = (
            "POST /predictions/llama HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-other\r\n"
            "Content-Length: 2000\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(head.encode())
        answer = sock.recv(1 << 16)  # the refusal, while the client still holds its body back
    assert answer.startswith(b"HTTP/1.1 401") and b"100 Continue" not in answer
    assert torchserve.seen == []


def test_a_request_torchserve_refuses_for_its_key_is_sent_once_more_with_the_key_read_again(
    tmp_path: Path, run_gateway: Any
) -> None:
    import os

    torchserve = TorchServe(tmp_path, tokens=True)
    url = run_gateway(torchserve)
    assert _post(url, API_KEY, json={"prompt": "a"}).status_code == 200
    stamp = torchserve.key_file.stat().st_mtime_ns
    torchserve.keys["inference"] = torchserve._key()
    torchserve._write()
    os.utime(torchserve.key_file, ns=(stamp, stamp))  # a change the gateway cannot see by the file's time
    reply = _post(url, API_KEY, json={"prompt": "b"})
    assert reply.status_code == 200 and b"".join(CHUNKS) == reply.content
    assert [h["authorization"] for h in torchserve.seen[-2:]] != [torchserve.seen[-1]["authorization"]] * 2
    assert torchserve.seen[-1]["authorization"] == f"Bearer {torchserve.keys['inference']}"


def test_a_key_file_caught_mid_write_keeps_the_last_key(tmp_path: Path, run_gateway: Any) -> None:
    torchserve = TorchServe(tmp_path, tokens=True)
    url = run_gateway(torchserve)
    assert _post(url, API_KEY, json={"prompt": "a"}).status_code == 200
    whole = torchserve.key_file.read_text()
    torchserve.key_file.write_text(whole[: len(whole) // 2])  # TorchServe's Files.write is not atomic
    assert _post(url, API_KEY, json={"prompt": "b"}).status_code == 200
    assert torchserve.seen[-1]["authorization"] == f"Bearer {torchserve.keys['inference']}"


def test_an_empty_api_key_stops_the_container_before_torchserve_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused in the container's own process (its exit and message are what the pod shows), not in
    the gateway's, which would leave TorchServe running unreachable."""
    import os
    import subprocess

    from llmctl.errors import ServingError
    from llmctl.serving.torchserve_neuronx import start

    monkeypatch.setenv("LLMCTL_BLUEPRINT", "llama2-torchserve-inf2")
    monkeypatch.setenv(start.WORKDIR_ENV, str(tmp_path / "work"))
    monkeypatch.setenv(start.MODEL_STORE_ENV, str(tmp_path / "store"))
    monkeypatch.setenv("LLMCTL_API_KEY", " ")
    started: list[object] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr(os, "execvp", lambda *a: started.append(a))
    with pytest.raises(ServingError, match="LLMCTL_API_KEY is set but empty"):
        start.main()
    assert started == []


# --- one bearer check: the gateway answers every Authorization form as the shared app does ---------

#: values of the Authorization header (None: no header), sent as these bytes to both servers
AUTHORIZATIONS: list[bytes | None] = [
    None,
    f"Bearer {API_KEY}".encode(),
    f"bearer  {API_KEY}".encode(),  # the scheme in any case, spaces before the key
    b"Bearer sk-other",
    b"Bearer",
    f"Basic {API_KEY}".encode(),  # the key, but not as a bearer token
    f"Token {API_KEY}".encode(),
    b"Bearer \xff\xfe",  # not UTF-8: a refusal, never a server error
]


def _answer(reply: httpx.Response) -> tuple[int, str | None, str | None, Any]:
    body = reply.json() if reply.status_code == 401 else None
    return reply.status_code, reply.headers.get("www-authenticate"), reply.headers.get("content-type"), body


def _shared_app_answers() -> list[tuple[int, str | None, str | None, Any]]:
    from starlette.types import Receive, Scope, Send

    from llmctl.serving.common.auth import BearerAuth

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})

    async def ask() -> list[tuple[int, str | None, str | None, Any]]:
        transport = httpx.ASGITransport(app=BearerAuth(app, api_key=API_KEY))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            answers = []
            for value in AUTHORIZATIONS:
                headers = {"Authorization": value} if value is not None else {}
                answers.append(
                    _answer(await client.post("/predictions/llama", headers=headers, content=b"{}"))
                )
            return answers

    return asyncio.run(ask())


def test_the_gateway_answers_every_authorization_as_the_shared_app_does(
    tmp_path: Path, run_gateway: Any
) -> None:
    """One check (serving/common/auth.py) for both: the same status, challenge and OpenAI error body
    for each form of the header; a key that is not a bearer token is a missing one."""
    torchserve = TorchServe(tmp_path, tokens=False)
    url = run_gateway(torchserve)
    gateway = []
    with httpx.Client(base_url=url, timeout=10) as client:
        for value in AUTHORIZATIONS:
            headers = {"Authorization": value} if value is not None else {}
            gateway.append(_answer(client.post("/predictions/llama", headers=headers, content=b"{}")))
    shared = _shared_app_answers()
    assert [a[0] for a in gateway] == [401, 200, 200, 401, 401, 401, 401, 401]
    refusals = [(g, s) for g, s in zip(gateway, shared, strict=True) if g[0] == 401]
    assert [g for g, _ in refusals] == [s for _, s in refusals]
    assert [s[0] for s in shared] == [a[0] for a in gateway]
    messages = [g[3]["error"]["message"] for g, _ in refusals]
    assert [m.split(":")[0] for m in messages] == [
        "missing API key",
        "incorrect API key provided",
        "missing API key",
        "missing API key",
        "missing API key",
        "incorrect API key provided",
    ]
    assert {g[3]["error"]["code"] for g, _ in refusals} == {"invalid_api_key"}
    assert len(torchserve.seen) == 2  # only the two keyed requests reached TorchServe


# --- renewal off the serving path ---------------------------------------------------------------


class SlowRenewalTorchServe(TorchServe):
    """Its token API takes a while: it answers at once but sends the body a byte at a time until the
    test releases it (a client reading the answer waits all along), then renews the key."""

    def __init__(self, workdir: Path, **kwargs: Any) -> None:
        self.release = threading.Event()
        self.renewing = threading.Event()
        super().__init__(workdir, **kwargs)

    def _management(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path != "/token?type=inference" or not self._authorized(handler.headers, "API"):
            self._refuse(handler)
            return
        self.renewing.set()
        handler.send_response(200)
        handler.send_header("Content-Length", "1000")
        handler.end_headers()
        sent = 0
        while not self.release.wait(0.2) and sent < 600:  # at most two minutes
            handler.wfile.write(b" ")
            handler.wfile.flush()
            sent += 1
        self.keys["inference"], self.expires["inference"] = self._key(), _instant(3600)
        threading.Event().wait(self.write_delay_s)
        self._write()
        handler.wfile.write(b" " * (1000 - sent))


def test_a_slow_renewal_does_not_hold_up_requests(tmp_path: Path, run_gateway: Any) -> None:
    """While TorchServe's token API is still answering, requests go on with the key that is still
    valid, and the probes' /ping too; the renewed key is used once it is there."""
    torchserve = SlowRenewalTorchServe(tmp_path, tokens=True, expires_in_s=30)  # inside the margin
    old = torchserve.keys["inference"]
    url = run_gateway(torchserve)
    try:
        # generous bounds: the renewal goes on for up to two minutes, a request takes milliseconds
        first = httpx.post(
            f"{url}/predictions/llama",
            json={"prompt": "a"},
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=30,
        )
        assert first.status_code == 200 and first.content == b"".join(CHUNKS)
        assert torchserve.renewing.wait(30) and not torchserve.release.is_set()
        assert httpx.get(f"{url}/ping", timeout=30).status_code == 200
        assert _post(url, API_KEY, json={"prompt": "b"}).status_code == 200
        assert [h["authorization"] for h in torchserve.seen] == [f"Bearer {old}"] * 3
    finally:
        torchserve.release.set()
    for _ in range(300):  # the renewed key, once TorchServe has written it
        assert _post(url, API_KEY, json={"prompt": "c"}).status_code == 200
        if torchserve.seen[-1]["authorization"] != f"Bearer {old}":
            break
        threading.Event().wait(0.1)
    assert torchserve.seen[-1]["authorization"] == f"Bearer {torchserve.keys['inference']}" != f"Bearer {old}"


# --- the start module: a gateway that cannot listen stops the container ----------------------------


def test_a_gateway_that_cannot_bind_its_port_stops_the_container_before_torchserve(tmp_path: Path) -> None:
    """The serving port taken (a real socket listening on it): the container exits non-zero with the
    port and what to do, and TorchServe never starts behind a port that is not the gateway's."""
    import os
    import socket
    import subprocess
    import sys

    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    for tool in ("torch-model-archiver", "torchserve"):
        (bin_dir / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {calls / tool}\n')
        (bin_dir / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "LLMCTL_API_KEY"}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        LLMCTL_BLUEPRINT="llama2-torchserve-inf2",
        LLMCTL_TS_WORKDIR=str(tmp_path / "work"),
        LLMCTL_TS_MODEL_STORE=str(tmp_path / "store"),
    )
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env["LLMCTL_TS_LISTEN_PORT"] = str(port)
        done = subprocess.run(
            [sys.executable, "-m", "llmctl.serving.torchserve_neuronx.start"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 6  # ServingError's exit code, one `error:` line
    last = done.stderr.strip().splitlines()[-1]
    assert f"could not listen on port {port}" in last and "address already in use" in last.lower(), (
        done.stderr
    )
    assert "serving.port" in last  # what to do
    assert "Traceback" not in done.stderr
    assert (calls / "torch-model-archiver").exists() and not (calls / "torchserve").exists()
