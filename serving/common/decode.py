"""Incremental detokenisation: token ids in, new text out.

Decoding one token at a time breaks words that span tokens (leading spaces, multi-byte UTF-8
characters split across byte tokens). The decoder re-decodes a short window of recent tokens and
emits only text that is complete (not ending in a replacement character).
"""

from __future__ import annotations

from typing import Protocol


class Detokenizer(Protocol):
    """What the decoder needs from a tokenizer."""

    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


class IncrementalDecoder:
    """Turns a growing list of token ids into text deltas."""

    def __init__(self, tokenizer: Detokenizer) -> None:
        self._tok = tokenizer
        self.ids: list[int] = []
        self._prefix = 0  # start of the window re-decoded for context
        self._read = 0  # tokens whose text has been emitted

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes (may be empty)."""
        self.ids.append(token_id)
        window = self.ids[self._prefix :]
        before = self._tok.decode(self.ids[self._prefix : self._read], skip_special_tokens=True)
        after = self._tok.decode(window, skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self.ids)
            return after[len(before) :]
        return ""

    def flush(self) -> str:
        """Text of tokens still held back at the end of the stream."""
        if self._read == len(self.ids):
            return ""
        before = self._tok.decode(self.ids[self._prefix : self._read], skip_special_tokens=True)
        after = self._tok.decode(self.ids[self._prefix :], skip_special_tokens=True)
        self._prefix = self._read = len(self.ids)
        return after[len(before) :]
