"""`llmctl down --target local` ends every process of the local server before it returns, so an
immediate `up` never finds the port taken; what it cannot end is named with how to end it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmctl.errors import ServingError
from llmctl.serving.client import local
from llmctl.serving.client.local_procs import alive, kill_tree

# A runner (own session) whose child ignores SIGTERM, and a "raylet" in a session of its own that
# only the marker in its command line ties to the server, started just before the runner exits.
TREE = """
import os, signal, subprocess, sys, time
marker = sys.argv[1]
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
raylet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker], start_new_session=True)
print(child.pid, raylet.pid, flush=True)
signal.signal(signal.SIGTERM, lambda *a: (time.sleep(0.3), os._exit(0)))
time.sleep(600)
"""


def test_kill_tree_returns_only_when_every_process_has_exited(tmp_path: Path) -> None:
    marker = str(tmp_path / "ray-dir-marker")
    runner = subprocess.Popen(
        [sys.executable, "-c", TREE, marker], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert runner.stdout is not None
    child, raylet = (int(p) for p in runner.stdout.readline().split())
    assert alive(child) and alive(raylet)
    assert kill_tree(runner.pid, marker=marker, grace_s=5, exit_timeout_s=20) == []
    runner.wait(timeout=5)
    assert not alive(child) and not alive(raylet)  # at once, not eventually


def test_down_names_processes_that_did_not_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    record = local._record_path("dev", "tiny-cpu")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"blueprint": "tiny-cpu", "pid": 4242}))
    record.with_suffix(".status").write_text(json.dumps({"state": "running"}))  # the drain's grace
    monkeypatch.setattr(local, "kill_tree", lambda pid, **kw: [4243, 4244])
    with pytest.raises(ServingError) as info:
        local.stop_local("dev")
    assert (
        info.value.message == "the local server of 'tiny-cpu' left processes running after 30 s: 4243, 4244"
    )
    assert "kill -9 4243 4244" in (info.value.hint or "")
    assert record.exists()  # kept, so the next `down` tries again
