"""The Engine protocol the shared routes are written against, and a threaded base for it.

An engine turns prompt token ids into a stream of :class:`Delta` (new text, tokens produced,
finish reason). The CPU (transformers) and Neuron (transformers-neuronx) engines both run a
blocking generate call in a worker thread that reports token ids through a streamer object
(``put(ids)`` / ``end()``, the shape transformers' streamers have); :class:`ThreadedEngine` turns
that into an async stream, detokenises incrementally and stops at EOS or ``max_tokens``.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from llmctl.serving.common.decode import IncrementalDecoder
from llmctl.serving.common.protocol import APIError, FinishReason


@dataclass(frozen=True)
class SamplingParams:
    """Per-request generation settings (already checked against the limits)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        """Temperature 0 means greedy decoding."""
        return self.temperature <= 0.0


@dataclass(frozen=True)
class Delta:
    """A piece of generated text."""

    text: str
    tokens: int
    finish_reason: FinishReason | None = None


class Engine(Protocol):
    """What the shared OpenAI routes need from a model engine."""

    model_id: str
    max_context: int
    has_chat_template: bool

    def encode(self, text: str) -> list[int]:
        """Token ids of a raw prompt."""
        ...

    def chat_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of a conversation rendered with the model's chat template."""
        ...

    def generate(self, prompt_ids: list[int], params: SamplingParams) -> AsyncGenerator[Delta, None]:
        """Stream the completion of ``prompt_ids``; closing the iterator cancels generation."""
        ...

    def healthy(self) -> bool:
        """False when the engine can no longer serve (the replica is then restarted)."""
        ...

    def abort_all(self, reason: str) -> int:
        """End every running generation with a 503 error (drain deadline); returns how many."""
        ...


class TokenSink(Protocol):
    """The streamer interface a blocking generate loop reports to (transformers' ``BaseStreamer``)."""

    def put(self, value: Any) -> None:
        """New token ids (a tensor or a list)."""
        ...

    def end(self) -> None:
        """Generation ended."""
        ...


class QueueStreamer:
    """A transformers-style streamer (``put``/``end``) that hands token ids to an asyncio queue."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], *, skip_prompt: bool
    ) -> None:
        self._loop = loop
        self._queue = queue
        self._skip = skip_prompt

    def put(self, value: Any) -> None:
        """Called by the generate loop with new token ids (a tensor or a list)."""
        if self._skip:
            self._skip = False
            return
        ids = value.tolist() if hasattr(value, "tolist") else value
        flat = _flatten(ids)
        if flat:
            self._send(flat)

    def end(self) -> None:
        """Called once when generation ends."""
        self._send(None)

    def fail(self, error: BaseException) -> None:
        """Report an exception raised in the worker thread."""
        self._send(error)

    def _send(self, item: Any) -> None:
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)


def _flatten(ids: Any) -> list[int]:
    if isinstance(ids, int):
        return [ids]
    out: list[int] = []
    for item in ids:
        out.extend(_flatten(item))
    return out


class ThreadedEngine(ABC):
    """Base for engines whose generate call blocks and reports tokens through a streamer."""

    #: whether the generate call first reports the prompt ids (transformers does)
    skip_prompt = True

    def __init__(
        self,
        tokenizer: Any,
        *,
        model_id: str,
        max_context: int,
        eos_ids: Iterable[int],
        workers: int = 1,
    ) -> None:
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.max_context = max_context
        self.eos_ids = frozenset(eos_ids)
        self.has_chat_template = bool(getattr(tokenizer, "chat_template", None))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llmctl-generate")
        self._failed: BaseException | None = None
        self._running: dict[int, tuple[asyncio.Queue[Any], threading.Event]] = {}

    @abstractmethod
    def run_blocking(
        self, prompt_ids: list[int], params: SamplingParams, streamer: TokenSink, cancelled: threading.Event
    ) -> None:
        """Generate in the calling (worker) thread, calling ``streamer.put`` per step."""

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text)["input_ids"])

    def chat_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        if not self.has_chat_template:
            raise APIError(
                400,
                f"model {self.model_id!r} has no chat template; use /v1/completions with a plain prompt",
                param="messages",
                code="no_chat_template",
            )
        try:
            rendered = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
        except Exception as error:  # jinja errors (e.g. a role the template rejects) are client errors
            raise APIError(
                400, f"the chat template rejected the messages: {error}", param="messages"
            ) from None
        return list(self.tokenizer(rendered, add_special_tokens=False)["input_ids"])

    def healthy(self) -> bool:
        return self._failed is None

    def abort_all(self, reason: str) -> int:
        """Stop every generation (call from the event loop): each raises a 503 ``APIError``."""
        running = list(self._running.values())
        for queue, cancelled in running:
            cancelled.set()
            queue.put_nowait(_Aborted(reason))
        return len(running)

    def warmup(self, tokens: int = 2) -> None:
        """Run one short generation so the first request does not pay for lazy initialisation."""
        params = SamplingParams(max_tokens=tokens, temperature=0.0)
        self.run_blocking(self.encode("Hello"), params, _DiscardStreamer(), threading.Event())

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> AsyncGenerator[Delta, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancelled = threading.Event()
        streamer = QueueStreamer(loop, queue, skip_prompt=self.skip_prompt)

        def work() -> None:
            try:
                self.run_blocking(prompt_ids, params, streamer, cancelled)
            except BaseException as error:
                if isinstance(error, MemoryError):
                    self._failed = error
                streamer.fail(error)
            finally:
                streamer.end()

        loop.run_in_executor(self._pool, work)
        decoder = IncrementalDecoder(self.tokenizer)
        produced = 0
        self._running[id(queue)] = (queue, cancelled)
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, _Aborted):
                    raise APIError(503, item.reason, type="server_error", code="server_shutting_down")
                if isinstance(item, BaseException):
                    raise APIError(500, f"generation failed: {item}", type="server_error") from item
                for token in item:
                    if token in self.eos_ids:
                        yield Delta(decoder.flush(), 0, "stop")
                        return
                    produced += 1
                    text = decoder.push(token)
                    if produced >= params.max_tokens:
                        yield Delta(text + decoder.flush(), 1, "length")
                        return
                    yield Delta(text, 1)
            yield Delta(decoder.flush(), 0, "length" if produced >= params.max_tokens else "stop")
        finally:
            self._running.pop(id(queue), None)
            cancelled.set()


@dataclass(frozen=True)
class _Aborted:
    reason: str


class _DiscardStreamer:
    def put(self, value: Any) -> None:
        pass

    def end(self) -> None:
        pass
