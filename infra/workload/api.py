"""What `llmctl render` and `llmctl validate` call: load the blueprint, derive the platform facts
offline (or read them from a `--pools FILE` of an existing cluster), build the manifests, then render or check them. Results are plain dicts with stable keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import LlmctlError, PrerequisiteError
from llmctl.infra.names import workload_stack
from llmctl.infra.workload.builders.placement import replica_sizing
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests, endpoint_info
from llmctl.infra.workload.pins.image_pins import tagged_images
from llmctl.infra.workload.pins.model_revision import recorded_model_pin
from llmctl.infra.workload.prepare.digests import pin_images, recorded_images
from llmctl.infra.workload.render import render_yaml
from llmctl.infra.workload.schedulability import validate_workload
from llmctl.infra.workload.scheduling.pods import pod_templates


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
    facts = platform_facts(blueprint, stack=stack, region=region, pools=pools)  # a bad stack fails here
    model_pin = recorded_model_pin(blueprint, stack)  # the commit the stack's first `up` pinned
    config = WorkloadConfig(
        blueprint=blueprint,  # the config derives the pinned revision
        stack=stack,
        platform=facts,
        image_pins=recorded_images(stack, blueprint.name),  # the digests the stack's first `up` pinned
        model_pin=model_pin,
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
        # images named by a tag because the stack recorded no digest for them (no `up` or `images pin`)
        "unpinned_images": tagged_images(manifests),
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
        # what that line describes: a replica, or each pod (pipeline stage, node) of a multi-node one
        "serving_what": "serving replica"
        if blueprint.nodes_per_replica == 1
        else f"each of a replica's {blueprint.nodes_per_replica} pods (one pipeline stage, one node)",
    }


def pin_blueprint(
    ref: str,
    *,
    stack: str = "dev",
    workload: str | None = None,
    region: str = "us-west-2",
    pools: Path | None = None,
    accept_moved: bool = False,
) -> dict[str, Any]:
    """`llmctl images pin`: the digest of each image tag the workload's pods run, recorded for its stack
    (as its first `up` does); a moved tag is refused unless `accept_moved`."""

    blueprint = load_blueprint(ref)
    config = WorkloadConfig(
        blueprint=blueprint,
        stack=workload_stack(stack, workload),
        platform=platform_facts(blueprint, stack=stack, region=region, pools=pools),
    )
    report = pin_images(config, accept_moved=accept_moved)
    if report.unpinned:  # asked for pins: an image left a tag is a failure (the others are recorded)
        raise PrerequisiteError(
            f"could not pin {len(report.unpinned)} image(s): "
            + "; ".join(f"{image}: {why}" for image, why in report.unpinned),
            "run it where the registries answer (network, proxy); the images pinned are recorded",
        )
    return {**report.to_dict(), "notes": report.notes()}
