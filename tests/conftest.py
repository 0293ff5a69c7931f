"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """One moto server (real HTTP, real AWS API shapes) on 127.0.0.1 at a free port for the session.

    Tests that need a clean account reset it through ``POST <url>/moto-api/reset``.
    """
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
