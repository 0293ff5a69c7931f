"""What the ray-vllm image adds to its base: the GPU image's Ray is the base's own; on Neuron it is
the Ray pinned as ``python.ray_neuron_vllm`` (the newest whose Serve LLM supports the Neuron
container's vLLM 0.13), from ``requirements-neuron.txt``.

`make locks` resolves that file into the ``ray-vllm-neuron`` lock (serving/locks/), which the
Dockerfile installs when its base is a Neuron container and the workload's base-image mode (no
built image) installs at pod start; the RayCluster's ``rayVersion`` comes from :func:`neuron_ray_version`. Nothing here imports Ray.
"""

from __future__ import annotations

from pathlib import Path

NEURON_REQUIREMENTS = Path(__file__).with_name("requirements-neuron.txt")


def neuron_requirements() -> list[str]:
    """The requirement lines of ``requirements-neuron.txt`` (no comments, no pip options)."""
    lines = (line.split("#", 1)[0].strip() for line in NEURON_REQUIREMENTS.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def neuron_ray_version() -> str:
    """The Ray version pinned for the Neuron vLLM image (``python.ray_neuron_vllm`` in versions.yaml)."""
    from llmctl.blueprints.versions import versions

    return versions().python["ray_neuron_vllm"].value
