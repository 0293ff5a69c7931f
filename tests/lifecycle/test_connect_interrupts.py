"""Ctrl-C and `llmctl connect`: a forward once started is always stopped by someone. A Ctrl-C while
the forwards start stops those already running (and `connect` ends as interrupted); one after they
all started, even before the wait began, is the normal stop. `interrupts.deferred` holds a SIGINT
across a start and its record, then delivers it."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import pytest

from llmctl import interrupts
from llmctl.infra.targets import cluster
from llmctl.infra.targets.base import Connection
from llmctl.infra.targets.eks import EksTarget
from llmctl.state import Endpoint

#: a deployed endpoint's record as `up` saves it: its serving and dashboard services
ENDPOINT = Endpoint("dev", "tiny-cpu", "eks", "http://localhost:8000/v1", "m")
ENDPOINT.extra.update(namespace="tiny-cpu", service="svc", dashboard_service="head", port="8000")


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"])


def test_a_sigint_inside_the_block_arrives_after_it_and_the_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("the block went on")
        steps.append("not reached")
    assert steps == ["the block went on"]
    assert signal.getsignal(signal.SIGINT) is before
    with interrupts.deferred():  # nothing caught: nothing raised
        steps.append("quiet")
    assert steps[-1] == "quiet" and signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_while_the_forwards_start_stops_the_ones_running(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[subprocess.Popen[bytes]] = []

    def forward(*_args: Any) -> subprocess.Popen[bytes]:
        proc = _sleeper()
        started.append(proc)
        if len(started) == 2:  # Ctrl-C right as the second forward starts
            os.kill(os.getpid(), signal.SIGINT)
        return proc

    monkeypatch.setattr(cluster, "port_forward", forward)
    with pytest.raises(KeyboardInterrupt):
        EksTarget().connect(ENDPOINT, 18000)
    assert len(started) == 2
    assert [proc.wait(timeout=30) for proc in started] == [-signal.SIGTERM, -signal.SIGTERM]


def test_ctrl_c_after_the_forwards_started_is_the_normal_stop() -> None:
    procs = [_sleeper(), _sleeper()]
    shown: list[str] = []

    def show(line: str) -> None:
        shown.append(line)
        if len(shown) == 2:  # Ctrl-C while the lines are printed, before the wait
            raise KeyboardInterrupt

    Connection(lines=["endpoint   http://localhost:18000/v1", "dashboard  x"], procs=procs).run(show)
    assert shown == ["endpoint   http://localhost:18000/v1", "dashboard  x"]
    assert [proc.wait(timeout=30) for proc in procs] == [-signal.SIGTERM, -signal.SIGTERM]
