"""Helpers every runtime builder shares: metadata, namespace, service account, secrets, images,
probes, env, readiness and Deployments (placement and resources live in `placement.py`).

Everything here is pure: it returns plain dicts shaped like the Kubernetes API (camelCase keys).
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from llmctl.blueprints.models import lookup_model
from llmctl.blueprints.rules import is_gated
from llmctl.blueprints.versions import by_digest
from llmctl.errors import CatalogError
from llmctl.infra.workload.builders.autoscaling import autoscaler
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import delivery_of, install_script
from llmctl.infra.workload.meta import labels, metadata
from llmctl.serving.blueprint_env import BLUEPRINT_ENV, blueprint_env_value
from llmctl.serving.common.auth import API_KEY_ENV

Obj = dict[str, Any]

SERVICE_ACCOUNT = "llmctl-serving"
HF_SECRET = "hf-token"
HF_SECRET_KEY = "HF_TOKEN"
API_KEY_SECRET = "api-key"
API_KEY_KEY = API_KEY_ENV  # the Secret key and the env var the serving app reads
WAIT_FOR = "pulumi.com/waitFor"
TIMEOUT = "pulumi.com/timeoutSeconds"


def namespace(config: WorkloadConfig) -> Obj:
    """The workload's own namespace."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": config.ns, "labels": labels(config, "namespace")},
    }


def service_account(config: WorkloadConfig) -> Obj:
    """The serving pods' service account (the Pod Identity association targets it for S3)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(config, SERVICE_ACCOUNT, "serving"),
    }


def needs_hf_token(config: WorkloadConfig) -> bool:
    """Whether the model is gated, so the pods need the Hugging Face token."""
    return is_gated(config.blueprint)


def opaque_secret(config: WorkloadConfig, name: str, key: str, value: str | None) -> Obj:
    """An Opaque Secret holding one value (rendered as `<redacted>`, applied as a Pulumi secret)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(config, name, "secret"),
        "type": "Opaque",
        "stringData": {key: value if value is not None else ""},
    }


