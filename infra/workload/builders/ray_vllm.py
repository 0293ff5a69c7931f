"""ray-vllm: the OpenAI API through vLLM under Ray Serve, on Neuron (vllm-neuron) or NVIDIA GPUs.

Seeds "Llama-3-8B with vLLM on Inferentia2" and "Llama 2 70B on GPUs". Engine settings (tp, max
model length = `model.max_context`, max sequences = `model.batch_size`) and Serve autoscaling come
from the blueprint the app receives; the worker group's bounds follow `scaling`.
"""

from __future__ import annotations

from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.builders import efa, placement, preflight, ray
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.ray import RayPins, rayservice
from llmctl.infra.workload.builders.registry import register
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.serving.ray_vllm.image import neuron_ray_version, neuron_requirements

IMPORT_PATH = "llmctl.serving.ray_vllm.app:app_builder"


def ray_pins(config: WorkloadConfig) -> RayPins:
    """(Ray version, what base-image mode installs when the base has no Ray) for the blueprint.

    ray-vllm on Neuron runs on the Neuron vLLM container (vLLM 0.13), whose vLLM only the older Ray
    pinned as `python.ray_neuron_vllm` supports (with pyarrow etc., `serving/ray_vllm/image.py`).
    """
    if config.blueprint.is_neuron:
        return neuron_ray_version(), neuron_requirements()
    return ray.ray_pins(config)


def build(config: WorkloadConfig) -> list[Obj]:
    """The RayService of a ray-vllm blueprint."""
    bp = config.blueprint
    env: list[Obj] = [
        *placement.neuron_env(config),
        *efa.nccl_env(config, hardware().instance(bp.compute.instance_type)),
    ]
    custom: dict[str, int] = {}
    if bp.is_neuron:
        custom["neuron_cores"] = bp.compute.tensor_parallel
    return [
        *preflight.preflight_hook(config),  # the fabric preflight of a replica over several nodes
        rayservice(
            config,
            import_path=IMPORT_PATH,
            group=bp.compute.instance_type.split(".")[0],
            worker_env=env,
            ray_resources=custom,
            pins=ray_pins(config),
        ),
    ]


register("ray-vllm", build)
