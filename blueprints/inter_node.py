"""Which network NCCL is expected to use between the nodes of a replica: EFA or TCP, by the serving image.

NCCL reaches EFA only through the aws-ofi-nccl plugin over libfabric; an image without them makes NCCL
fall back to its own Socket network (TCP over the pod network). Whether an image carries them is a fact
about the image: versions.yaml records it for the pinned ones (`images.<key>.efa`; the pinned
`rayproject/ray-llm` carries neither, ray-project/ray docker/ray-llm/Dockerfile at 0168a92e), and a
blueprint may state it for its own (`image.efa`). The image that decides is `image.base`, which a built
serving image (`image.serving_image`, `llmctl images build`) starts from, or a `--image` override. One
llmctl does not know is taken to carry them: the fabric preflight then expects EFA and stops `up` on
TCP (the strict path), and the blueprint says `image.efa: false` where TCP is what it wants.

Pure: the blueprint and the packaged pins only. The preflight (infra/workload/builders/preflight.py)
gives the probe the expectation; `plan` and `blueprints show` print :meth:`InterNode.line`.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.versions import image_efa

#: how to get EFA with an image that lacks it (the line `up` prints and `plan` shows)
EFA_FIX = "for EFA, name an image with libfabric and aws-ofi-nccl in image.base"


@dataclass(frozen=True)
class InterNode:
    """The network expected between a replica's nodes: `efa` true or false, for `image`, known from
    `source` (versions.yaml, the blueprint's image.efa, or nowhere: EFA assumed)."""

    image: str
    efa: bool
    source: str  # "as versions.yaml records", "as its image.efa says" or "assumed"
    nodes: int

    def line(self) -> str:
        """One line: the transport between the nodes, why, and what the fabric preflight does with it."""
        between = f"between its {self.nodes} nodes NCCL runs over"
        if not self.efa:
            return (
                f"{between} TCP (NET/Socket): {self.image} carries no aws-ofi-nccl ({self.source}); the "
                f"fabric preflight measures it and goes on; {EFA_FIX}"
            )
        known = (
            f"{self.image} carries aws-ofi-nccl ({self.source})"
            if self.source != "assumed"
            else f"{self.image} is not an image llmctl records, taken to carry aws-ofi-nccl (image.efa: "
            "false if it does not)"
        )
        return f"{between} EFA: {known}; the fabric preflight stops `up` on TCP"


def inter_node(blueprint: Blueprint, override: str | None = None) -> InterNode | None:
    """The expected network between the nodes of one of the blueprint's replicas (None for a replica of
    one node); `override` is a `--image` the pods run instead of the blueprint's image."""
    if blueprint.nodes_per_replica <= 1:
        return None
    image = override or blueprint.image.base
    stated = None if override else blueprint.image.efa
    recorded = image_efa(image)
    if stated is not None:
        efa, source = stated, "as its image.efa says"
    elif recorded is not None:
        efa, source = recorded, "as versions.yaml records"
    else:
        efa, source = True, "assumed"
    return InterNode(image=image, efa=efa, source=source, nodes=blueprint.nodes_per_replica)
