"""``llmctl.serving.ray_vllm.app:app_builder``: Ray Serve LLM's OpenAI app from a blueprint.

Args: ``blueprint`` (required), optionally ``model_source`` (a local path or s3:// mirror of the
weights; default ``$LLMCTL_MODEL_URI``, then ``model.id``), ``served_model_name``, ``num_replicas``.
The app does not check an API key (Ray Serve LLM's ingress has no hook for it); the blueprint
rules refuse ``exposure.api_key`` for this runtime.
"""

from __future__ import annotations

from typing import Any

from llmctl.blueprints.schema import Blueprint
from llmctl.errors import ServingError
from llmctl.serving.common.ingress import parse_args
from llmctl.serving.serve_llm import config as serve_llm
from llmctl.serving.serve_llm.app import openai_app

ARGS = serve_llm.ARGS
# the replica hooks (serving/ray_vllm/hooks.py): phase lines, and the Neuron compile cache
ENGINE_CLS_ENV = "RAYLLM_VLLM_ENGINE_CLS"
ENGINE_CLS = "llmctl.serving.ray_vllm.hooks:LlmctlVLLMEngine"
CALLBACK_CLS = "llmctl.serving.ray_vllm.hooks:PhaseCallback"
_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int8": "auto"}


def compile_key_name(blueprint: Blueprint) -> str | None:
    """The compile-cache key this blueprint's replicas keep their engine caches under (the folder and
    S3 prefix of :mod:`llmctl.serving.ray_vllm.neuron_cache`), as the replicas compute it."""
    from llmctl.serving.ray_vllm.neuron_cache import KEY_ENV

    key = llm_config(blueprint)["runtime_env"]["env_vars"].get(KEY_ENV)
    return str(key) if key is not None else None


def llm_config(
    blueprint: Blueprint, options: dict[str, Any] | None = None, *, backpressure: bool = False
) -> dict[str, Any]:
    """The ``LLMConfig`` (as a dict) of a ray-vllm blueprint: vLLM's engine kwargs and environment
    inside the config every Ray Serve LLM runtime shares (:mod:`llmctl.serving.serve_llm.config`)."""
    engine: dict[str, Any] = {
        "tensor_parallel_size": blueprint.compute.tensor_parallel,
        "max_model_len": blueprint.model.max_context,
        "dtype": _DTYPE[blueprint.model.dtype],
        "max_num_seqs": blueprint.serving.max_concurrent_requests,
        "revision": blueprint.model.revision,
    }
    env = {"HF_HUB_DISABLE_TELEMETRY": "1", ENGINE_CLS_ENV: ENGINE_CLS}
    if blueprint.compute.accelerator == "nvidia":
        engine["gpu_memory_utilization"] = blueprint.serving.gpu_memory_utilization
        if blueprint.nodes_per_replica > 1:
            # one stage per node; the worker pods carry the NCCL/EFA environment, which the engine's Ray
            # workers inherit from their raylet (infra/workload/builders/efa.py)
            engine["pipeline_parallel_size"] = blueprint.nodes_per_replica
        # vLLM's compile caches in one folder per key, restored from and published to the S3 compile
        # cache by the replica hooks (neuron_cache.py; the folder stays local without a bucket)
        from llmctl.serving.ray_vllm.neuron_cache import gpu_cache_env, gpu_model, vllm_compile_key

        env.update(gpu_cache_env(vllm_compile_key(blueprint, engine, gpu=gpu_model(blueprint))))
    elif blueprint.is_neuron:
        # vllm-neuron: the platform plugin picks the Neuron device; each replica owns tp NeuronCores.
        # Contiguous KV cache (one block per sequence): the plugin sets block_size = max_model_len
        # only when prefix caching is off, and vLLM V1 turns prefix caching on by default.
        engine["enable_prefix_caching"] = False
        engine["block_size"] = blueprint.model.max_context
        engine["max_num_seqs"] = blueprint.model.batch_size
        env["NEURON_RT_NUM_CORES"] = str(blueprint.compute.tensor_parallel)
        env["VLLM_NEURON_FRAMEWORK"] = "neuronx-distributed-inference"
        # NxD Inference loads compiled artifacts from NEURON_COMPILED_ARTIFACTS, or compiles into it;
        # one directory per compile key, synced with the S3 compile cache (neuron_cache.py)
        from llmctl.serving.ray_vllm.neuron_cache import (
            ARTIFACTS_ENV,
            KEY_ENV,
            artifacts_dir,
            vllm_compile_key,
        )

        key = vllm_compile_key(blueprint, engine)
        env[ARTIFACTS_ENV] = str(artifacts_dir(key))
        env[KEY_ENV] = key.name
    config = serve_llm.llm_config(
        blueprint,
        options or {},
        engine_kwargs=engine,
        env=env,
        callback_class=CALLBACK_CLS,
        backpressure=backpressure,
    )
    if blueprint.is_neuron:
        config["placement_group_config"] = {
            "bundles": [{"CPU": 1, "neuron_cores": blueprint.compute.tensor_parallel}],
        }
    elif blueprint.compute.accelerator == "nvidia":
        # Ray Serve LLM's own bundles (one GPU per tensor-parallel rank, vllm_models.py
        # placement_bundles) on one node: its default strategy, PACK, is best effort and splits a
        # replica over nodes whose free GPUs add up, which runs vLLM's all-reduce between pods over
        # the pod network. STRICT_PACK waits for (and makes the autoscaler add) one node that holds
        # the whole replica; at tensor_parallel 1 the two are the same.
        #
        # Over several nodes (pipeline_parallel > 1) STRICT_PACK could never be placed (tp x pp GPUs on one
        # node); PACK places the tp x pp one-GPU bundles on as few nodes as possible, so with worker pods of
        # exactly tensor_parallel GPUs each, every node holds tp bundles, and vLLM's Ray executor, which
        # orders its workers by node, makes each node one pipeline stage of tp ranks (docs/multi-node.md).
        # SPREAD would scatter one stage's ranks over the nodes and run tensor parallelism over EFA.
        strategy = "PACK" if blueprint.nodes_per_replica > 1 else "STRICT_PACK"
        config["placement_group_config"] = {"bundle_per_worker": {"GPU": 1}, "strategy": strategy}
    return config


