"""Typed access to ``data/versions.yaml``: every chart, image and AMI version llmctl pins."""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field, field_validator

from llmctl.blueprints._data import load_yaml
from llmctl.blueprints.image_refs import parse_reference


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pinned(_Entry):
    """A single pinned value."""

    value: str = Field(description="The pinned version or alias.")
    source: str = Field(description="Where the value was checked.")
    note: str | None = Field(None, description="Caveats, e.g. 're-check before release'.")


class Chart(_Entry):
    """A pinned Helm chart."""

    repository: str = Field(description="Chart repository URL or OCI registry.")
    chart: str = Field(description="Chart name.")
    version: str = Field(description="Pinned chart version.")
    source: str = Field(description="Where the version was checked.")
    note: str | None = Field(None, description="Caveats.")


class Image(_Entry):
    """A pinned container image and the versions it carries."""

    image: str = Field(description="Image reference with a pinned tag.")
    neuron_sdk: str | None = Field(None, description="Neuron SDK inside.")
    cuda: str | None = Field(None, description="CUDA inside.")
    vllm: str | None = Field(None, description="vLLM inside.")
    ray: str | None = Field(None, description="Ray inside.")
    efa: bool | None = Field(
        None,
        description="Whether the image carries the EFA userspace (libfabric) and NCCL's aws-ofi-nccl plugin, "
        "so NCCL can use EFA between the nodes of a replica (false: NCCL runs over TCP there, NET/Socket); "
        "unset: not recorded, for images that never serve across nodes. Its source goes in `source` or `note`.",
    )
    user: str | None = Field(
        None,
        pattern=r"^[1-9][0-9]*(:[0-9]+)?$",
        description="The non-root user as uid[:gid] that pods on this image run as: the image's own, or one "
        "whose pods need no user of the image (the model-mirror Job); unset: root or unknown.",
    )
    digest: str | None = Field(
        None,
        description="sha256 digest the tag named when it was checked in its registry (`llmctl doctor` "
        "prints it); None until recorded, which the registry check reports as not checked.",
    )
    source: str = Field(description="Where the tag was checked.")
    note: str | None = Field(None, description="Caveats.")

    @field_validator("image")
    @classmethod
    def _reference(cls, value: str) -> str:
        parse_reference(value)  # refused in one line unless it is an OCI image reference
        return value


class Addons(_Entry):
    """EKS managed add-ons (EKS picks their versions per Kubernetes version)."""

    names: list[str] = Field(description="Managed add-on names.")
    source: str | None = Field(None, description="Where the list was checked.")


class Eks(_Entry):
    """EKS settings."""

    kubernetes_version: Pinned = Field(description="Default EKS Kubernetes version.")
    addons: Addons = Field(description="Managed add-ons.")


class NewerFiles(_Entry):
    """A chart source newer than the reference files, read to compare its keys with llmctl's."""

    files_version: str = Field(description="Chart version of the newer source.")
    repository: str = Field(description="Repository, commits and paths read.")
    result: str = Field(description="What the comparison with the keys llmctl sets found.")
    unconfirmed_for_pin: str = Field(description="What is still unconfirmed for the pinned version.")


class UpstreamFiles(_Entry):
    """The upstream reference files a pinned chart is checked against, and how they differ."""

    chart: str = Field(description="Key of the pinned chart in `charts`.")
    files_version: str = Field(description="Chart version of the upstream files the checks read.")
    repository: str = Field(description="Upstream repository and commit or tag of the files.")
    difference: str = Field(description="What the version gap means for the checks.")
    keys_not_in_files: dict[str, str] = Field(
        default_factory=dict,
        description="Value key paths llmctl sets that the upstream files lack, with why they are set.",
    )
    newer_files: NewerFiles | None = Field(
        None, description="A newer chart source read since (closer to the pin), and what it confirmed."
    )


class Versions(_Entry):
    """Everything llmctl pins."""

    eks: Eks = Field(description="EKS version and add-ons.")
    charts: dict[str, Chart] = Field(description="Helm charts by key.")
    ami: dict[str, Pinned] = Field(description="AMI aliases by key.")
    images: dict[str, Image] = Field(description="Container images by key.")
    python: dict[str, Pinned] = Field(description="Python package versions inside the images.")
    kube_scheduler: dict[str, Pinned] = Field(
        description="Neuron custom scheduler image tag (EKS Distro kube-scheduler) per Kubernetes minor."
    )
    upstream_files: dict[str, UpstreamFiles] = Field(
        default_factory=dict,
        description="Where the upstream files the conformance tests read differ from these pins.",
    )


@functools.lru_cache(maxsize=1)
def versions() -> Versions:
    """The pinned versions shipped with this llmctl."""
    return Versions.model_validate(load_yaml("data", "versions.yaml"))


def image_efa(image: str) -> bool | None:
    """Whether a pinned image (by tag, or by tag@digest) carries libfabric and aws-ofi-nccl, as
    versions.yaml records it; None for an image it does not record or records no answer for."""
    name = image.split("@", 1)[0]
    found = (
        entry.efa for entry in versions().images.values() if entry.image == name and entry.efa is not None
    )
    return next(found, None)


def by_digest(image: str) -> str:
    """`image@sha256:...` when versions.yaml records the digest of this pinned image (a moved tag then
    cannot change what runs), else `image` as is (`llmctl doctor` reports that digest unchecked)."""
    for entry in versions().images.values():
        if entry.image == image and entry.digest:
            return f"{image}@{entry.digest}"
    return image
