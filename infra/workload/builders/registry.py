"""Runtime builders, registered against the runtime registry (`blueprints/runtimes.py`).

Each runtime's builder module is `builders/<package>.py` (the registry entry's `package`) and calls
:func:`register` at import with its name and its `build` function; a runtime whose endpoint shape
is `service` also gives `service`, which names its Service and port. :func:`builder_for` imports
the module on first use, so only the builder a blueprint needs is loaded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from llmctl.blueprints.runtimes import runtime
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.config import WorkloadConfig

Build = Callable[[WorkloadConfig], list[Obj]]
ServiceOf = Callable[[WorkloadConfig], tuple[str, int]]


@dataclass(frozen=True)
class RuntimeBuilder:
    """What a runtime's builder module registers."""

    runtime: str
    build: Build
    service: ServiceOf | None = None


_REGISTERED: dict[str, RuntimeBuilder] = {}


def register(name: str, build: Build, service: ServiceOf | None = None) -> RuntimeBuilder:
    """Register a runtime's builder (called by the builder module at import)."""
    spec = runtime(name)  # an unknown name fails here, at import
    if spec.endpoint == "service" and service is None:
        raise TypeError(f"runtime {name} has endpoint shape 'service'; its builder must register `service`")
    entry = RuntimeBuilder(runtime=spec.name, build=build, service=service)
    _REGISTERED[spec.name] = entry
    return entry


def module_name(name: str) -> str:
    """The builder module of a runtime."""
    return f"{__name__.rsplit('.', 1)[0]}.{runtime(name).package}"


def builder_for(name: str) -> RuntimeBuilder:
    """The registered builder of a runtime (importing its module on first use)."""
    if name not in _REGISTERED:
        importlib.import_module(module_name(name))
    if name not in _REGISTERED:
        raise LookupError(f"{module_name(name)} does not register a builder for runtime {name}")
    return _REGISTERED[name]
