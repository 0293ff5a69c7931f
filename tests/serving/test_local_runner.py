"""The local runner's stop signal (serving/client/local_runner.py): a SIGTERM or Ctrl-C while the
server is still starting drops the start at once; once it runs, the same signal asks for a drain."""

from __future__ import annotations

import threading

import pytest

from llmctl.serving.client.local_runner import StartAborted, stop_handler


def test_a_signal_while_starting_aborts_the_start_and_once_running_asks_for_a_drain() -> None:
    stop, starting = threading.Event(), threading.Event()
    handle = stop_handler(stop, starting)
    starting.set()
    with pytest.raises(StartAborted):
        handle(15, None)
    assert stop.is_set()
    stop.clear()
    starting.clear()  # the app runs: the main loop sees `stop`, drains, then shuts down
    handle(15, None)
    assert stop.is_set()
