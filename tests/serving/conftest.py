"""Fixtures of the serving tests: one tiny model per session, an isolated state dir."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest


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
