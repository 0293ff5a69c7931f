"""Ray Serve entry point of the Neuron runtime: ``llmctl.serving.ray_neuronx.app:app_builder``.

Args: ``blueprint`` (required), and optionally ``model_path``, ``served_model_name``,
``cache_dir`` (local cache root, default /tmp/llmctl-neuron), ``compile_cache_url``
(``s3://bucket/prefix`` the compiled artifacts are shared through; default
``$LLMCTL_COMPILE_CACHE_URL``, see ``llmctl.serving.compile_cache``), ``num_replicas``, ``api_key``.
Any other key is refused.
"""

from __future__ import annotations

from typing import Any

from llmctl.serving.common.ingress import SHARED_ARGS, build_application, parse_args

ARGS = SHARED_ARGS | {"cache_dir", "compile_cache_url"}


def app_builder(args: dict[str, Any]) -> Any:
    """The bound Serve application for a ray-neuronx blueprint (one replica owns tp NeuronCores)."""
    from llmctl.serving.neuronx.engine import engine_from_blueprint, load_neuronx

    blueprint, _ = parse_args(args, ARGS)
    load_neuronx()  # fail here, with the install hint, rather than in every replica
    return build_application(
        args,
        engine_from_blueprint,
        allowed=ARGS,
        resources={"neuron_cores": blueprint.compute.tensor_parallel},
    )
