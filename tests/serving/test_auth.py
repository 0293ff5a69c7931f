"""The API key: enforced once by the shared app (routes through a real ASGI client and the openai client)."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

from llmctl.errors import ServingError
from llmctl.serving.common.api import build_app
from llmctl.serving.common.limits import Limits

KEY = "sk-test-0123456789"
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


def _client(app: FastAPI, root_path: str = "") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, root_path=root_path), base_url="http://app"
    )


def _app(engine: Any, monkeypatch: pytest.MonkeyPatch, env_key: str | None, **kwargs: Any) -> FastAPI:
    if env_key is None:
        monkeypatch.delenv("LLMCTL_API_KEY", raising=False)
    else:
        monkeypatch.setenv("LLMCTL_API_KEY", env_key)
    return build_app(engine, Limits(max_context=256, max_new_tokens=16), **kwargs)


async def test_without_a_key_every_route_is_open(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _client(_app(engine, monkeypatch, None)) as client:
        assert (await client.get("/v1/models")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200


async def test_key_from_the_env_guards_every_route_but_healthz(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _client(_app(engine, monkeypatch, KEY)) as client:
        assert (await client.get("/healthz")).json()["status"] == "ok"
        for method, path, body in (
            ("GET", "/v1/models", None),
            ("POST", "/v1/chat/completions", CHAT),
            ("POST", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2}),
            ("GET", "/infer?sentence=hi", None),
            ("GET", "/metrics", None),
            ("GET", "/no-such-route", None),
        ):
            denied = await client.request(method, path, json=body)
            assert denied.status_code == 401, path
            assert denied.headers["www-authenticate"] == "Bearer"
            error = denied.json()["error"]
            assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
            assert "missing API key" in error["message"]
        wrong = await client.get("/v1/models", headers={"Authorization": "Bearer sk-wrong"})
        assert wrong.status_code == 401 and "incorrect API key" in wrong.json()["error"]["message"]
        basic = await client.get("/v1/models", headers={"Authorization": f"Basic {KEY}"})
        assert basic.status_code == 401
        ok = {"Authorization": f"Bearer {KEY}"}
        assert (await client.get("/v1/models", headers=ok)).json()["data"][0]["id"] == "tiny"
        assert (await client.get("/infer", params={"sentence": "hi"}, headers=ok)).status_code == 200
        assert "llmctl_requests_total" in (await client.get("/metrics", headers=ok)).text


async def test_app_argument_wins_and_route_prefix_is_respected(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(engine, monkeypatch, "env-key", api_key=KEY)
    async with _client(app, root_path="/llm") as client:  # Ray Serve sets root_path to the route prefix
        assert (await client.get("/llm/healthz")).status_code == 200
        assert (await client.get("/llm/v1/models")).status_code == 401
        assert (
            await client.get("/llm/v1/models", headers={"Authorization": "Bearer env-key"})
        ).status_code == 401
        assert (
            await client.get("/llm/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        ).status_code == 200


async def test_the_openai_client_streams_with_the_key_and_fails_without(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app(engine, monkeypatch, KEY)
    async with _client(app) as http:
        good = openai.AsyncOpenAI(base_url="http://app/v1", api_key=KEY, http_client=http, max_retries=0)
        chunks = [c async for c in await good.chat.completions.create(**CHAT, stream=True)]
        assert chunks[-1].choices[0].finish_reason == "length"
        bad = openai.AsyncOpenAI(base_url="http://app/v1", api_key="nope", http_client=http, max_retries=0)
        with pytest.raises(openai.AuthenticationError, match="incorrect API key"):
            await bad.chat.completions.create(**CHAT)


def test_an_empty_key_variable_refuses_to_serve_open(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ServingError, match="set but empty") as caught:
        _app(engine, monkeypatch, " ")
    assert caught.value.hint is not None and "api-key" in caught.value.hint
