"""The blueprint a container-started runtime (Triton, TorchServe) runs, passed in ``LLMCTL_BLUEPRINT``.

The Ray apps get ``Blueprint.pod_view()`` as their ``blueprint`` arg; these containers
get the same JSON in an env var (:func:`blueprint_env_value`, used by the workload builders) and
read it back with :func:`blueprint_from_env` in their ``start`` module.
"""

from __future__ import annotations

import json
import os

from llmctl.blueprints.schema import Blueprint
from llmctl.errors import ServingError

BLUEPRINT_ENV = "LLMCTL_BLUEPRINT"


def blueprint_env_value(blueprint: Blueprint) -> str:
    """The value of ``LLMCTL_BLUEPRINT`` for a blueprint: the same JSON the Ray apps receive."""
    return json.dumps(blueprint.pod_view(), sort_keys=True, separators=(",", ":"))


def blueprint_from_env(variable: str = BLUEPRINT_ENV) -> Blueprint:
    """The blueprint in ``$LLMCTL_BLUEPRINT``: inline JSON, or a catalog name or YAML path."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ServingError(f"{variable} is not set", "set it to the blueprint as JSON or to a catalog name")
    if value.startswith("{"):
        return Blueprint.model_validate(json.loads(value))
    from llmctl.blueprints.catalog import load_blueprint

    return load_blueprint(value)
