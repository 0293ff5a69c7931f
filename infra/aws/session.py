"""boto3 sessions that share one botocore data loader.

A new `boto3.session.Session` reads its service models (JSON, several MB for EC2) again the first
time it makes each client: about 0.3 CPU seconds per client. The sweep, teardown and doctor make a
session each and several clients, and `down` runs the sweep more than once. The loader only holds
those data files (no credentials, no configuration), so every session here shares one; each session
still reads the environment and its own credentials.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _shared_loader() -> Any:
    from botocore.loaders import create_loader

    return create_loader()


def new_session(region_name: str | None = None) -> Any:
    """A fresh boto3 session (its own credentials and configuration) with the shared data loader."""
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    loader = _shared_loader()
    core.register_component("data_loader", loader)
    session = boto3.session.Session(botocore_session=core, region_name=region_name)
    paths: list[str] = loader.search_paths
    paths[:] = list(dict.fromkeys(paths))  # boto3 appends its own data folder once per session
    return session
