"""Ray Serve entry point of the CPU runtime: ``llmctl.serving.ray_cpu.app:app_builder``.

Args (``applications[].args`` in a Serve config, or a dict from the local runner):

- ``blueprint``: ``Blueprint.model_dump(mode="json")`` (required)
- ``model_path``: a local model directory to load instead of downloading ``model.id``
- ``served_model_name``: the model name clients send (default: ``model.id``)
- ``num_replicas``, ``num_cpus``, ``threads``, ``workers``: local-runner overrides
- ``api_key``: require ``Authorization: Bearer`` (default: ``$LLMCTL_API_KEY``)

Any other key is refused.
"""

from __future__ import annotations

from typing import Any

from llmctl.serving.common.ingress import SHARED_ARGS, build_application

ARGS = SHARED_ARGS | {"threads", "workers"}


def app_builder(args: dict[str, Any]) -> Any:
    """The bound Serve application for a ray-cpu blueprint."""
    from llmctl.serving.ray_cpu.engine import engine_from_blueprint

    return build_application(args, engine_from_blueprint, allowed=ARGS)
