"""Render the Triton model repository (vLLM backend) for a blueprint."""

from __future__ import annotations

import json
import re

from llmctl.blueprints.schema import Blueprint

# vLLM's dtype names for the blueprint's precision.
# vLLM has no plain "int8" dtype: int8 weights come pre-quantised and "auto" reads their config.
_VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "int8": "auto"}


def model_name(blueprint: Blueprint) -> str:
    """The Triton model name of a blueprint: its name with characters Triton dislikes replaced."""
    return re.sub(r"[^A-Za-z0-9_]", "_", blueprint.name)


def engine_args(blueprint: Blueprint, model: str | None = None) -> dict[str, object]:
    """vLLM engine arguments (``model.json``) derived from the blueprint.

    ``model`` is a local copy of the weights (the synced S3 mirror); without it vLLM downloads
    ``model.id`` at ``model.revision`` from the hub.
    """
    args: dict[str, object] = {
        "model": model or blueprint.model.id,
        "tensor_parallel_size": blueprint.compute.tensor_parallel,
        "max_model_len": blueprint.model.max_context,
        "gpu_memory_utilization": blueprint.serving.gpu_memory_utilization,
        "dtype": _VLLM_DTYPE[blueprint.model.dtype],
        "max_num_seqs": blueprint.serving.max_concurrent_requests,
        # the engine's stat loggers set vllm:num_requests_waiting, the autoscaler's signal
        # (serving/triton_vllm/queue_metrics.py); vLLM logs stats unless this is true
        "disable_log_stats": False,
        # no "disable_log_requests": vLLM >= 0.11 removed it (AsyncEngineArgs raises TypeError) and
        # logs no requests by default
    }
    if not model:
        args["revision"] = blueprint.model.revision
    return args


def _config_pbtxt(name: str) -> str:
    # Inputs/outputs are not listed: the vLLM backend's auto_complete_config adds them (so Triton
    # must run without --disable-auto-complete-config).
    return (
        f'name: "{name}"\n'
        'backend: "vllm"\n'
        "\n"
        "# vLLM batches continuously by itself; Triton hands every request straight to it.\n"
        "instance_group [\n"
        "  {\n"
        "    count: 1\n"
        "    kind: KIND_MODEL\n"
        "  }\n"
        "]\n"
        "\n"
        "# Decoupled: one request may produce many responses (token streaming).\n"
        "model_transaction_policy {\n"
        "  decoupled: true\n"
        "}\n"
    )


def render_model_repository(blueprint: Blueprint, model: str | None = None) -> dict[str, str]:
    """The model repository as {relative path: file content} (``model``: see :func:`engine_args`).

    ``<model_name>/config.pbtxt`` selects the vLLM backend; ``<model_name>/1/model.json`` holds the
    engine arguments.
    """
    name = model_name(blueprint)
    return {
        f"{name}/config.pbtxt": _config_pbtxt(name),
        f"{name}/1/model.json": json.dumps(engine_args(blueprint, model), indent=2, sort_keys=True) + "\n",
    }
