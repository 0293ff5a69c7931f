"""Shared helpers for the workload tests: catalog blueprints, their configs and manifests."""

from __future__ import annotations

import functools
from typing import Any

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.workload.config import Delivery, PlatformFacts, PoolFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests

TOKEN = "hf_TESTtokenValue0123456789"
CATALOG = catalog_names()


@functools.cache
def blueprint(name: str) -> Blueprint:
    return load_blueprint(name)


def config_for(name: str, **changes: Any) -> WorkloadConfig:
    bp = blueprint(name)
    return WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp), **changes)


def manifests_for(name: str, token: str | None = TOKEN) -> list[dict[str, Any]]:
    return build_manifests(config_for(name), hf_token=token)


def find(manifests: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    for obj in manifests:
        if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name):
            return obj
    raise AssertionError(
        f"no {kind} {name or ''} in {[(o['kind'], o['metadata']['name']) for o in manifests]}"
    )


def worker(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    return find(manifests, "RayService")["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]


def existing_cluster(pools: list[PoolFacts]) -> PlatformFacts:
    """An existing cluster (`--target kubeconfig`, on-prem k3s) with the node pools given."""
    return PlatformFacts(
        cluster_name="k3s", region="on-prem", kubernetes_version="1.35", target="kubeconfig", pools=pools
    )


def rendered(name: str, *, digest: str = "a" * 64, **changes: Any) -> list[dict[str, Any]]:
    """The workload's objects as `up` renders them with the wheel of code digest `digest`."""
    config = config_for(name, **changes)
    delivery = Delivery(
        mode="wheel",
        image=config.blueprint.image.base,
        wheel_uri=f"s3://llmctl-dev-us-west-2-cache/llmctl/wheels/{digest}/llmctl_eks-0.1.0-py3-none-any.whl",
        wheel_sha256="b" * 64,
        reason="test",
        decided=True,
    )
    return build_manifests(config.model_copy(update={"delivery": delivery}), hf_token=None)
