"""What llmctl creates, collected from the real builders: the platform program's resources under
Pulumi mocks (for every catalog blueprint and for all pools at once) and the workload manifests of
every catalog blueprint."""

from __future__ import annotations

import functools
from typing import Any

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.infra.plan.offline import Registered, run_offline
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests

CATALOG = catalog_names()
ALL_POOLS = "<all pools>"
PLATFORMS = [*CATALOG, ALL_POOLS]
# Kubernetes API groups the built-in schema (kubernetes-validate) covers; anything else is a CRD.
BUILT_IN_GROUPS = {
    "",
    "apps",
    "batch",
    "autoscaling",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",  # the workloads' ValidatingAdmissionPolicy: built in since 1.30
}


def platform_config(name: str) -> PlatformConfig:
    if name == ALL_POOLS:
        return PlatformConfig.for_blueprints([], all_pools=True)
    return PlatformConfig.for_blueprints([load_blueprint(name)], stack="ci")


@functools.cache
def platform_resources(name: str) -> tuple[Registered, ...]:
    from llmctl.infra.platform.program import build_platform

    config = platform_config(name)
    return tuple(run_offline(lambda: build_platform(config)))


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def platform_custom_objects(name: str) -> list[dict[str, Any]]:
    """Every custom object (not a Helm release, not a built-in kind) the platform program creates."""
    found = []
    for res in platform_resources(name):
        if not res.type.startswith("kubernetes:") or res.type.startswith("kubernetes:helm.sh/"):
            continue
        api_version = res.inputs["apiVersion"]
        if group_of(api_version) in BUILT_IN_GROUPS:
            continue
        found.append(
            {key: res.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec") if key in res.inputs}
        )
    return found


def helm_values(name: str) -> dict[str, dict[str, Any]]:
    """The values of every Helm release of the platform, by chart name."""
    return {
        res.inputs["chart"].rsplit("/", 1)[-1]: res.inputs.get("values", {})
        for res in platform_resources(name)
        if res.type == "kubernetes:helm.sh/v3:Release"
    }


@functools.cache
def workload_manifests(name: str) -> tuple[dict[str, Any], ...]:
    bp = load_blueprint(name)
    config = WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))
    return tuple(build_manifests(config, hf_token="hf_TESTtokenValue0123456789"))


def workload_custom_objects(name: str) -> list[dict[str, Any]]:
    return [obj for obj in workload_manifests(name) if group_of(obj["apiVersion"]) not in BUILT_IN_GROUPS]
