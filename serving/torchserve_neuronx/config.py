"""Render TorchServe's ``model-config.yaml`` and ``config.properties`` for a blueprint."""

from __future__ import annotations

import dataclasses
import re

import yaml

from llmctl.blueprints.schema import Blueprint
from llmctl.blueprints.serving_limits import queue_limit, request_bytes
from llmctl.serving.neuronx.settings import compile_key

# Where the start module archives the handler (the workload mounts an emptyDir here).
MODEL_STORE = "/home/model-server/model-store"
# The frontend's per-request timeout (seconds): the first request after a cold start may compile.
RESPONSE_TIMEOUT_S = 10800


def archive_name(blueprint: Blueprint) -> str:
    """The TorchServe model (archive) name of a blueprint."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", blueprint.name)


def checkpoint_dir(blueprint: Blueprint) -> str:
    """The folder (relative to the model dir) holding the split checkpoint."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", blueprint.model.id.rstrip("/").split("/")[-1]).lower() + "-split"


def model_config(blueprint: Blueprint) -> dict[str, object]:
    """The ``model-config.yaml`` content as data."""
    replicas = max(1, blueprint.scaling.replicas)
    key = compile_key(blueprint)  # the same graphs, and cache key, as the serving/ray_neuronx engine
    return {
        # TorchServe frontend: workers per model and request batching
        "minWorkers": 1,
        "maxWorkers": 1 if blueprint.is_neuron else replicas,
        "batchSize": blueprint.serving.micro_batch_size,
        "maxBatchDelay": blueprint.serving.micro_batch_delay_ms,
        "responseTimeout": RESPONSE_TIMEOUT_S,
        # custom handler parameters
        "handler": {
            "model_id": blueprint.model.id,
            "model_checkpoint_dir": checkpoint_dir(blueprint),
            "amp": key.amp,
            "tp_degree": key.tp_degree,
            "max_length": blueprint.serving.max_new_tokens,
            "n_positions": key.n_positions,
            "streaming": blueprint.serving.streaming,
            # what the compiled artifacts are saved and shared under (llmctl.serving.compile_cache)
            "compile_key": {
                **dataclasses.asdict(key),
                "context_length_estimate": list(key.context_length_estimate),
            },
        },
        "micro_batching": {
            # the batch size LlamaForSampling is compiled for
            "micro_batch_size": blueprint.model.batch_size,
            "parallelism": {"preprocess": 2, "inference": 1, "postprocess": 2},
        },
    }


def backend_port(blueprint: Blueprint) -> int:
    """TorchServe's inference port on the pod's loopback; the gateway (``gateway.py``) has the serving
    port and forwards to it."""
    return blueprint.serving.port + 3


def config_properties(blueprint: Blueprint) -> str:
    """TorchServe's ``config.properties``: listeners, metrics and the model to load at start."""
    port = blueprint.serving.port
    lines = [
        # inference behind llmctl's gateway, which checks the API key (gateway.py): loopback only
        f"inference_address=http://127.0.0.1:{backend_port(blueprint)}",
        # the management API registers and scales models (a model archive from a URL runs its code):
        # loopback only, never reachable from another pod or a load balancer
        f"management_address=http://127.0.0.1:{port + 1}",
        f"metrics_address=http://0.0.0.0:{port + 2}",
        "metrics_mode=prometheus",
        f"model_store={MODEL_STORE}",
        f"load_models={archive_name(blueprint)}",
        "install_py_dep_per_model=true",
        f"default_response_timeout={RESPONSE_TIMEOUT_S}",
        # requests beyond the in-flight ones and the blueprint's queue get TorchServe's 503
        f"job_queue_size={blueprint.serving.max_concurrent_requests + queue_limit(blueprint)}",
        # larger bodies get TorchServe's 413 before the handler sees them
        f"max_request_size={request_bytes(blueprint)}",
        # TorchServe's token authorization is not turned off: where the TorchServe in the image has it
        # (built in from 0.11.1; 0.11.0 only with its endpoint plugin), the gateway forwards with the
        # current inference key from key_file.json and renews it (gateway.py)
        "enable_envvars_config=true",
    ]
    return "\n".join(lines) + "\n"


def render_model_config(blueprint: Blueprint) -> dict[str, str]:
    """{file name: content} for ``model-config.yaml`` and ``config.properties``."""
    header = f"# TorchServe model config for blueprint {blueprint.name} (rendered by llmctl)\n"
    return {
        "model-config.yaml": header + yaml.safe_dump(model_config(blueprint), sort_keys=False),
        "config.properties": config_properties(blueprint),
    }
