"""API-key enforcement for the shared app: ``Authorization: Bearer <key>`` on every route but ``/healthz``.

The key comes from an app argument (``api_key``) or, in the cluster, from ``LLMCTL_API_KEY``, which
the workload sets from its ``api-key`` Secret when ``exposure.api_key`` is true. ``/healthz`` stays
open for probes and the local target's readiness check; ``/metrics`` is protected, because the
Serve port is the one a public load balancer exposes (Prometheus scrapes Ray's own metrics port,
8080, which this app does not serve). Keys are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
import os
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


def _presented_key(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = bytes(value).partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


class BearerAuth:
    """ASGI middleware: 401 with an OpenAI error body unless the request carries the key."""

    def __init__(self, app: ASGIApp, *, api_key: str, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        self.app = app
        self._key = api_key.encode()
        self._open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _route_path(scope) in self._open:
            await self.app(scope, receive, send)
            return
        presented = _presented_key(scope)
        if presented is not None and hmac.compare_digest(presented, self._key):
            await self.app(scope, receive, send)
            return
        message = (
            "incorrect API key provided"
            if presented
            else "missing API key: send the header 'Authorization: Bearer <key>'"
        )
        error = APIError(401, message, code="invalid_api_key")
        body = json.dumps(error.body()).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b"Bearer"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
