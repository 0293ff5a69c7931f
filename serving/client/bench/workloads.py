"""`llmctl bench` workloads a prefix cache can serve: shared system prompts, growing conversations.

Both build on :class:`~llmctl.serving.client.bench.prompts.PromptFactory`: its prompt of request
``i`` (``[<nonce>-<i>] <instruction> <corpus excerpt>``, ``--mean-input-tokens`` long, unique from its
first token) becomes the *question*, and the workload puts something shared in front of it.

- :class:`SharedPrefixFactory` (``--prefix-tokens N --prefix-groups G``): request ``i`` belongs to
  group ``i mod G`` and sends that group's system prompt (``N`` tokens, ``[<nonce>-g<g>]`` and a corpus
  excerpt: unique to the run and the group) as a ``system`` message, then its question. The first
  request of a group misses; every later one can reuse the ``N`` tokens.
- :class:`ConversationFactory` (``--conversations C --turns T``): request ``i`` is turn
  ``t = (i mod C*T) div C`` of conversation ``i mod C`` (requests go round the conversations, so a
  conversation's turn ``t`` is sent ``C`` requests after its turn ``t - 1``). It sends turns ``0..t``
  as alternating ``user`` / ``assistant`` messages: each earlier question, and after it a stand-in
  answer of that turn's ``max_tokens`` (a corpus excerpt fixed by the seed), then turn ``t``'s
  question. After ``T`` turns the next ``C`` conversations start. The stand-in answers are not the
  server's own (that would make turn ``t`` wait for turn ``t - 1``'s text), so a server's cache can
  match the previous turn's prompt, not the answer it generated after it.

How this maps onto inference-perf's shared-prefix generator and guidellm's prefix options:
docs/bench.md, "Prefix-cache workloads".
"""

from __future__ import annotations

import random
from typing import Any

from llmctl.serving.client.bench.prompts import PromptFactory, PromptSpec
from llmctl.serving.client.bench.tokens import Tokenizer


class SharedPrefixFactory(PromptFactory):
    """Questions behind one of ``groups`` system prompts of ``prefix_tokens`` tokens each."""

    def __init__(self, tokenizer: Tokenizer, *, prefix_tokens: int, groups: int, **settings: Any) -> None:
        if prefix_tokens < 1 or groups < 1:
            raise ValueError("prefix_tokens and groups must be positive")
        super().__init__(tokenizer, **settings)
        self.prefix_tokens, self.groups = prefix_tokens, groups
        self.system_prompts = [self._system_prompt(group) for group in range(groups)]

    def _system_prompt(self, group: int) -> tuple[str, int]:
        """Group ``group``'s system prompt and its token count (``prefix_tokens``, measured as sent)."""
        tag = f"[{self.nonce}-g{group}] "
        start = random.Random(f"{self.seed}-system-{group}").randrange(len(self._pieces))
        body_tokens = max(1, self.prefix_tokens - self.tokenizer.count(tag))
        text, counted = tag, 0
        for _ in range(4):  # pieces merge at the seam: measure and correct, as PromptFactory does
            text = tag + self._take(start, body_tokens).lstrip()
            counted = self.tokenizer.count(text)
            if counted == self.prefix_tokens:
                break
            body_tokens = max(1, body_tokens + self.prefix_tokens - counted)
        return text, counted

    def make(self, index: int) -> PromptSpec:
        question = super().make(index)
        system, system_tokens = self.system_prompts[index % self.groups]
        return PromptSpec(
            index=index,
            text=question.text,
            input_tokens=system_tokens + question.input_tokens,
            max_tokens=question.max_tokens,
            messages=(("system", system), ("user", question.text)),
        )


class ConversationFactory(PromptFactory):
    """``conversations`` conversations of ``turns`` turns each, every turn resending the ones before."""

    def __init__(self, tokenizer: Tokenizer, *, conversations: int, turns: int, **settings: Any) -> None:
        if conversations < 1 or turns < 1:
            raise ValueError("conversations and turns must be positive")
        super().__init__(tokenizer, **settings)
        self.conversations, self.turns = conversations, turns
        self._answers: dict[int, tuple[str, int]] = {}

    def position(self, index: int) -> tuple[int, int]:
        """(conversation number over the whole run, turn) of request ``index``."""
        per_round = self.conversations * self.turns
        round_, within = divmod(index, per_round)
        turn, conversation = divmod(within, self.conversations)
        return round_ * self.conversations + conversation, turn

    def answer(self, index: int, tokens: int) -> tuple[str, int]:
        """The stand-in answer after request ``index``'s question: ``tokens`` corpus tokens (as counted)."""
        if index not in self._answers:
            start = random.Random(f"{self.seed}-answer-{index}").randrange(len(self._pieces))
            text = self._take(start, max(1, tokens)).strip()
            self._answers[index] = (text, self.tokenizer.count(text))
        return self._answers[index]

    def make(self, index: int) -> PromptSpec:
        _conversation, turn = self.position(index)
        first = index - turn * self.conversations  # the same conversation's turn 0
        messages: list[tuple[str, str]] = []
        total = 0
        question = super().make(first)
        for earlier in range(turn):
            answer, answer_tokens = self.answer(question.index, question.max_tokens)
            messages += [("user", question.text), ("assistant", answer)]
            total += question.input_tokens + answer_tokens
            question = super().make(first + (earlier + 1) * self.conversations)
        messages.append(("user", question.text))
        return PromptSpec(
            index=index,
            text=question.text,
            input_tokens=total + question.input_tokens,
            max_tokens=question.max_tokens,
            messages=tuple(messages),
        )


def prompt_factory(
    tokenizer: Tokenizer,
    *,
    prefix_tokens: int | None = None,
    prefix_groups: int | None = None,
    conversations: int | None = None,
    turns: int | None = None,
    **settings: Any,
) -> PromptFactory:
    """The factory the flags ask for: shared system prompts, conversations, or plain prompts."""
    if prefix_tokens:
        return SharedPrefixFactory(
            tokenizer, prefix_tokens=prefix_tokens, groups=prefix_groups or 1, **settings
        )
    if conversations:
        return ConversationFactory(tokenizer, conversations=conversations, turns=turns or 1, **settings)
    return PromptFactory(tokenizer, **settings)
