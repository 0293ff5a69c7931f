"""Typed models of the RayService (KubeRay `ray.io/v1`) fields llmctl writes.

Only the fields the builders use are modelled, and unknown fields are rejected, so a typo in a
builder fails the tests instead of being silently dropped by the API server. Pod templates are
kept as mappings here; the tests validate them against the Kubernetes schema separately.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Crd(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PodTemplate(_Crd):
    """A pod template (metadata + spec, validated against the core schema elsewhere)."""

    metadata: dict[str, Any] = Field(default_factory=dict, description="Pod labels and annotations.")
    spec: dict[str, Any] = Field(description="Pod spec.")


class HeadGroupSpec(_Crd):
    """The Ray head."""

    serviceType: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP", description="Type of the head Service."
    )
    rayStartParams: dict[str, str] = Field(description="`ray start` flags (string values).")
    template: PodTemplate = Field(description="Head pod template.")


class WorkerGroupSpec(_Crd):
    """One Ray worker group."""

    groupName: str = Field(min_length=1, description="Group name.")
    replicas: int = Field(ge=0, description="Workers at start.")
    minReplicas: int = Field(ge=0, description="Autoscaler lower bound.")
    maxReplicas: int = Field(ge=1, description="Autoscaler upper bound.")
    rayStartParams: dict[str, str] = Field(description="`ray start` flags (string values).")
    template: PodTemplate = Field(description="Worker pod template.")


class AutoscalerOptions(_Crd):
    """Ray autoscaler sidecar settings."""

    idleTimeoutSeconds: int = Field(ge=0, description="Idle seconds before a worker is removed.")
    resources: dict[str, Any] = Field(description="Sidecar requests and limits.")


class RayClusterSpec(_Crd):
    """The Ray cluster a RayService runs."""

    rayVersion: str = Field(description="Ray version of the images.")
    enableInTreeAutoscaling: bool = Field(False, description="Run the Ray autoscaler.")
    autoscalerOptions: AutoscalerOptions | None = Field(None, description="Autoscaler settings.")
    headGroupSpec: HeadGroupSpec = Field(description="The head.")
    workerGroupSpecs: list[WorkerGroupSpec] = Field(min_length=1, description="Worker groups.")


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


class ServeServiceTemplate(_Crd):
    """The Service KubeRay puts in front of Serve."""

    metadata: dict[str, Any] = Field(description="Name, labels, annotations.")
    spec: dict[str, Any] = Field(description="Service spec without a selector.")


class RayServiceSpec(_Crd):
    """RayService spec."""

    serveConfigV2: str = Field(description="Serve config as a YAML string.")
    serveService: ServeServiceTemplate | None = Field(None, description="Serve Service template.")
    rayClusterDeletionDelaySeconds: int | None = Field(
        None,
        ge=0,
        description="How long a replaced RayCluster keeps running after traffic moved to the new one.",
    )
    rayClusterConfig: RayClusterSpec = Field(description="The Ray cluster.")

    @field_validator("serveConfigV2")
    @classmethod
    def _serve_config(cls, value: str) -> str:
        ServeConfigV2.model_validate(yaml.safe_load(value))
        return value

    def serve_config(self) -> ServeConfigV2:
        """The parsed serve config."""
        return ServeConfigV2.model_validate(yaml.safe_load(self.serveConfigV2))


class ObjectMeta(_Crd):
    """The metadata fields llmctl sets."""

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63, description="Object name.")
    namespace: str = Field(description="Namespace.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")


class RayService(_Crd):
    """A KubeRay RayService (ray.io/v1)."""

    apiVersion: Literal["ray.io/v1"] = Field(description="API version.")
    kind: Literal["RayService"] = Field(description="Kind.")
    metadata: ObjectMeta = Field(description="Metadata.")
    spec: RayServiceSpec = Field(description="Spec.")
