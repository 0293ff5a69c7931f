"""Typed model of the Ray Serve config (`serveConfigV2`) llmctl writes into a RayService.

The RayService object itself is checked against KubeRay's own CRD (tests/conformance/). That CRD
only knows `serveConfigV2` as a string, and Ray's `ServeDeploySchema` accepts unknown keys, so the
fields llmctl writes there are modelled here with unknown keys rejected.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field


class _Crd(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ServeApplication(_Crd):
    """One application of serveConfigV2."""

    name: str = Field(description="Application name.")
    route_prefix: str = Field(description="HTTP route prefix.")
    import_path: str = Field(pattern=r"^[\w.]+:\w+$", description="module:attribute of the app builder.")
    args: dict[str, Any] = Field(description="Arguments to the app builder.")
    runtime_env: dict[str, Any] | None = Field(None, description="Ray runtime environment.")


class ServeConfigV2(_Crd):
    """The parsed serveConfigV2 document."""

    applications: list[ServeApplication] = Field(min_length=1, description="Serve applications.")


def serve_config(serve_config_v2: str) -> ServeConfigV2:
    """Parse and check a RayService's `serveConfigV2` string."""
    return ServeConfigV2.model_validate(yaml.safe_load(serve_config_v2))
