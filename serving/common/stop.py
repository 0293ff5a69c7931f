"""Stop sequences over a stream of text pieces.

Text that could be the start of a stop sequence is held back until the next piece shows whether
it is; the stop sequence itself is never sent.
"""

from __future__ import annotations

MAX_STOP_SEQUENCES = 4


class StopMatcher:
    """Feed text pieces; get back what may be sent and whether a stop sequence was hit."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False

    def feed(self, piece: str) -> str:
        """Text safe to emit after adding ``piece``; sets :attr:`stopped` on a match."""
        if not self.stops:
            return piece
        if self.stopped:
            return ""
        text = self._held + piece
        cut = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return text[:cut]
        keep = self._partial_suffix(text)
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """Held-back text at the end of the stream (no stop sequence followed)."""
        held, self._held = self._held, ""
        return "" if self.stopped else held

    def _partial_suffix(self, text: str) -> int:
        """Length of the longest end of ``text`` that begins some stop sequence."""
        best = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(text)), best, -1):
                if stop.startswith(text[-size:]):
                    best = size
                    break
        return best
