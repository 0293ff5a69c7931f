"""Fixtures of the serving tests: one tiny model per session, an isolated state dir, one shared local
server."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving_support import LOCAL_KEY, LOCAL_QUEUE, LOCAL_SLOTS, LOCAL_STACK, LocalServer


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight Llama with a real tokenizer and chat template, generated once."""
    from llmctl.serving.client.tiny import write_tiny_model

    path = tmp_path_factory.mktemp("models") / "tiny"
    write_tiny_model(path)
    return path


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private llmctl state dir."""
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    yield tmp_path / "state"


@pytest.fixture(scope="session")
def local_server_holder(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Where the session's shared local server is kept; stopped at the end if a test left it running."""
    holder: dict[str, Any] = {"state": tmp_path_factory.mktemp("local-shared-state"), "model": tiny_model}
    yield holder
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLMCTL_STATE_DIR", str(holder["state"]))
        from llmctl.serving.client.local import stop_local

        stop_local(LOCAL_STACK)


@pytest.fixture
def local_server(local_server_holder: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> LocalServer:
    """One local Ray server (tiny-cpu on the tiny model, an API key, 64 slots and 16 queued) that the
    local-target tests share, so Ray and its first replica start once per session instead of once
    per module (issue 21). It is started on first use, and again by a test that finds it stopped
    (the last overload test stops it on purpose, and asserts what the stop leaves). The test runs
    with the server's state dir and key in its environment."""
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.blueprints.schema import Blueprint
    from llmctl.serving.client.local import local_status, start_local

    monkeypatch.setenv("LLMCTL_STATE_DIR", str(local_server_holder["state"]))
    monkeypatch.setenv("LLMCTL_API_KEY", LOCAL_KEY)
    running = local_server_holder.get("server")
    if running is None or not any(row["running"] for row in local_status(LOCAL_STACK)):
        data = load_blueprint("tiny-cpu").model_dump(mode="json")
        data["serving"].update({"max_concurrent_requests": LOCAL_SLOTS, "max_queued_requests": LOCAL_QUEUE})
        progress: list[str] = []
        endpoint = start_local(
            Blueprint.model_validate(data),
            stack=LOCAL_STACK,
            model=str(local_server_holder["model"]),
            on_progress=progress.append,
            timeout_s=300,
        )
        running = LocalServer(
            endpoint, local_server_holder["state"], local_server_holder["model"], progress, LOCAL_KEY
        )
        local_server_holder["server"] = running
    assert isinstance(running, LocalServer)
    return running


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def free_port() -> int:
    """A TCP port free on 127.0.0.1."""
    return _free_port()


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Dummy credentials pointed at a freshly reset moto server; returns the env it set."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")).read()
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    env = {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-west-2",
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "LLMCTL_MODEL_CACHE": str(tmp_path / "model-cache"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture(scope="session")
def engine(tiny_model: Path):  # type: ignore[no-untyped-def]
    """The real CPU engine on the tiny model (warmed up once per session)."""
    from llmctl.serving.ray_cpu.engine import TransformersEngine

    eng = TransformersEngine(str(tiny_model), model_id="tiny", max_context=256)
    eng.warmup()
    return eng
