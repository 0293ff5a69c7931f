"""A streaming chat session against an OpenAI-compatible endpoint (used by ``llmctl chat``).

The session keeps the history (an optional system prompt first), streams each answer as it
arrives and adds it to the history only once it is complete, so a failed turn leaves the history
as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from llmctl.errors import EndpointError, LlmctlError, did_you_mean
from llmctl.serving.client.bench.client import auth_headers, model_ids, unreachable

COMMANDS = {
    "/reset": "forget the conversation (keeps the system prompt)",
    "/system": "/system TEXT sets the system prompt and resets the conversation",
    "/model": "/model NAME switches the model",
    "/history": "show the conversation so far",
    "/help": "list the commands",
    "/exit": "leave (also /quit or Ctrl-D)",
}


def parse_command(line: str) -> tuple[str, str] | None:
    """``/name arg`` -> (name, arg); None for ordinary text. Unknown commands raise LlmctlError."""
    text = line.strip()
    if not text.startswith("/"):
        return None
    name, _, arg = text.partition(" ")
    name = name.lower()
    if name == "/quit":
        name = "/exit"
    if name not in COMMANDS:
        hint = did_you_mean(name, COMMANDS) or f"commands: {', '.join(COMMANDS)}"
        raise LlmctlError(f"unknown command {name}", hint)
    return name, arg.strip()


def list_models(base_url: str, api_key: str | None = None, timeout: float = 10.0) -> list[str]:
    """The model ids an endpoint lists; EndpointError when it cannot be reached."""
    try:
        response = httpx.get(f"{base_url}/models", headers=auth_headers(api_key), timeout=timeout)
    except httpx.TransportError as error:
        raise unreachable(base_url, error) from error
    return model_ids(base_url, response.status_code, response.content)


class ChatSession:
    """History plus streaming turns against one endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        timeout: float = 300.0,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.system = system
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.history: list[dict[str, str]] = []
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))
        self.last_usage: dict[str, Any] | None = None

    def close(self) -> None:
        self._client.close()

    def reset(self) -> None:
        self.history.clear()

    def set_system(self, text: str) -> None:
        self.system = text or None
        self.reset()

    def messages(self) -> list[dict[str, str]]:
        head = [{"role": "system", "content": self.system}] if self.system else []
        return head + self.history

    def send(self, text: str) -> Iterator[str]:
        """Stream the answer to ``text``; the turn joins the history once the answer is complete."""
        messages = [*self.messages(), {"role": "user", "content": text}]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        parts: list[str] = []
        self.last_usage = None
        url = f"{self.base_url}/chat/completions"
        try:
            with self._client.stream("POST", url, json=body, headers=auth_headers(self.api_key)) as response:
                if response.status_code != 200:
                    detail = response.read().decode(errors="replace")[:300]
                    raise EndpointError(
                        f"{url} answered HTTP {response.status_code}: {detail}",
                        "check --model (see /model) and the server logs",
                    )
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        continue
                    if "error" in chunk:
                        raise EndpointError(f"the server reported an error: {chunk['error']}", None)
                    if chunk.get("usage"):
                        self.last_usage = chunk["usage"]
                    for choice in chunk.get("choices") or ():
                        content = (choice.get("delta") or {}).get("content")
                        if content:
                            parts.append(content)
                            yield content
        except httpx.TransportError as error:
            raise EndpointError(
                f"lost the connection to {self.base_url}: {type(error).__name__}: {error}",
                "check that the server still runs",
            ) from error
        self.history.append({"role": "user", "content": text})
        self.history.append({"role": "assistant", "content": "".join(parts)})


def open_session(
    endpoint: str | None,
    blueprint: str | None,
    stack: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    workload: str | None = None,
    **settings: Any,
) -> ChatSession:
    """A session with an endpoint URL or a deployed blueprint; the model defaults to the
    blueprint's, else the endpoint's first listed model."""
    from llmctl.serving.client.bench.options import resolve_endpoints

    urls, deployed_model, _ = resolve_endpoints([endpoint] if endpoint else None, blueprint, stack, workload)
    base_url = urls[0]
    chosen = model or deployed_model
    if not chosen:
        models = list_models(base_url, api_key)
        if not models:
            raise EndpointError(f"{base_url} does not list its models", "pass --model NAME")
        chosen = models[0]
    return ChatSession(base_url, chosen, api_key=api_key, **settings)
