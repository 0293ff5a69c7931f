"""ray-vllm: the OpenAI API through vLLM under Ray Serve, on Neuron (vllm-neuron) or NVIDIA GPUs.

Seeds "Llama-3-8B with vLLM on Inferentia2" and "Llama 2 70B on GPUs". Engine settings (tp, max
model length = `model.max_context`, max sequences = `model.batch_size`) and Serve autoscaling come
from the blueprint the app receives; the worker group's bounds follow `scaling`.
"""

from __future__ import annotations

from llmctl.infra.workload.builders import placement
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.ray import rayservice
from llmctl.infra.workload.config import WorkloadConfig

IMPORT_PATH = "llmctl.serving.ray_vllm.app:app_builder"


def build(config: WorkloadConfig) -> list[Obj]:
    """The RayService of a ray-vllm blueprint."""
    bp = config.blueprint
    env: list[Obj] = [*placement.neuron_env(config)]
    custom: dict[str, int] = {}
    if bp.is_neuron:
        custom["neuron_cores"] = bp.compute.tensor_parallel
    return [
        rayservice(
            config,
            import_path=IMPORT_PATH,
            group=bp.compute.instance_type.split(".")[0],
            worker_env=env,
            ray_resources=custom,
        )
    ]