def secret_env(name: str, secret: str, key: str) -> Obj:
    """An env var read from a Secret key."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def token_env(config: WorkloadConfig) -> list[Obj]:
    """HF_TOKEN from the Secret, only for gated models."""
    return [secret_env("HF_TOKEN", HF_SECRET, HF_SECRET_KEY)] if needs_hf_token(config) else []


def api_key_env(config: WorkloadConfig) -> list[Obj]:
    """LLMCTL_API_KEY from its Secret when the exposure requires an API key."""
    if not config.blueprint.exposure.api_key:
        return []
    return [secret_env(API_KEY_KEY, API_KEY_SECRET, API_KEY_KEY)]


def config_map(
    config: WorkloadConfig, name: str, files: dict[str, str], component: str
) -> tuple[Obj, list[Obj]]:
    """A ConfigMap holding files, and the volume `items` that restore their relative paths.

    ConfigMap keys cannot hold '/', so nested paths are stored under an encoded key.
    """
    data: dict[str, str] = {}
    items: list[Obj] = []
    for path in sorted(files):
        key = path.replace("/", "__")
        data[key] = files[path]
        items.append({"key": key, "path": path})
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(config, name, component),
        "data": data,
    }
    return obj, items


# --- images -------------------------------------------------------------------------------------


def serving_image(config: WorkloadConfig) -> tuple[str, bool]:
    """(image, app_baked_in) for the serving containers, from the delivery in effect.

    `up` decides the delivery (`infra/workload/prepare/delivery.py`): the config override, the
    blueprint's built `image.serving_image`, the stack's ECR image only when `DescribeImages` found
    it, else the blueprint's pinned upstream `image.base` with the app delivered as a wheel (EKS) or
    a package (existing clusters). Offline, :func:`delivery.planned_delivery` gives the plan.
    """

    chosen = delivery_of(config)
    return by_digest(chosen.image), chosen.baked


def start_module_command(config: WorkloadConfig, module: str, *, python: str, baked: bool) -> list[str]:
    """Container command running a serving start module (`python -m <module>`).

    Without a built image the app is installed first (`delivery.install_script`), into the user site
    on a volume: the container's root filesystem is read-only (`writable.py`); the container's `args`
    still reach the module (bash passes them on as "$@").
    """

    run = [python, "-m", module]
    if baked:
        return run
    image, _ = serving_image(config)
    script = f'{install_script(config, image, user_site=True)} && exec {shlex.join(run)} "$@"'
    return ["/bin/bash", "-c", script, "--"]


def blueprint_env(config: WorkloadConfig) -> Obj:
    """`LLMCTL_BLUEPRINT` for container-started runtimes: the JSON the Ray apps get as their arg."""

    return {"name": BLUEPRINT_ENV, "value": blueprint_env_value(config.blueprint)}


# --- probes, readiness --------------------------------------------------------------------------


def http_probes(path: str, port: int | str, *, startup_seconds: int) -> Obj:
    """Startup, readiness and liveness probes on one HTTP path; startup allows for model load."""
    get = {"path": path, "port": port}
    return {
        "startupProbe": {
            "httpGet": get,
            "periodSeconds": 10,
            "failureThreshold": max(1, startup_seconds // 10),
        },
        "readinessProbe": {"httpGet": get, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {"httpGet": get, "periodSeconds": 20, "failureThreshold": 6},
    }


def readiness_timeout(config: WorkloadConfig) -> int:
    """Seconds to wait for the serving object: image pull, weight download and, on Neuron, compile.

    20 min base, plus 15 s per GB of weights (download/load), plus on Neuron 60 s per GB
    (compilation: about 15 min for a 15 GB model; the first start compiles even with a compile
    cache); capped at 3 hours.
    """

    bp = config.blueprint
    try:
        weights = lookup_model(bp.model.architecture or bp.model.id, allow_hub=False).weights_gb(
            bp.model.dtype
        )
    except CatalogError:
        weights = 30.0
    seconds = 1200 + 15 * weights
    if bp.is_neuron:
        seconds += 60 * weights
    return int(min(3 * 3600, math.ceil(seconds / 60) * 60))


def readiness(config: WorkloadConfig, wait_for: str | None = None) -> dict[str, str]:
    """Pulumi await annotations: how long to wait, and (for custom resources) for what."""
    annotations = {TIMEOUT: str(readiness_timeout(config))}
    if wait_for:
        annotations[WAIT_FOR] = wait_for
    return annotations


def deployment(
    config: WorkloadConfig,
    name: str,
    component: str,
    pod_spec: Obj,
    *,
    replicas: int | None,
    annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
) -> Obj:
    """A Deployment around a pod spec (replicas None when an HPA owns the count)."""
    selector = {"app.kubernetes.io/instance": config.blueprint.name, "app.kubernetes.io/component": component}
    template_meta: Obj = {"labels": labels(config, component)}
    if pod_annotations:
        template_meta["annotations"] = pod_annotations
    spec: Obj = {
        "selector": {"matchLabels": selector},
        "template": {"metadata": template_meta, "spec": pod_spec},
    }
    if replicas is not None:
        spec = {"replicas": replicas, **spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(config, name, component, annotations),
        "spec": spec,
    }


def scaled_serving_deployment(
    config: WorkloadConfig,
    name: str,
    pod_spec: Obj,
    metrics_port: int,
    *,
    metrics_service: str,
    queue_port: int | None = None,
) -> list[Obj]:
    """The serving Deployment (waited on, scraped on `metrics_port`) plus its autoscaler when the
    blueprint autoscales: a KEDA ScaledObject on the queue gauge at `queue_port` (default: the
    metrics port) read through `metrics_service`, the ClusterIP Service whose ports include it, or
    an HPA on CPU (`builders/autoscaling.py`)."""
    scaler = autoscaler(config, name, metrics_service, queue_port or metrics_port)
    objects = [
        deployment(
            config,
            name,
            "serving",
            pod_spec,
            replicas=None if scaler else config.blueprint.scaling.replicas,
            annotations=readiness(config),
            pod_annotations=prometheus_annotations(config, metrics_port),
        )
    ]
    objects[0]["spec"]["strategy"] = rolling_strategy(config)
    return objects + ([scaler] if scaler else [])


#: a serving Deployment's rollout per upgrade strategy. Kubernetes' default (maxSurge 25% rounded up,
#: maxUnavailable 25% rounded down: kubernetes/kubernetes pkg/apis/apps/v1/defaults.go
#: SetDefaults_Deployment, pkg/controller/deployment/util/deployment_util.go ResolveFenceposts) is the
#: same as surge for 1-3 replicas; written out so the extra accelerator pod is a decision, not a default
ROLLING = {
    "surge": {"maxSurge": 1, "maxUnavailable": 0},  # a new pod (and node) first, then the old one goes
    "replace": {"maxSurge": 0, "maxUnavailable": 1},  # the old pod goes first: no extra node
}


def rolling_strategy(config: WorkloadConfig) -> Obj:
    """The serving Deployment's `spec.strategy` for the upgrade strategy in effect."""
    return {"type": "RollingUpdate", "rollingUpdate": dict(ROLLING[config.upgrade_strategy])}


def prometheus_annotations(config: WorkloadConfig, port: int, path: str = "/metrics") -> dict[str, str]:
    """Scrape annotations when the blueprint wants Prometheus metrics."""
    if not config.blueprint.observability.prometheus:
        return {}
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": path}
