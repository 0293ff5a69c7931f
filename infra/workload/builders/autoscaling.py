"""The autoscaler of a Deployment runtime: a KEDA ScaledObject on the server's own queue, or an HPA
on CPU where the blueprint asks for it (`scaling.signal`), or none when the replicas are fixed.

Ray runtimes do not come here: Ray Serve scales them on ongoing requests per replica and KubeRay's
autoscaler adds the worker pods (`builders/ray.py`, `serving/common/ingress.py`).

The ScaledObject reads the queue gauge (blueprints/data/runtimes.yaml `queue_metric`) with KEDA's
`metrics-api` scaler straight from every ready pod behind the runtime's in-cluster metrics Service
(`aggregateFromKubeServiceEndpoints`, `format: prometheus`, summed over the pods), so no metrics
server is needed beside KEDA. That Service must carry the metrics port: KEDA lists the EndpointSlices
of the Service named by the URL's first host label and keeps the URL's port for a pod only where the
slice has that port; otherwise it calls `http://<pod IP>/...` on port 80 (kedacore/keda
`pkg/scalers/metrics_api_scaler.go` `getEndpointsUrlsFromServiceURL`, lines 312-379 at v2.20.2,
68a5b502). So the trigger names the ClusterIP Service that holds the metrics port, never the
exposed endpoint Service (which carries only the serving port, the one on a load balancer). KEDA's HPA then targets `scaling.target_queue` waiting requests per
pod (an `AverageValue` target: the sum divided by the pods). Source of the scaler's parameters:
kedacore/keda `pkg/scalers/metrics_api_scaler.go` (`valueLocation` is a PromQL series selector in
the prometheus format) and the KEDA 2.20 docs page `scalers/metrics-api`.
"""

from __future__ import annotations

from llmctl.blueprints.rules import autoscaled
from llmctl.blueprints.runtimes import runtime
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.meta import Obj, metadata

KEDA_API = "keda.sh/v1alpha1"
POLLING_INTERVAL_S = 15  # KEDA's default (30 s) halved: a queue builds quickly under LLM load


def autoscales(config: WorkloadConfig) -> bool:
    """Whether the blueprint lets the replica count move at all."""
    return autoscaled(config.blueprint)


def behavior(config: WorkloadConfig) -> Obj:
    """The HPA `behavior` for the blueprint's delays (empty: the HPA's own defaults)."""
    scaling = config.blueprint.scaling
    out: Obj = {}
    if scaling.upscale_delay_s is not None:
        out["scaleUp"] = {"stabilizationWindowSeconds": round(scaling.upscale_delay_s)}
    if scaling.downscale_delay_s is not None:
        out["scaleDown"] = {"stabilizationWindowSeconds": round(scaling.downscale_delay_s)}
    return out


def cpu_autoscaler(config: WorkloadConfig, deployment: str, *, cpu_utilization: int = 80) -> Obj:
    """An HPA (autoscaling/v2) on CPU utilisation between the blueprint's bounds (`signal: cpu`).

    The bounds are the blueprint's own: validation refuses `min_replicas: 0` with this signal."""
    scaling = config.blueprint.scaling
    spec: Obj = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicas": scaling.min_replicas,
        "maxReplicas": scaling.max_replicas,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": cpu_utilization},
                },
            }
        ],
    }
    if behavior(config):
        spec["behavior"] = behavior(config)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(config, deployment, "autoscaler"),
        "spec": spec,
    }


def metrics_url(config: WorkloadConfig, service: str, port: int) -> str:
    """The pods' metrics endpoint through ``service``, which must carry ``port`` (KEDA scrapes each of
    its ready endpoints at this port, and at port 80 where the endpoints lack it)."""
    return f"http://{service}.{config.ns}.svc.cluster.local:{port}/metrics"


def queue_autoscaler(config: WorkloadConfig, deployment: str, service: str, metrics_port: int) -> Obj:
    """A KEDA ScaledObject on the runtime's queue gauge, summed over the ready pods of ``service``
    (the in-cluster Service whose ports include ``metrics_port``)."""
    scaling = config.blueprint.scaling
    metric = runtime(config.blueprint.runtime).queue_metric
    if metric is None:  # validation refuses this (blueprints/rules.py `_scaling`)
        raise ValueError(f"{config.blueprint.runtime} has no queue metric to scale on")
    spec: Obj = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "minReplicaCount": scaling.min_replicas,
        "maxReplicaCount": scaling.max_replicas,
        "pollingInterval": POLLING_INTERVAL_S,
        "triggers": [
            {
                "type": "metrics-api",
                "name": "queue",
                "metricType": "AverageValue",
                "metadata": {
                    "url": metrics_url(config, service, metrics_port),
                    "format": "prometheus",
                    "valueLocation": metric,
                    "aggregateFromKubeServiceEndpoints": "true",
                    "aggregationType": "sum",
                    "targetValue": f"{scaling.target_queue:g}",
                    "activationTargetValue": f"{scaling.queue_activation:g}",
                },
            }
        ],
    }
    if behavior(config):
        spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior(config)}}
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": metadata(config, deployment, "autoscaler"),
        "spec": spec,
    }


def autoscaler(
    config: WorkloadConfig, deployment: str, metrics_service: str, metrics_port: int
) -> Obj | None:
    """The Deployment's autoscaler for the blueprint's signal; None when its replicas are fixed.

    The queue signal reads the pods through ``metrics_service``, the runtime's ClusterIP Service with
    ``metrics_port`` (Triton's `<name>-internal`), not the endpoint Service named like the
    Deployment, which carries only the serving port."""
    if not autoscales(config):
        return None
    if config.blueprint.scaling.signal == "cpu":
        return cpu_autoscaler(config, deployment)
    return queue_autoscaler(config, deployment, metrics_service, metrics_port)
