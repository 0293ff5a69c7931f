"""What `llmctl render` and `llmctl validate` call: load the blueprint, derive the platform facts
offline (or read them from a `--pools FILE` of an existing cluster), build the manifests, then render or check them. Results are plain dicts with stable keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import LlmctlError
from llmctl.infra.workload.builders.placement import replica_sizing
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests, endpoint_info
from llmctl.infra.workload.pods import pod_templates
from llmctl.infra.workload.render import render_yaml
from llmctl.infra.workload.schedulability import validate_workload


def platform_facts(blueprint: Any, *, stack: str, region: str, pools: Path | None = None) -> PlatformFacts:
    """The platform the blueprint builds (offline), or the existing cluster of a `--pools FILE`."""
    if pools is not None:
        return PlatformFacts.for_existing_cluster(pools, stack=stack, region=region)
    return PlatformFacts.for_blueprint(blueprint, stack=stack, region=region)


def render_blueprint(
    ref: str,
    *,
    stack: str = "dev",
    region: str = "us-west-2",
    out_dir: Path | None = None,
    pools: Path | None = None,
) -> dict[str, Any]:
    """The workload's manifests as YAML (secrets redacted), written to `out_dir` when given."""

    blueprint = load_blueprint(ref)
    config = WorkloadConfig(
        blueprint=blueprint,
        stack=stack,
        platform=platform_facts(blueprint, stack=stack, region=region, pools=pools),
    )
    manifests = build_manifests(config, hf_token=None)
    rendered = render_yaml(manifests, out_dir)
    return {
        "blueprint": blueprint.name,
        "namespace": config.ns,
        "endpoint": endpoint_info(config).as_dict(),
        "objects": [{"kind": m["kind"], "name": m["metadata"]["name"]} for m in manifests],
        "files": [str(path) for path in rendered.files],
        "yaml": rendered.text,
    }


def validate_blueprint(
    ref: str, *, stack: str = "dev", region: str = "us-west-2", pools: Path | None = None
) -> dict[str, Any]:
    """Blueprint rules (raising on failure), then the schedulability check on the platform it builds
    (or on the named pools of an existing cluster)."""

    blueprint = load_blueprint(ref)
    facts = platform_facts(blueprint, stack=stack, region=region, pools=pools)
    problems = validate_workload(blueprint, facts)
    config = WorkloadConfig(blueprint=blueprint, platform=facts)
    try:
        manifests = build_manifests(config, hf_token=None)
        replica = replica_sizing(config)
        sizing: dict[str, Any] | None = replica.as_dict()
        sizing_line: str | None = replica.line()
    except LlmctlError:
        manifests, sizing, sizing_line = [], None, None  # already reported as a problem by validate_workload
    pods = [f"{t.kind}/{t.name} ({t.where})" for m in manifests for t in pod_templates(m)]
    return {
        "blueprint": blueprint.name,
        "ok": not problems,
        "pods": pods,
        "pools": [
            {"name": p.name, "labels": p.node_labels(), "taints": [t.model_dump() for t in p.taints]}
            for p in facts.pools
        ],
        "problems": [p.as_dict() for p in problems],
        # one serving replica: what it requests, its need and margin, what one node offers a pod
        "serving": sizing,
        "serving_line": sizing_line,
    }
