"""``run_offline`` leaves no event loop open behind it.

Pulumi calls the mock monitor from its loop's executor threads, and each call there waits on an event
loop that Pulumi's ``_sync_await`` creates per thread and never closes (pulumi/runtime/sync_await.py
``_ensure_event_loop``). Before the fix every offline run left one such loop per executor thread to the
garbage collector (346 in one run of the suite), each with a selector and a socket pair, and the
collector's "unclosed event loop" surfaced now and then in an unrelated test.
"""

from __future__ import annotations

import gc
import threading
import time
import warnings

import pulumi

from llmctl.infra.plan.offline import run_offline


def _program() -> None:
    for index in range(8):  # several monitor calls, so the executor starts more than one thread
        pulumi.CustomResource("test:index:Thing", f"thing-{index}", {"value": index})


def test_every_loop_an_offline_run_made_is_closed_when_it_returns() -> None:
    # what earlier tests of this worker left to the collector is theirs, not this run's: collected first,
    # so the warnings below come from this run alone (an unrelated leftover failed this test once)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    before = set(threading.enumerate())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        registered = run_offline(_program)
        deadline = time.monotonic() + 30  # the run's executor threads end, their thread-locals freed
        while set(threading.enumerate()) - before and time.monotonic() < deadline:
            time.sleep(0.01)
        gc.collect()
    assert sorted(r.name for r in registered) == [f"thing-{i}" for i in range(8)]
    unclosed = [str(w.message) for w in caught if "unclosed event loop" in str(w.message)]
    assert unclosed == []
