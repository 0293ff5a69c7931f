"""A new GPU replica must fit a new worker as the KubeRay autoscaler sees the worker group, or the
autoscaler never adds one: Ray Serve LLM places each replica with placement bundles
(`ray.llm._internal.serve.core.configs.accelerators.GPUAccelerator.default_bundles`, called from
`engines/vllm/vllm_models.py` `placement_bundles`; `{"GPU": 1, "accelerator_type:<GPU>": 0.001}`
per device when the LLMConfig names an accelerator_type), and the autoscaler knows a group's
resources only from its `resources`, `rayStartParams` and the container's limits
(`autoscaler/_private/kuberay/autoscaling_config.py` `_get_ray_resources_from_group_spec`), never
the `accelerator_type:*` a running Ray node detects for itself.

Ray's own functions decide here, from the ray installed for the tests (2.60); the pinned image runs
Ray 2.58.0 (blueprints/data/versions.yaml), whose `accelerators.py` is the same file and whose
`autoscaling_config.py` differs only by the group `priority` key (compared against the 2.58.0 wheel).
"""

from __future__ import annotations

import pytest
from workload_helpers import manifests_for, worker

from llmctl.blueprints.catalog import catalog_names, load_blueprint

GPU_RAY = [
    name
    for name in catalog_names()
    if (bp := load_blueprint(name)).compute.accelerator == "nvidia" and bp.runtime.startswith("ray-")
]


@pytest.mark.parametrize("name", GPU_RAY)
def test_a_new_gpu_replica_fits_a_new_worker_as_the_autoscaler_sees_the_group(name: str) -> None:
    from ray.autoscaler._private.kuberay.autoscaling_config import _get_ray_resources_from_group_spec
    from ray.llm._internal.common.placement import PlacementGroupConfig
    from ray.llm._internal.serve.core.configs.accelerators import GPUAccelerator

    from llmctl.serving.ray_vllm.app import llm_config

    bp = load_blueprint(name)
    config = llm_config(bp)
    devices = int(config["engine_kwargs"].get("tensor_parallel_size", 1)) * int(
        config["engine_kwargs"].get("pipeline_parallel_size", 1)
    )
    placement = PlacementGroupConfig(**config["placement_group_config"])  # Ray's own validation
    assert placement.bundle_per_worker is not None
    # as vllm_models.py placement_bundles expands bundle_per_worker: one per device
    bundles = [placement.bundle_per_worker.model_dump(exclude_unset=True) for _ in range(devices)]
    assert bundles == GPUAccelerator().default_bundles(
        num_devices=devices, accelerator_type_str=config.get("accelerator_type")
    ), "the bundles are Ray Serve LLM's own; only the strategy is ours"
    # STRICT_PACK: every bundle of the replica on one node, so the sum must fit one new worker. Over
    # several nodes (pipeline_parallel > 1) PACK: one stage's tp bundles on each of pp new workers
    stages = bp.nodes_per_replica
    assert placement.strategy == ("PACK" if stages > 1 else "STRICT_PACK")
    bundles = bundles[: devices // stages]
    offered = _get_ray_resources_from_group_spec(worker(manifests_for(name)), is_head=False)
    for key in sorted({key for bundle in bundles for key in bundle}):
        asked = sum(bundle.get(key, 0) for bundle in bundles)
        assert asked <= offered.get(key, 0), (
            f"{name}: a replica asks {asked} {key}; a new worker offers the autoscaler {offered.get(key, 0)} "
            f"(group resources {offered})"
        )


def test_there_is_a_gpu_ray_blueprint_to_check() -> None:
    assert "llama2-70b-vllm-gpu" in GPU_RAY
