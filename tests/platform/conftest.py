"""Shared fixtures: platform graphs under Pulumi mocks, built once per config and reused."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from platform_support import Graph, graph_for

from llmctl.blueprints import versions as versions_module
from llmctl.infra.plan.offline import run_offline
from llmctl.infra.platform.config import PlatformConfig


@pytest.fixture(scope="session")
def all_pools_config() -> PlatformConfig:
    return PlatformConfig.for_blueprints([], all_pools=True)


@pytest.fixture(scope="session")
def all_pools_graph(all_pools_config: PlatformConfig) -> Graph:
    return Graph(graph_for(all_pools_config))


@pytest.fixture
def exports() -> Callable[[PlatformConfig], dict[str, Any]]:
    """Run the program and collect what it passes to pulumi.export (resolved)."""

    def collect(config: PlatformConfig) -> dict[str, Any]:
        import pulumi

        from llmctl.infra.platform import program

        seen: dict[str, Any] = {}
        real_export = pulumi.export

        def export(name: str, value: Any) -> None:
            real_export(name, value)
            pulumi.Output.from_input(value).apply(lambda v: seen.__setitem__(name, v))

        original = program.pulumi.export
        program.pulumi.export = export  # type: ignore[assignment]
        try:
            run_offline(lambda: program.build_platform(config))
        finally:
            program.pulumi.export = original  # type: ignore[assignment]
        return json.loads(json.dumps(seen, default=str))

    return collect


@pytest.fixture
def latest_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deliberately broken versions file: the Karpenter chart and the AMI alias float."""
    real = versions_module.versions()
    broken = real.model_copy(
        update={
            "charts": {
                **real.charts,
                "karpenter": real.charts["karpenter"].model_copy(update={"version": "latest"}),
            },
            "ami": {
                **real.ami,
                "al2023_alias": real.ami["al2023_alias"].model_copy(update={"value": "al2023@latest"}),
            },
        }
    )
    for module in (
        "llmctl.infra.platform.charts",
        "llmctl.infra.platform.nodepools",
        "llmctl.infra.platform.program",
    ):
        monkeypatch.setattr(f"{module}.versions", lambda: broken)
