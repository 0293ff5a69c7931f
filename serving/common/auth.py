"""API-key enforcement: ``Authorization: Bearer <key>``, one check for every server that enforces it.

The key comes from an app argument (``api_key``) or, in the cluster, from ``LLMCTL_API_KEY``, which
the workload sets from its ``api-key`` Secret when ``exposure.api_key`` is true.

- :func:`check_bearer` is the check itself, framework-neutral: the header's value in, None or the
  401 (:class:`Unauthorized`: status, headers, OpenAI error body) out. Keys are compared in constant
  time. The shared app's ASGI middleware (:class:`BearerAuth`) and the TorchServe gateway
  (``torchserve_neuronx/gateway.py``, aiohttp) both answer with it.
- :class:`BearerAuth` guards every route of the shared app but ``/healthz`` (open for probes and the
  local target's readiness check); ``/metrics`` is protected, because the Serve port is the one a
  public load balancer exposes (Prometheus scrapes Ray's own metrics port, 8080, which this app does
  not serve).
"""

from __future__ import annotations

import hmac
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmctl.errors import ServingError
from llmctl.serving.common.protocol import APIError

if TYPE_CHECKING:  # starlette comes with the serving extra; the local target imports this without it
    from starlette.types import ASGIApp, Receive, Scope, Send

API_KEY_ENV = "LLMCTL_API_KEY"
OPEN_PATHS = frozenset({"/healthz"})


def resolve_api_key(explicit: str | None = None) -> str | None:
    """The key to enforce: the app argument, else ``$LLMCTL_API_KEY``, else None (no auth).

    A variable that is set but empty is refused: it means the Secret was applied without a value,
    and serving without the key the blueprint asked for would be silently open.
    """
    if explicit:
        return explicit
    value = os.environ.get(API_KEY_ENV)
    if value is None:
        return None
    if not value.strip():
        raise ServingError(
            f"{API_KEY_ENV} is set but empty, so the endpoint would run without its API key",
            "put the key in the workload's `api-key` Secret (llmctl up generates one), or unset the variable",
        )
    return value.strip()


def _route_path(scope: Scope) -> str:
    """The request path relative to the app (Ray Serve sets ``root_path`` to the route prefix)."""
    path = str(scope.get("path", "/"))
    root = str(scope.get("root_path", "")).rstrip("/")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


@dataclass(frozen=True)
class Unauthorized:
    """A refused request: 401 with ``WWW-Authenticate: Bearer`` and an OpenAI error body (the
    ``openai`` client raises ``AuthenticationError``)."""

    message: str
    status: int = 401

    def body(self) -> bytes:
        """``{"error": {"message", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}``."""
        return json.dumps(APIError(self.status, self.message, code="invalid_api_key").body()).encode()

    def headers(self) -> dict[str, str]:
        """The response headers, less the body's length (each server frames the body itself)."""
        return {"Content-Type": "application/json", "WWW-Authenticate": "Bearer"}


def check_bearer(authorization: str | bytes | None, key: str) -> Unauthorized | None:
    """None when ``authorization`` (the header's value, None without one) carries ``key``, else the 401.

    Only ``Bearer <key>`` counts: the scheme in any case, blanks around the key ignored; any other
    scheme is no key at all ("missing"). A value as bytes (ASGI) is the header as sent; a str (aiohttp
    decodes with UTF-8 and ``surrogateescape``) is turned back into those bytes, so both compare the
    same bytes, and a value that is not UTF-8 is a wrong key, not an error.
    """
    raw = (
        authorization.encode("utf-8", "surrogateescape") if isinstance(authorization, str) else authorization
    )
    scheme, _, token = (raw or b"").partition(b" ")
    presented = token.strip() if scheme.lower() == b"bearer" else b""
    if not presented:
        return Unauthorized("missing API key: send the header 'Authorization: Bearer <key>'")
    if hmac.compare_digest(presented, key.encode()):
        return None
    return Unauthorized("incorrect API key provided")


def _authorization(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            return bytes(value)
    return None


class BearerAuth:
    """ASGI middleware: the 401 of :func:`check_bearer` unless the request carries the key."""

    def __init__(self, app: ASGIApp, *, api_key: str, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        self.app = app
        self._key = api_key
        self._open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = None
        if scope["type"] == "http" and _route_path(scope) not in self._open:
            refused = check_bearer(_authorization(scope), self._key)
        if refused is None:
            await self.app(scope, receive, send)
            return
        body = refused.body()
        headers = [(n.lower().encode(), v.encode()) for n, v in refused.headers().items()]
        await send(
            {
                "type": "http.response.start",
                "status": refused.status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
