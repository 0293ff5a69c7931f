"""Issue 26, item 6: Ctrl-C in a terminal during a local `up` stops what was started.

Driven through tmux: a real terminal, a real Ctrl-C (SIGINT to the foreground process group),
the real CLI and the real runner (Ray starting on a tiny model)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmctl.serving.client.local_procs import alive

# starts Ray: on the one worker that runs the Ray tests
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def _pane(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", session], capture_output=True, text=True
    ).stdout


def _wait_for(session: str, text: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pane = _pane(session)
        if text in pane:
            return pane
        time.sleep(0.2)
    raise AssertionError(f"{text!r} did not appear within {timeout_s} s:\n{_pane(session)}")


@pytest.fixture
def tmux_session() -> Iterator[str]:
    assert shutil.which("tmux"), "tmux is needed (apt-get install tmux)"
    name = f"llmctl-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_ctrl_c_during_a_local_up_stops_the_server_that_was_starting(
    tiny_model: Path, state: Path, free_port: int, tmux_session: str
) -> None:
    command = [
        sys.executable, "-m", "llmctl", "up", "-b", "tiny-cpu", "--target", "local",
        "--model", str(tiny_model), "--port", str(free_port), "--progress", "plain", "--yes",
    ]  # fmt: skip
    env = f"LLMCTL_STATE_DIR={shlex.quote(str(state))} COLUMNS=200"
    script = f"cd {shlex.quote(os.getcwd())} && env {env} {shlex.join(command)}; echo EXIT=$?; sleep 60"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", tmux_session, "-x", "200", "-y", "50", script], check=True
    )
    _wait_for(tmux_session, "starting Ray Serve", 120)
    record_file = state / "local" / "dev" / "tiny-cpu.json"
    runner_pid = int(json.loads(record_file.read_text())["pid"])
    assert alive(runner_pid)
    time.sleep(2)  # Ray is starting now (a Ctrl-C before the runner exists is a plainer case)
    subprocess.run(["tmux", "send-keys", "-t", tmux_session, "C-c"], check=True)
    pane = _wait_for(tmux_session, "EXIT=", 90)
    assert "EXIT=130" in pane, pane
    assert "was still starting and is stopped; nothing is left running" in pane, pane
    assert "run the same `llmctl up` again" in pane and "resume" not in pane
    assert "Traceback" not in pane
    assert not alive(runner_pid)  # nothing left starting in the background
    assert not record_file.exists()
    status = subprocess.run(
        [sys.executable, "-m", "llmctl", "status", "--target", "local", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "LLMCTL_STATE_DIR": str(state)},
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["local"] == []
