"""How long Karpenter keeps nodes, per pool kind: accelerator and Ray head pools never expire or
consolidate busy nodes by default, the general CPU pool expires monthly; the setting is validated.

(Schema and CEL conformance of these NodePools: tests/conformance/test_crds.py.)
"""

from __future__ import annotations

import pytest
from platform_support import Graph, graph_for

from llmctl.blueprints.pools import HEAD_POOL, POOLS, pool
from llmctl.errors import BlueprintError
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.manifests import nodepool_manifest

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
ACCELERATOR_POOLS = [spec.name for spec in POOLS if spec.accelerator != "cpu"]


def _expiries(config: PlatformConfig) -> dict[str, str]:
    graph = Graph(graph_for(config))
    return {
        r.inputs["metadata"]["name"]: r.inputs["spec"]["template"]["spec"]["expireAfter"]
        for r in graph.of(NODEPOOL)
    }


def test_accelerator_and_head_pools_never_expire_by_default() -> None:
    expiries = _expiries(PlatformConfig.for_blueprints([], all_pools=True))
    assert ACCELERATOR_POOLS == [
        "inferentia-inf2",
        "trainium-trn1",
        "trainium-trn2",
        "gpu-nvidia",
        "gpu-nvidia-efa",
    ]
    assert expiries == {
        "default": "720h",
        HEAD_POOL: "Never",
        **{name: "Never" for name in ACCELERATOR_POOLS},
    }


def test_expiry_is_configurable_per_pool_kind() -> None:
    config = PlatformConfig.for_blueprints(
        [], all_pools=True, node_expiry={"accelerator": "2160h", "heads": "336h", "cpu": "Never"}
    )
    expiries = _expiries(config)
    assert {expiries[name] for name in ACCELERATOR_POOLS} == {"2160h"}
    assert expiries[HEAD_POOL] == "336h" and expiries["default"] == "Never"
    # and it survives the round trip through Pulumi stack config (the plain `pulumi` CLI path)
    assert PlatformConfig.from_pulumi_config(config.to_pulumi_config()).node_expiry == config.node_expiry


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("30d", "not 'Never' or a duration"),
        ("never", "not 'Never' or a duration"),
        ("59m", "shorter than 1h"),
    ],
)
def test_bad_expiry_names_the_field(value: str, fragment: str) -> None:
    with pytest.raises(BlueprintError) as info:
        PlatformConfig.for_blueprints([], node_expiry={"accelerator": value})
    problems = dict(info.value.problems)
    assert fragment in problems["node_expiry.accelerator"], problems


def test_an_hour_is_accepted() -> None:
    assert PlatformConfig.model_validate({"node_expiry": {"cpu": "1h"}}).node_expiry.cpu == "1h"
    assert PlatformConfig.model_validate({"node_expiry": {"cpu": "30m30m"}}).node_expiry.cpu == "30m30m"


def test_head_pool_is_on_demand_and_consolidated_only_when_empty() -> None:
    spec = nodepool_manifest(pool(HEAD_POOL))["spec"]
    requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["template"]["spec"]["taints"] == []
    assert spec["template"]["spec"]["expireAfter"] == "Never"


def test_only_the_default_cpu_pool_repacks_and_uses_spot() -> None:
    """Every other Karpenter pool leaves nodes with running pods alone and is on-demand only."""
    for spec in POOLS:
        if spec.managed_by != "karpenter":
            continue
        disruption = nodepool_manifest(spec)["spec"]["disruption"]
        repacks = disruption["consolidationPolicy"] != "WhenEmpty"
        assert repacks == (spec.name == "default"), spec.name
        assert ("spot" in spec.capacity_types) == (spec.name == "default"), spec.name