def check_neuron_ray(blueprint: Blueprint) -> None:
    """On the Neuron vLLM container, refuse a Ray whose Serve LLM cannot import its vLLM.

    Ray Serve LLM imports vLLM's OpenAI-server modules, which moved in vLLM 0.14+; Ray 2.54 and later
    need them there, so on the pinned Neuron container (vLLM 0.13) only ``python.ray_neuron_vllm``
    works. Without this check the replica would die on a ModuleNotFoundError deep inside Ray.
    """
    from importlib import metadata

    from llmctl.blueprints.versions import versions
    from llmctl.serving.ray_vllm.image import neuron_ray_version

    neuron_vllm = versions().images["neuron_vllm_inf2"].vllm
    if not blueprint.is_neuron or blueprint.image.vllm != neuron_vllm:
        return
    try:
        installed = metadata.version("ray")
    except metadata.PackageNotFoundError:
        return  # require() names the missing package
    pinned = neuron_ray_version()
    if installed != pinned:
        raise ServingError(
            f"Ray {installed} cannot serve vLLM {neuron_vllm} on Neuron: its Serve LLM imports vLLM module "
            f"paths that vLLM {neuron_vllm} does not have; Ray {pinned} is the newest whose Serve LLM does",
            f"run the ray-vllm image built on the Neuron base (`llmctl images build --blueprint {blueprint.name}`), "
            f"which installs ray[serve]=={pinned} (serving/ray_vllm/requirements-neuron.txt)",
        )


def app_builder(args: dict[str, Any]) -> Any:
    """The bound Serve application (Ray Serve LLM's OpenAI ingress + one LLM deployment)."""
    blueprint, options = parse_args(args, ARGS)
    check_neuron_ray(blueprint)
    return openai_app(
        lambda backpressure: [llm_config(blueprint, options, backpressure=backpressure)],
        purpose="the ray-vllm app",
    )
