"""Ray heads land on capacity that is not taken away: the on-demand `ray-head` pool, annotated
`karpenter.sh/do-not-disrupt`, and the schedulability check agrees that they fit there, for every
catalog blueprint that runs Ray. UIs and helper Jobs stay on the `default` CPU pool."""

from __future__ import annotations

from typing import Any

import pytest
from workload_helpers import CATALOG, config_for, existing_cluster, find, manifests_for

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import HEAD_POOL, POOL_LABEL, pool
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.manifests import nodepool_manifest
from llmctl.infra.workload.config import PoolFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.schedulability import check_schedulable, pod_templates, selector_matches

RAY = [name for name in CATALOG if any(o["kind"] == "RayService" for o in manifests_for(name))]


def _head(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return find(manifests, "RayService")["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]


def test_the_catalog_has_ray_blueprints() -> None:
    assert len(RAY) >= 4 and "llama2-inf2" in RAY and "tiny-cpu" in RAY


@pytest.mark.parametrize("name", RAY)
def test_head_is_on_the_head_pool_and_not_disrupted(name: str) -> None:
    head = _head(manifests_for(name))
    assert head["spec"]["nodeSelector"] == {POOL_LABEL: HEAD_POOL}
    assert head["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    # the pool behind that selector: on-demand, consolidated only when empty, never expires
    nodepool = nodepool_manifest(
        pool(HEAD_POOL), expire_after=PlatformConfig().node_expiry.for_pool(pool(HEAD_POOL))
    )
    requirements = {r["key"]: r["values"] for r in nodepool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["on-demand"]
    assert nodepool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert nodepool["spec"]["template"]["spec"]["expireAfter"] == "Never"


@pytest.mark.parametrize("name", RAY)
def test_head_fits_only_the_head_pool_of_its_platform(name: str) -> None:
    """The schedulability check finds the head a node of the head pool, and no other pool matches."""
    config = config_for(name)
    pools = config.platform.pools
    assert HEAD_POOL in [p.name for p in pools]
    rayservice = find(build_manifests(config, hf_token=None), "RayService")
    head = next(t for t in pod_templates(rayservice) if t.where == "head group")
    matching = {p.name for p in pools if selector_matches(head.spec, p.node_labels())}
    assert matching == {HEAD_POOL}
    head_only = [p for p in pools if p.name == HEAD_POOL]
    assert check_schedulable([rayservice], pools, hardware()) == []
    problems = [p for p in check_schedulable([rayservice], head_only, hardware()) if p.where == "head group"]
    assert problems == []


def test_a_platform_without_the_head_pool_is_refused_by_the_check() -> None:
    """An older platform (no ray-head pool): validate names the head as unschedulable."""
    config = config_for("llama2-inf2")
    old = [p for p in config.platform.pools if p.name != HEAD_POOL]
    rayservice = find(build_manifests(config, hf_token=None), "RayService")
    problems = [p for p in check_schedulable([rayservice], old, hardware()) if p.where == "head group"]
    assert len(problems) == 1 and f"{POOL_LABEL}={HEAD_POOL}" in problems[0].message


def test_uis_stay_on_the_default_pool() -> None:
    webui = find(manifests_for("llama3-vllm-inf2"), "Deployment", "llama3-vllm-inf2-open-webui")
    spec = webui["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {POOL_LABEL: "default"}
    assert "karpenter.sh/do-not-disrupt" not in (
        webui["spec"]["template"]["metadata"].get("annotations") or {}
    )


def test_existing_cluster_head_goes_to_an_untainted_pool_without_karpenter_annotation() -> None:
    facts = existing_cluster(
        [
            PoolFacts.model_validate(
                {
                    "name": "gpu",
                    "labels": {"pool": "gpu"},
                    "taints": ["nvidia.com/gpu:NoSchedule"],
                    "instance_types": ["g5.xlarge"],
                    "managed_by": "existing",
                }
            ),
            PoolFacts.model_validate(
                {
                    "name": "cpu",
                    "labels": {"pool": "cpu"},
                    "instance_types": ["m5.xlarge"],
                    "managed_by": "existing",
                }
            ),
        ]
    )
    bp = config_for("tiny-cpu").blueprint
    head = _head(build_manifests(WorkloadConfig(blueprint=bp, platform=facts), hf_token=None))
    assert head["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert "karpenter.sh/do-not-disrupt" not in (head["metadata"].get("annotations") or {})
