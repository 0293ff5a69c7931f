"""Stopping a local server (serving/client/local_runner.py, local.py): a SIGTERM or Ctrl-C while the
server is still starting drops the start at once; once it runs, the same signal asks for a drain."""

from __future__ import annotations

import threading

import pytest

from llmctl.serving.client.local import stop_grace_s
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


@pytest.mark.parametrize(
    ("state", "grace"),
    [("running", 70.0), ("stopping", 70.0), ("starting", 15.0), ("deploying", 15.0), (None, 15.0)],
)
def test_a_server_still_starting_is_given_a_short_grace(state: str | None, grace: float) -> None:
    # once it serves, the drain's grace; before, nothing to drain: a short wait, then the kill (also
    # when Ray's own SIGTERM handler swallowed the signal during ray.init)
    assert stop_grace_s({"stop_grace_s": 70}, state) == grace
    assert stop_grace_s({"stop_grace_s": 5}, "starting") == 5
