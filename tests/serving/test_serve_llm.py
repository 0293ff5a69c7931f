"""The shared Ray Serve LLM layer (serving/serve_llm): what every Ray Serve LLM runtime sets the same
way comes from it, and a runtime's own engine kwargs and environment pass through it untouched."""

from __future__ import annotations

import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.serving.ray_vllm.app import llm_config as ray_vllm_config
from llmctl.serving.serve_llm.config import ARGS, deployment_config, llm_config

# the LLMConfig fields the runtime sets itself (engine, environment, hooks, Neuron placement)
RUNTIME_FIELDS = {"engine_kwargs", "runtime_env", "callback_config", "placement_group_config"}


@pytest.mark.parametrize("name", ["llama2-70b-vllm-gpu", "llama3-vllm-inf2"])
@pytest.mark.parametrize("options", [{}, {"num_replicas": 2, "served_model_name": "served"}])
def test_ray_vllm_takes_the_engine_independent_fields_from_the_shared_layer(
    name: str, options: dict[str, object]
) -> None:
    blueprint = load_blueprint(name)
    runtime = ray_vllm_config(blueprint, dict(options), backpressure=True)
    shared = llm_config(blueprint, dict(options), engine_kwargs={}, env={}, backpressure=True)
    assert {k: v for k, v in runtime.items() if k not in RUNTIME_FIELDS} == {
        k: v for k, v in shared.items() if k not in RUNTIME_FIELDS
    }
    assert set(options) <= ARGS


def test_a_second_runtimes_engine_and_environment_pass_through() -> None:
    blueprint = load_blueprint("llama2-70b-vllm-gpu")
    engine = {"some_engine_flag": 3}
    config = llm_config(blueprint, {}, engine_kwargs=engine, env={"A": "1"})
    assert config["engine_kwargs"] is engine and config["runtime_env"] == {"env_vars": {"A": "1"}}
    assert "callback_config" not in config  # only a runtime that names a callback gets one
    assert config["model_loading_config"] == {
        "model_id": blueprint.model.id,
        "model_source": blueprint.model.id,
    }
    # no accelerator_type: its bundle resource is one the KubeRay autoscaler never sees on a worker
    # group (tests/workload/test_gpu_ray_autoscaling.py)
    assert "accelerator_type" not in config


def test_replicas_are_fixed_by_the_arg_else_autoscaled_within_the_blueprints_bounds() -> None:
    blueprint = load_blueprint("llama2-70b-vllm-gpu")
    fixed = deployment_config(blueprint, {"num_replicas": "3"}, backpressure=False)
    assert fixed["num_replicas"] == 3 and "autoscaling_config" not in fixed
    scaled = deployment_config(blueprint, {}, backpressure=False)["autoscaling_config"]
    assert (scaled["min_replicas"], scaled["max_replicas"]) == (
        blueprint.scaling.min_replicas,
        blueprint.scaling.max_replicas,
    )
    # Ray's queue bound: 429 + Retry-After only where the installed Ray takes backpressure_config
    assert "backpressure_config" not in deployment_config(blueprint, {}, backpressure=False)
    assert deployment_config(blueprint, {}, backpressure=True)["backpressure_config"]["status_code"] == 429
