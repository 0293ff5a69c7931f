"""ray-cpu: Llama-2-7B (int8) on CPU nodes with Ray Serve (seed "Llama 2 7B on CPUs").

Workers run on the default (CPU) pool at the blueprint's instance type; the math libraries get one
thread per requested vCPU.
"""

from __future__ import annotations

import math

from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.placement import serving_resources
from llmctl.infra.workload.builders.ray import rayservice
from llmctl.infra.workload.builders.registry import register
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.scheduling.capacity import parse_quantity

IMPORT_PATH = "llmctl.serving.ray_cpu.app:app_builder"


def build(config: WorkloadConfig) -> list[Obj]:
    """The RayService of a ray-cpu blueprint."""
    threads = max(1, math.floor(parse_quantity(serving_resources(config)["requests"]["cpu"])))
    env = [
        {"name": "OMP_NUM_THREADS", "value": str(threads)},
        {"name": "MKL_NUM_THREADS", "value": str(threads)},
    ]
    return [rayservice(config, import_path=IMPORT_PATH, group="cpu", worker_env=env)]


register("ray-cpu", build)
