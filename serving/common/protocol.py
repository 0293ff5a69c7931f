"""OpenAI-compatible request and response models (the subset the serving apps implement).

Requests ignore fields they do not know (clients such as Open WebUI send extras); responses
follow the OpenAI wire format, so the official ``openai`` client parses them.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length"]


class APIError(Exception):
    """An error answered to the client with an HTTP status and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Request):
    """Streaming options."""

    include_usage: bool = Field(False, description="Send a last chunk with the token usage.")


class _Sampling(_Request):
    model: str = Field(description="Served model name (see /v1/models).")
    max_tokens: int | None = Field(None, description="Tokens to generate at most (>= 1).")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    n: int = Field(1, description="Choices per request (only 1 is supported).")
    stop: str | list[str] | None = Field(None, description="Up to 4 sequences that end the generation.")
    stream: bool = Field(False, description="Stream the answer as server-sent events.")
    stream_options: StreamOptions | None = Field(None, description="Streaming options.")
    seed: int | None = Field(None, description="Random seed for sampling.")
    user: str | None = Field(None, description="End-user id (ignored).")


class ChatMessage(_Request):
    """One chat message; content parts are joined when given as a list of text parts."""

    role: Literal["system", "user", "assistant", "tool", "developer"] = Field(description="Author role.")
    content: str | list[dict[str, Any]] | None = Field(None, description="Message text or text parts.")

    def text(self) -> str:
        """The message content as plain text."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(
            str(part.get("text", "")) for part in self.content if part.get("type", "text") == "text"
        )


class ChatCompletionRequest(_Sampling):
    """POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1, description="The conversation so far.")
    max_completion_tokens: int | None = Field(None, description="Newer name of max_tokens.")


class CompletionRequest(_Sampling):
    """POST /v1/completions."""

    prompt: str | list[str] = Field(description="The prompt (a string, or a list holding one string).")
    echo: bool = Field(False, description="Prepend the prompt to the answer.")


class Usage(BaseModel):
    """Token counts of one request."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


def new_id(prefix: str) -> str:
    """A fresh response id such as ``chatcmpl-3f2a...``."""
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    """Unix seconds for the ``created`` field."""
    return int(time.time())


def model_list(model_id: str, created: int, max_context: int) -> dict[str, Any]:
    """The /v1/models body."""
    return {
        "object": "list",
        "data": [
            {
                "id": model_id,
                "object": "model",
                "created": created,
                "owned_by": "llmctl",
                "max_model_len": max_context,
            }
        ],
    }


def chat_completion(
    rid: str, created: int, model: str, text: str, finish: FinishReason, usage: Usage
) -> dict[str, Any]:
    """A non-streamed chat completion body."""
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": usage.model_dump(),
    }


def chat_chunk(
    rid: str, created: int, model: str, delta: dict[str, str], finish: FinishReason | None = None
) -> dict[str, Any]:
    """One streamed chat completion chunk."""
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def completion(
    rid: str, created: int, model: str, text: str, finish: FinishReason | None, usage: Usage | None = None
) -> dict[str, Any]:
    """A text completion body (also one streamed chunk when ``usage`` is None)."""
    body: dict[str, Any] = {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
    }
    if usage is not None:
        body["usage"] = usage.model_dump()
    return body


def usage_chunk(rid: str, created: int, model: str, obj: str, usage: Usage) -> dict[str, Any]:
    """The last streamed chunk when ``stream_options.include_usage`` is set."""
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage.model_dump(),
    }
