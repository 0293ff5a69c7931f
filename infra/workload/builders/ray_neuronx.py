"""ray-neuronx: Llama-2 on Inferentia2 with Ray Serve + transformers-neuronx (seed "Llama-2 on Inferentia").

The app serves the seed's `/infer?sentence=` route and the OpenAI routes on Serve port 8000. The
worker takes whole Neuron devices for the tp degree (tp 24 on inf2.48xlarge: 12 devices, so
`schedulerName: my-scheduler`) and advertises its NeuronCores to Ray as `neuron_cores`.
"""

from __future__ import annotations

from llmctl.infra.workload.builders import placement
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.ray import rayservice
from llmctl.infra.workload.builders.registry import register
from llmctl.infra.workload.config import WorkloadConfig

IMPORT_PATH = "llmctl.serving.ray_neuronx.app:app_builder"


def build(config: WorkloadConfig) -> list[Obj]:
    """The RayService of a ray-neuronx blueprint."""
    tp = config.blueprint.compute.tensor_parallel
    env = [*placement.neuron_env(config), {"name": "NEURONX_CACHE", "value": "on"}]
    return [
        rayservice(
            config,
            import_path=IMPORT_PATH,
            group=config.blueprint.compute.instance_type.split(".")[0],
            worker_env=env,
            ray_resources={"neuron_cores": tp},
        )
    ]


register("ray-neuronx", build)
