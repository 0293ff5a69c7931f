"""aiohttp imported without the system's CA certificates when every endpoint is plain http://.

aiohttp builds two SSL contexts when its connector module is imported, and the verified one loads
the system's CA bundle (144 certificates here: about 40 ms of CPU per ``llmctl bench`` run), whether
or not any request will use TLS. A run whose endpoints are all ``http://`` never does, so the CLI
imports aiohttp through :func:`import_http_client` before anything else imports it: OpenSSL's own
variables (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) point at no certificates while the module builds
its contexts, and are restored right after. An ``https://`` endpoint, or a deployed blueprint
(whose URL is read later), keeps the normal import.
"""

from __future__ import annotations

import os
import sys

# the variables OpenSSL reads for its default trust store (``ssl.get_default_verify_paths()``)
_TRUST_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")


def given_urls(endpoints: list[str] | None, blueprint: str | None) -> list[str]:
    """The endpoint URLs as ``llmctl bench`` will resolve them, when known before any lookup: the
    ``--endpoint`` values (``;``-separated too), else ``OPENAI_API_BASE``; none with a blueprint."""
    if blueprint:
        return []
    if endpoints:
        return [url for item in endpoints for url in item.split(";") if url.strip()]
    return [url for url in os.environ.get("OPENAI_API_BASE", "").split(";") if url.strip()]


def plain_http(urls: list[str]) -> bool:
    """Whether every URL is plain HTTP (a bare ``host:port`` becomes ``http://`` when normalized)."""
    return bool(urls) and all(url.strip().lower().startswith("http://") or "://" not in url for url in urls)


def import_http_client(endpoints: list[str] | None, blueprint: str | None) -> None:
    """Import aiohttp, without loading CA certificates when no endpoint can use TLS."""
    if "aiohttp" in sys.modules or not plain_http(given_urls(endpoints, blueprint)):
        return
    saved = {name: os.environ.get(name) for name in _TRUST_VARIABLES}
    os.environ.update(dict.fromkeys(_TRUST_VARIABLES, os.devnull))
    try:
        import aiohttp  # noqa: F401 - the import is the point: its SSL contexts are built now
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
