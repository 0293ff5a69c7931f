"""TorchServe's own inference key, as llmctl's gateway (:mod:`.gateway`) forwards with it.

When TorchServe's token authorization is on (built in from 0.11.1, with the endpoint plugin in
0.11.0) it writes ``key_file.json`` in its working directory: an inference key, a management key and
an API key, the first two with an ``expiration time`` (``token_expiration_min``, 60 minutes by
default). :class:`InferenceKey` reads the file again whenever it changes, and once the key is within
:data:`RENEW_MARGIN_S` of its expiration asks TorchServe for a new one (``GET /token?type=inference``
on the management API with the API key).

Nothing here blocks the gateway's event loop: the file is read in a worker thread, and the renewal
goes through the gateway's own ``aiohttp.ClientSession`` as a background task. Requests go on with
the current key while it is still valid; only a key that has already expired makes a request wait
for the renewal (TorchServe would refuse it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import aiohttp

#: a key this close to its expiration time is renewed (in the background)
RENEW_MARGIN_S = 120.0
#: how long one renewal may take before it is given up (the next request starts another)
RENEW_TIMEOUT = aiohttp.ClientTimeout(total=10)
_INSTANT = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$")


def parse_instant(text: str) -> float:
    """Unix seconds of a Java ``Instant.toString()`` (``2024-02-16T21:12:24.801167Z``)."""
    match = _INSTANT.match(text.strip())
    if not match:
        raise ValueError(f"not an instant: {text!r}")
    whole = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return whole.timestamp() + float("0." + (match.group(2) or "0"))


@dataclass
class InferenceKey:
    """TorchServe's current inference key, from its key file, renewed before it expires."""

    path: Path
    management_port: int
    _mtime: int | None = None
    _key: str | None = None
    _expires: float = 0.0
    _api_key: str | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _renewal: asyncio.Task[None] | None = None

    def _read(self) -> bool:
        """Read the file if it changed (blocking: called in a worker thread); False without a key."""
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            self._mtime, self._key = None, None
            return False
        if mtime != self._mtime:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                key, api_key = str(data["inference"]["key"]), str(data["API"]["key"])
                expires = parse_instant(str(data["inference"]["expiration time"]))
            except (OSError, ValueError, KeyError, TypeError):
                return self._key is not None  # caught mid-write: the last key, and read it again next time
            self._key, self._api_key, self._expires, self._mtime = key, api_key, expires, mtime
        return True

    async def current(self, session: aiohttp.ClientSession, *, reread: bool = False) -> str | None:
        """The key to forward with (None: TorchServe's token authorization is off). ``reread``: TorchServe
        refused the last one, so read the file again, after the renewal under way (if any) is done: the
        switch to a new key and the rewrite of the file are two steps, so a request can be refused before
        the new key is in the file, while the renewal ends only once TorchServe has answered, file
        written (read then, the file could still hold the refused key: a 400 to the client)."""
        if reread and self._renewal is not None and not self._renewal.done():
            await asyncio.shield(self._renewal)
        async with self._lock:
            if reread:
                self._mtime = None
            if not await asyncio.to_thread(self._read):
                return None
            left, key = self._expires - time.time(), self._key
            if left < RENEW_MARGIN_S and (self._renewal is None or self._renewal.done()):
                self._renewal = asyncio.create_task(self._renew(session, self._api_key))
            renewal = self._renewal
        if left > 0 or renewal is None:
            return key
        await asyncio.shield(renewal)  # expired: TorchServe refuses it, so wait for the new one
        return self._key

    async def _renew(self, session: aiohttp.ClientSession, api_key: str | None) -> None:
        url = f"http://127.0.0.1:{self.management_port}/token?type=inference"
        try:
            async with session.get(
                url, headers={"Authorization": f"Bearer {api_key}"}, timeout=RENEW_TIMEOUT
            ) as reply:
                await reply.read()  # TorchServe rewrites the file before it answers
                if reply.status != 200:
                    return  # TorchServe refuses the old key once it expires; the next request tries again
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return
        async with self._lock:
            self._mtime = None  # TorchServe rewrote the file
            await asyncio.to_thread(self._read)

    async def close(self) -> None:
        """Stop a renewal still under way (before the session it uses closes)."""
        if self._renewal is not None and not self._renewal.done():
            self._renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewal
