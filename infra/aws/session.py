"""boto3 sessions that share one botocore data loader and reuse clients across sessions.

A new `boto3.session.Session` reads its service models (JSON, several MB for EC2) again the first
time it makes each client: about 0.3 CPU seconds per client. The sweep, teardown and doctor make a
session each and several clients, and `down` runs the sweep more than once. The loader only holds
those data files (no credentials, no configuration), so every session here shares one; each session
still reads the environment and its own credentials.

Making a client is costly even with the models loaded (botocore builds the client class and copies
its event handlers: about 35 ms of CPU for EC2), and `down` asks for the same clients again in each
sweep and check. A session made here hands out one client per service, region, credentials and
AWS environment for the whole process (boto3 clients are thread-safe): a change of credentials,
profile, region, `AWS_*` or proxy variable, or of the config file, gets a new client.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
from typing import Any

_CLIENTS: dict[tuple[Any, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()
#: the variables besides AWS_* that change what a client does (botocore's proxy settings)
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "no_proxy")


@functools.cache
def _shared_loader() -> Any:
    from botocore.loaders import create_loader

    return create_loader()


def _file_stamp(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(os.path.expanduser(path))
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size


def _client_key(session: Any, service: str, region: str | None) -> tuple[Any, ...]:
    """What a client depends on beyond its service model: region, profile, credentials, environment."""
    credentials = session.get_credentials()
    frozen = tuple(credentials.get_frozen_credentials()) if credentials is not None else None
    environment = tuple(
        sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.startswith("AWS_") or name.lower() in _PROXY_VARIABLES
        )
    )
    files = tuple(
        _file_stamp(os.environ.get(name, default))
        for name, default in (
            ("AWS_CONFIG_FILE", "~/.aws/config"),
            ("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
        )
    )
    return (service, region or session.region_name, session.profile_name, frozen, environment, files)


@functools.cache
def _session_class() -> type[Any]:
    import boto3.session

    class ReusingSession(boto3.session.Session):
        """A boto3 session whose plain `client(service, region_name=...)` calls reuse the process's
        clients (module docstring); any other argument makes a new client, as boto3 does."""

        def client(self, service_name: Any, region_name: Any = None, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs:
                return super().client(service_name, region_name, *args, **kwargs)
            key = _client_key(self, service_name, region_name)
            with _CLIENTS_LOCK:
                found = _CLIENTS.get(key)
            if found is None:
                made = super().client(service_name, region_name)
                with _CLIENTS_LOCK:
                    found = _CLIENTS.setdefault(key, made)
            return found

    return ReusingSession


def _builtin_handlers() -> Any:
    """botocore's built-in event handlers, registered once per state of its list: a new botocore
    session registers its few hundred (`handlers.BUILTIN_HANDLERS`) one by one, inspecting each (a
    session took 14 ms of CPU, 2 ms with a copy), and `down` makes dozens of sessions. Each session
    gets a copy, as each botocore client gets a copy of its session's. A handler added to the list
    later (moto's in-process stubber appends one when it is imported) makes a new set, so a session
    always has exactly what a plain botocore session would."""
    import botocore.handlers

    return _handlers_for(len(botocore.handlers.BUILTIN_HANDLERS))


@functools.cache
def _handlers_for(_count: int) -> Any:
    import botocore.session
    from botocore.hooks import HierarchicalEmitter

    emitter = HierarchicalEmitter()
    botocore.session.Session(event_hooks=emitter)  # registers the built-in handlers on it
    return emitter


def new_session(region_name: str | None = None) -> Any:
    """A fresh boto3 session (its own credentials and configuration) with the shared data loader, a
    copy of botocore's built-in handlers and the process's clients."""
    import botocore.session

    core = botocore.session.Session(
        event_hooks=copy.copy(_builtin_handlers()), include_builtin_handlers=False
    )
    loader = _shared_loader()
    core.register_component("data_loader", loader)
    session = _session_class()(botocore_session=core, region_name=region_name)
    paths: list[str] = loader.search_paths
    paths[:] = list(dict.fromkeys(paths))  # boto3 appends its own data folder once per session
    return session
