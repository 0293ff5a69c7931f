"""Request limits: prompt length, max tokens and stop sequences, with clear 4xx errors."""

from __future__ import annotations

from dataclasses import dataclass

from llmctl.serving.common.protocol import APIError
from llmctl.serving.common.stop import MAX_STOP_SEQUENCES


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    max_context: int
    max_new_tokens: int

    def max_tokens(self, requested: int | None, prompt_tokens: int) -> int:
        """The number of tokens to generate, or an APIError explaining what is wrong."""
        if requested is not None and requested < 1:
            raise APIError(
                400,
                f"max_tokens must be at least 1, got {requested}",
                param="max_tokens",
                code="invalid_value",
            )
        if requested is not None and requested > self.max_new_tokens:
            raise APIError(
                400,
                f"max_tokens is {requested}, but this deployment generates at most {self.max_new_tokens} tokens "
                "per request (serving.max_new_tokens)",
                param="max_tokens",
                code="invalid_value",
            )
        if prompt_tokens >= self.max_context:
            raise APIError(
                400,
                f"this model's maximum context length is {self.max_context} tokens, but the prompt has "
                f"{prompt_tokens} tokens; shorten the prompt",
                param="messages",
                code="context_length_exceeded",
            )
        room = self.max_context - prompt_tokens
        if requested is None:
            return min(self.max_new_tokens, room)
        if requested > room:
            raise APIError(
                400,
                f"this model's maximum context length is {self.max_context} tokens; the prompt has "
                f"{prompt_tokens} tokens and max_tokens asks for {requested} more; lower max_tokens to {room} "
                "or shorten the prompt",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return requested


def stop_list(stop: str | list[str] | None) -> list[str]:
    """The request's stop sequences as a list, checked against the maximum count."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOP_SEQUENCES:
        raise APIError(
            400, f"at most {MAX_STOP_SEQUENCES} stop sequences are allowed, got {len(stops)}", param="stop"
        )
    return stops


def single_choice(n: int) -> None:
    """Only one choice per request is supported."""
    if n != 1:
        raise APIError(400, f"n must be 1 (one choice per request), got {n}", param="n", code="invalid_value")
