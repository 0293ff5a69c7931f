"""Helpers of the platform tests: platform graphs under Pulumi mocks, built once per config."""

from __future__ import annotations

import functools

from llmctl.infra.offline import Registered, run_offline
from llmctl.infra.platform.config import PlatformConfig


@functools.lru_cache(maxsize=32)
def _graph(config_json: str) -> tuple[Registered, ...]:
    from llmctl.infra.platform.program import build_platform

    config = PlatformConfig.model_validate_json(config_json)
    return tuple(run_offline(lambda: build_platform(config)))


def graph_for(config: PlatformConfig) -> list[Registered]:
    """The registered resources of the platform program for `config` (cached)."""
    return list(_graph(config.model_dump_json()))


class Graph:
    """Lookup helpers over a registered graph."""

    def __init__(self, resources: list[Registered]) -> None:
        self.resources = resources
        self.by_urn = {r.urn: r for r in resources}

    def of(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Registered:
        matches = [r for r in self.resources if r.name == name]
        assert len(matches) == 1, f"{name}: {len(matches)} matches"
        return matches[0]

    def depends(self, res: Registered, other: Registered) -> bool:
        return other.urn in res.dependencies

    def types(self) -> set[str]:
        return {r.type for r in self.resources}
