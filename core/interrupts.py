"""Ctrl-C held back across a step that must not be cut in half.

Starting a child process and recording it is one step: a SIGINT that lands between the two leaves a
process nobody stops (the local server's runner, a `kubectl port-forward`). Inside `deferred()` a
SIGINT to the main thread is only noted; it is delivered to the handler that was there before (as
KeyboardInterrupt, by default) right after the block. The signal mask is not touched, so the
children started inside the block get SIGINT as usual.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT for the duration of the block (main thread, a handler set from Python; else a no-op)."""
    current = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or current is None:
        yield  # off the main thread, or a handler Python did not install: left as it is
        return
    caught: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        caught.append(signum)

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(signal.SIGINT, None)
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)
