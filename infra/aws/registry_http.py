"""Reading OCI registries and Helm chart repositories over HTTP: the anonymous pull token and the
registry's base URL, shared by the chart pin checks and the image checks."""

from __future__ import annotations

import functools
import re
from typing import Any

TIMEOUT_S = 10.0
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


class RegistryError(Exception):
    """A repository could not be read; `missing` when it answered that the chart is not there."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@functools.cache
def _tls_context() -> Any:
    """One TLS context per process: building one loads the CA bundle (tens of ms of CPU), and an
    httpx client builds one for itself and one per proxy setting unless it is given one."""
    import httpx

    return httpx.create_ssl_context()


def registry_client() -> Any:
    """An httpx client for registries and chart repositories (proxies from the environment)."""
    import httpx

    return httpx.Client(timeout=TIMEOUT_S, follow_redirects=True, verify=_tls_context())


def base_url(host: str) -> str:
    """`http://` for a loopback registry (the tests' local server), `https://` for any other."""
    return (
        f"http://{host}" if host.split(":")[0] in LOOPBACK or host.startswith("[::1]") else f"https://{host}"
    )


def bearer_token(client: Any, challenge: str, repository: str) -> str:
    """The registry's anonymous pull token (OCI distribution token authentication)."""
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if not challenge.lower().startswith("bearer") or "realm" not in fields:
        raise RegistryError(f"the registry asks for credentials ({challenge or 'no challenge'})")
    params = {"scope": f"repository:{repository}:pull"}
    if "service" in fields:
        params["service"] = fields["service"]
    reply = client.get(fields["realm"], params=params)
    if reply.status_code != 200:
        raise RegistryError(f"token endpoint answered HTTP {reply.status_code}")
    body = reply.json()
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryError("token endpoint returned no token")
    return str(token)
