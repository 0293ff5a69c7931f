"""The images of a workload's pods by digest: which ones are named by a tag, and the manifests with the
stack's recorded digests put in (pure; the record is `llmctl.state.StackPins`, made by `digests.py`).

A container image named `repo:tag` whose digest the stack recorded is rendered `repo:tag@sha256:...`:
the kubelet pulls by the digest (the tag is only informative), so a tag moved in its registry cannot
change what runs. Images already named by digest (an ECR image `up` found, a versions.yaml digest) are
left as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from llmctl.infra.workload.scheduling.pods import pod_templates

Obj = dict[str, Any]


def _containers(manifests: list[Obj]) -> Iterator[Obj]:
    for manifest in manifests:
        for template in pod_templates(manifest):
            yield from template.spec.get("initContainers", [])
            yield from template.spec.get("containers", [])


def tagged_images(manifests: list[Obj]) -> list[str]:
    """Every container image (init containers too) the manifests name by a tag, not by digest."""
    return sorted(
        {str(c["image"]) for c in _containers(manifests) if c.get("image") and "@" not in c["image"]}
    )


def pin_manifests(manifests: list[Obj], images: dict[str, str]) -> list[Obj]:
    """The manifests with every image the record holds named `image@digest` (changed in place)."""
    for container in _containers(manifests):
        digest = images.get(str(container.get("image")))
        if digest:
            container["image"] = f"{container['image']}@{digest}"
    return manifests
