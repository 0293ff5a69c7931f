"""Helpers of the lifecycle tests (imported by conftest.py and the tests)."""

from __future__ import annotations

from typing import Any

from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress


def lifecycle(progress: Progress | None = None, stack: str = "dev") -> Lifecycle:
    return Lifecycle(Engine(resolve_backend()), progress or Progress("quiet"), stack=stack)


def ready_pod(namespace: str, name: str = "serve-0") -> dict[str, Any]:
    """A Ready pod as the API server reports it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def short(urn: str) -> str:
    """'Type::name' of a URN (the type without its parents)."""
    qualified, name = urn.split("::")[2:4]
    return f"{qualified.split('$')[-1]}::{name}"
