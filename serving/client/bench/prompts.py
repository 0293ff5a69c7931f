"""Prompts of a chosen token length, cut from the text corpus shipped with the package.

Each request ``i`` gets an input length drawn from ``N(mean_in, stddev_in)`` and an output length
(``max_tokens``) from ``N(mean_out, stddev_out)``, both rounded and at least 1, reproducible from
the seed. The prompt is ``[<run nonce>-<i>] <instruction> <corpus excerpt>``: the nonce at the very
start makes every prompt unique from its first token, so a server's prefix cache cannot serve it;
``shared_prefix=True`` drops the nonce and starts every excerpt at the beginning of the corpus so a
prefix cache can hit.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from importlib import resources
from typing import Any

from llmctl.serving.client.bench.tokens import Tokenizer

INSTRUCTION = "Continue the following text.\n"
POOL_SIZE = 512


@dataclass(frozen=True)
class PromptSpec:
    """One request's prompt and its requested output length."""

    index: int
    text: str
    input_tokens: int
    max_tokens: int
    #: the chat messages as (role, content) when there is more than the one user message ``text``
    #: (a shared system prompt, a conversation's earlier turns: serving/client/bench/workloads.py)
    messages: tuple[tuple[str, str], ...] = ()


def load_corpus() -> str:
    """The text corpus shipped with the package."""
    return resources.files("llmctl.serving.client.bench").joinpath("corpus.txt").read_text(encoding="utf-8")


class PromptFactory:
    """Builds the prompt of request ``i``; bodies are prepared ahead so the hot loop only concatenates."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        mean_input_tokens: int = 512,
        stddev_input_tokens: int = 20,
        mean_output_tokens: int = 245,
        stddev_output_tokens: int = 20,
        seed: int = 0,
        shared_prefix: bool = False,
        nonce: str | None = None,
        corpus: str | None = None,
        max_output_tokens: int | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.mean_in, self.std_in = mean_input_tokens, stddev_input_tokens
        self.mean_out, self.std_out = mean_output_tokens, stddev_output_tokens
        # The server's limit on generated tokens (e.g. a blueprint's serving.max_new_tokens): longer
        # asks would be refused with HTTP 400, so the output-length distribution is cut there.
        self.max_out = max_output_tokens
        self.seed = seed
        self.shared_prefix = shared_prefix
        self.nonce = nonce or secrets.token_hex(4)
        self._pieces: list[Any] = tokenizer.encode(corpus if corpus is not None else load_corpus())
        if not self._pieces:
            raise ValueError("the prompt corpus is empty")
        self._instruction_tokens = tokenizer.count(INSTRUCTION)
        self._prefix_tokens = 0 if shared_prefix else tokenizer.count(self.prefix(0))
        self._pool: list[PromptSpec] = []

    def prefix(self, index: int) -> str:
        """The per-request nonce that opens a prompt (empty with a shared prefix)."""
        return "" if self.shared_prefix else f"[{self.nonce}-{index:06d}] "

    def prepare(self, count: int) -> None:
        """Build the bodies of the first ``count`` requests (at most POOL_SIZE, then reused)."""
        for index in range(len(self._pool), min(max(count, 1), POOL_SIZE)):
            self._pool.append(self._build(index))

    def _build(self, index: int) -> PromptSpec:
        rng = random.Random(f"{self.seed}-{index}")
        target_in = max(1, round(rng.gauss(self.mean_in, self.std_in)))
        target_out = max(1, round(rng.gauss(self.mean_out, self.std_out)))
        if self.max_out is not None:
            target_out = min(target_out, self.max_out)
        overhead = self._prefix_tokens + self._instruction_tokens
        body_tokens = max(1, target_in - overhead)
        start = 0 if self.shared_prefix else rng.randrange(len(self._pieces))
        # Pieces merge at the seams (prefix | instruction | body), so the text is measured as sent
        # and the body corrected until the count is on target (a couple of rounds at most).
        for _ in range(4):
            body = INSTRUCTION + self._take(start, body_tokens).lstrip()
            counted = self.tokenizer.count(self.prefix(index) + body)
            if counted == target_in:
                break
            body_tokens = max(1, body_tokens + target_in - counted)
        return PromptSpec(index=index, text=body, input_tokens=counted, max_tokens=target_out)

    def _take(self, start: int, count: int) -> str:
        """`count` corpus pieces from `start`, wrapping around."""
        pieces: list[Any] = []
        while len(pieces) < count:
            pieces.extend(self._pieces[start : start + count - len(pieces)])
            start = 0
        return self.tokenizer.decode(pieces)

    def make(self, index: int) -> PromptSpec:
        """The prompt of request ``index`` (its body is reused every POOL_SIZE requests)."""
        if not self._pool:
            self.prepare(index + 1)
        if index < POOL_SIZE and index >= len(self._pool):
            self.prepare(index + 1)
        base = self._pool[index % len(self._pool)]
        return PromptSpec(
            index=index,
            text=self.prefix(index) + base.text,
            input_tokens=base.input_tokens,
            max_tokens=base.max_tokens,
        )
