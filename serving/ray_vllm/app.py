"""``llmctl.serving.ray_vllm.app:app_builder``: Ray Serve LLM's OpenAI app from a blueprint.

Args: ``blueprint`` (required), optionally ``model_source`` (a local path or s3:// mirror of the
weights; default ``$LLMCTL_MODEL_URI``, then ``model.id``), ``served_model_name``, ``num_replicas``.
The app does not check an API key (Ray Serve LLM's ingress has no hook for it); the blueprint
rules refuse ``exposure.api_key`` for this runtime.
"""

from __future__ import annotations

import re
from typing import Any

from llmctl.blueprints import serving_limits
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import ServingError
from llmctl.serving.common.deps import require
from llmctl.serving.common.ingress import (
    autoscaling_config,
    parse_args,
    ray_supports_backpressure_config,
    shedding_options,
)

ARGS = frozenset({"model_source", "served_model_name", "num_replicas"})
# the replica hooks (serving/ray_vllm/hooks.py): phase lines, and the Neuron compile cache
ENGINE_CLS_ENV = "RAYLLM_VLLM_ENGINE_CLS"
ENGINE_CLS = "llmctl.serving.ray_vllm.hooks:LlmctlVLLMEngine"
CALLBACK_CLS = "llmctl.serving.ray_vllm.hooks:PhaseCallback"
_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int8": "auto"}
# Ray names a GPU by the first word of its model name after the vendor ("NVIDIA A100-SXM4-80GB" -> "A100")
_RAY_GPU_TYPE = re.compile(r"[A-Z0-9]+")


def gpu_type(blueprint: Blueprint) -> str | None:
    """Ray's ``accelerator_type`` for the blueprint's GPU, from the hardware catalog's GPU name."""
    from llmctl.blueprints.hardware import hardware
    from llmctl.errors import CatalogError

    try:
        name = hardware().instance(blueprint.compute.instance_type).accelerator_name
    except CatalogError:
        return None
    found = _RAY_GPU_TYPE.match(name or "")
    return found.group() if found else None


def _model_source(blueprint: Blueprint, explicit: str | None) -> str | dict[str, str]:
    """The ``model_source`` arg, else the S3 mirror (``LLMCTL_MODEL_URI``), else the hub id.

    An ``s3://`` source becomes Ray Serve LLM's cloud mirror config: each replica downloads it
    before vLLM loads, so the app builder (on the Ray head) never pulls weights itself.
    """
    from llmctl.serving.model_mirror import mirror_uri, split_s3_uri

    source = explicit or mirror_uri() or blueprint.model.id
    if source.startswith("s3://"):
        split_s3_uri(source)  # a malformed URI fails here with a clear message
        return {"bucket_uri": source}
    return source


def llm_config(
    blueprint: Blueprint, options: dict[str, Any] | None = None, *, backpressure: bool = False
) -> dict[str, Any]:
    """The ``LLMConfig`` (as a dict) of a ray-vllm blueprint.

    Shedding is Ray's: ``max_queued_requests`` bounds what waits for the LLM replicas (429 with
    ``Retry-After`` when the installed Ray takes ``backpressure_config``, else Ray's 503), and
    ``graceful_shutdown_timeout_s`` lets a stopping replica finish a generation.
    """
    opts = options or {}
    engine: dict[str, Any] = {
        "tensor_parallel_size": blueprint.compute.tensor_parallel,
        "max_model_len": blueprint.model.max_context,
        "dtype": _DTYPE[blueprint.model.dtype],
        "max_num_seqs": blueprint.serving.max_concurrent_requests,
        "revision": blueprint.model.revision,
    }
    env = {"HF_HUB_DISABLE_TELEMETRY": "1", ENGINE_CLS_ENV: ENGINE_CLS}
    config: dict[str, Any] = {
        "model_loading_config": {
            "model_id": opts.get("served_model_name") or blueprint.model.id,
            "model_source": _model_source(blueprint, opts.get("model_source")),
        },
        "engine_kwargs": engine,
        "deployment_config": {
            "max_ongoing_requests": blueprint.serving.max_concurrent_requests,
            **shedding_options(
                blueprint.serving.max_concurrent_requests + serving_limits.queue_limit(blueprint),
                backpressure=backpressure,
            ),
            "graceful_shutdown_timeout_s": serving_limits.drain_grace_s(blueprint)
            + serving_limits.STOP_MARGIN_S,
        },
        "runtime_env": {"env_vars": env},
        "callback_config": {"callback_class": CALLBACK_CLS},
    }
    if "num_replicas" in opts:
        config["deployment_config"]["num_replicas"] = int(opts["num_replicas"])
    else:
        config["deployment_config"]["autoscaling_config"] = autoscaling_config(blueprint)
    if blueprint.compute.accelerator == "nvidia":
        engine["gpu_memory_utilization"] = blueprint.serving.gpu_memory_utilization
        accelerator_type = gpu_type(blueprint)
        if accelerator_type:
            config["accelerator_type"] = accelerator_type
    elif blueprint.is_neuron:
        # vllm-neuron: the platform plugin picks the Neuron device; each replica owns tp NeuronCores.
        # Contiguous KV cache (one block per sequence): the plugin sets block_size = max_model_len
        # only when prefix caching is off, and vLLM V1 turns prefix caching on by default.
        engine["enable_prefix_caching"] = False
        engine["block_size"] = blueprint.model.max_context
        engine["max_num_seqs"] = blueprint.model.batch_size
        env["NEURON_RT_NUM_CORES"] = str(blueprint.compute.tensor_parallel)
        env["VLLM_NEURON_FRAMEWORK"] = "neuronx-distributed-inference"
        config["placement_group_config"] = {
            "bundles": [{"CPU": 1, "neuron_cores": blueprint.compute.tensor_parallel}],
        }
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
    llm = require("ray.serve.llm", install="pip install 'ray[serve,llm]'", purpose="the ray-vllm app")
    backpressure = ray_supports_backpressure_config(require("ray.serve"))
    return llm.build_openai_app({"llm_configs": [llm_config(blueprint, options, backpressure=backpressure)]})
