"""`--api-key` of `llmctl chat` and `llmctl bench` against an endpoint that enforces a key with the
serving layer's own middleware (BearerAuth) in front of the fake OpenAI server."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.serving.client.bench.testserver import FakeOpenAI, FakeTiming
from llmctl.serving.common.auth import BearerAuth

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_api_key")

KEY = "sk-test-0123456789"
runner = CliRunner()


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    app_ = BearerAuth(FakeOpenAI(FakeTiming(ttft=0.001, tpot=0.001)), api_key=KEY)
    server = uvicorn.Server(uvicorn.Config(app_, host="127.0.0.1", port=port, log_level="critical"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(10)


def test_chat_sends_the_key_and_says_when_it_is_missing_or_wrong(
    guarded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["chat", "-e", guarded, "-p", "hi", "--max-tokens", "3", "--json"]
    result = runner.invoke(app, [*args, "--api-key", KEY])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["response"].split()) == 3
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the same through the environment
    assert runner.invoke(app, args).exit_code == 0
    monkeypatch.delenv("OPENAI_API_KEY")
    for extra in ([], ["--api-key", "sk-wrong"]):
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert f"error: {guarded} refused the API key (HTTP 401)" in result.output


def test_bench_sends_the_key(guarded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    args = ["bench", "-e", guarded, "-n", "2", "--no-plots", "-o", str(tmp_path / "out"), "--json"]
    result = runner.invoke(app, [*args, "--api-key", KEY])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["endpoints"] == [guarded]
    result = runner.invoke(app, [*args, "--api-key", "sk-wrong", "-o", str(tmp_path / "out2")])
    assert result.exit_code == 7 and "Traceback" not in result.output
    assert f"error: {guarded} refused the API key (HTTP 401)" in result.output


def test_the_key_from_a_file_stays_out_of_the_process_list(
    guarded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--api-key-file` (issue 45: a key in argv shows in `ps` to every user of the machine): it wins
    over a wrong OPENAI_API_KEY; a missing or empty file is one line with the fix."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    chat = ["chat", "-e", guarded, "-p", "hi", "--max-tokens", "3", "--json"]
    result = runner.invoke(app, [*chat, "--api-key-file", str(key_file)])
    assert result.exit_code == 0, result.output
    bench = ["bench", "-e", guarded, "-n", "2", "--no-plots", "-o", str(tmp_path / "out"), "--json"]
    assert runner.invoke(app, [*bench, "--api-key-file", str(key_file)]).exit_code == 0
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path, words in ((empty, "is empty"), (tmp_path / "missing", "cannot read")):
        result = runner.invoke(app, [*chat, "--api-key-file", str(path)])
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert "the API key file" in result.output and words in result.output
