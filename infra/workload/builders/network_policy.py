"""NetworkPolicies of a workload namespace: deny everything, then admit only what the workload needs.

Each workload is a tenant in its own namespace. Without a policy any pod of the cluster reaches
every port of every other pod: a Ray head's GCS (6379), dashboard and Jobs API (8265) and client
port (10001) would take a job from any tenant, and that job would run with this workload's Pod
Identity, Hugging Face token and API key. The policies below (applied before any pod starts):

- ``default-deny``: every pod of the namespace, no ingress, no egress.
- ``allow-egress``: DNS (53), this namespace's own pods, HTTPS (443: S3, STS, the Hugging Face Hub,
  the package index where an existing cluster installs from it, the Kubernetes API for KubeRay's
  autoscaler sidecar) and the EKS Pod Identity agent (169.254.170.23:80). Not the instance metadata
  service, not other ports of other namespaces.
- ``allow-ray`` (Ray runtimes): the head and worker pods of this workload reach each other on every
  port (GCS, raylets, object managers and workers use ports Ray picks itself). On the fast path
  (`fast_path.py`) this is also what carries HAProxy's hop: HAProxy on any Ray pod forwards to the
  replicas' direct-ingress ports (30000-30007) on the others; HAProxy's stats (8404) and exporter
  (9101) are admitted from no one else.
- ``allow-kuberay`` (Ray runtimes): the KubeRay operator's pods reach the head's dashboard (it
  submits the Serve config and reads its status) and Serve port (the proxy's health check).
- ``allow-serving``: the serving port only (on the fast path HAProxy's frontend, on head and workers). With a load balancer (internal-lb, public) from any
  source: the NLB sends from its own addresses and its listener's source ranges are the outer
  boundary (any pod of an internal NLB's VPC reaches the NLB anyway). With port-forward only from
  this workload's UI pods (kubectl port-forward reaches the pod over its loopback, which no policy
  filters).
- ``allow-metrics`` (when something reads the metrics port): KEDA's operator for a ScaledObject and
  the CloudWatch agent for pods with Prometheus scrape annotations.

Kubelet probes come from the node, which network policy engines admit (the VPC CNI's agent adds
the node IP). On EKS the VPC CNI enforces these only with its network policy agent on
(`enableNetworkPolicy`, set by the platform's cluster, `infra/platform/cluster.py`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from llmctl.infra.platform.addons import addon
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.meta import metadata
from llmctl.infra.workload.scheduling.pods import pod_templates

API = "networking.k8s.io/v1"
NAMESPACE_NAME = "kubernetes.io/metadata.name"
POD_IDENTITY_AGENT = "169.254.170.23/32"  # EKS Pod Identity agent (IPv4), port 80
KUBERAY_OPERATOR_LABEL = {"app.kubernetes.io/name": "kuberay-operator"}  # the chart's pod label
RAY_COMPONENTS = ("ray-head", "ray-worker")
#: the KubeRay operator reads these ports of the head: dashboard (Serve config, status), Serve (proxy health)
KUBERAY_HEAD_PORTS = (8265, 8000)
SCRAPE_PORT = "prometheus.io/port"


def _policy(config: WorkloadConfig, name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": metadata(config, name, "network"),
        "spec": spec,
    }


def _tcp(*ports: int) -> list[Obj]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _selector(config: WorkloadConfig, components: tuple[str, ...]) -> Obj:
    """Pods of this workload with one of the components."""
    return {
        "matchLabels": {"app.kubernetes.io/instance": config.blueprint.name},
        "matchExpressions": [
            {"key": "app.kubernetes.io/component", "operator": "In", "values": list(components)}
        ],
    }


def _from_namespace(namespace: str, pods: Obj | None = None) -> Obj:
    peer: Obj = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: namespace}}}
    if pods is not None:
        peer["podSelector"] = {"matchLabels": pods}
    return peer


def default_deny(config: WorkloadConfig) -> Obj:
    """No ingress and no egress for any pod of the namespace, unless another policy admits it."""
    return _policy(config, "default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})


def allow_egress(config: WorkloadConfig) -> Obj:
    """What every pod may reach: DNS, its own namespace, HTTPS, the Pod Identity agent."""
    dns = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    return _policy(
        config,
        "allow-egress",
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {"ports": dns},
                {"to": [{"podSelector": {}}]},
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": _tcp(443)},
                {"to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT}}], "ports": _tcp(80)},
            ],
        },
    )


def _serving_components(objects: list[Obj]) -> tuple[str, ...]:
    return RAY_COMPONENTS if _is_ray(objects) else ("serving",)


def _is_ray(objects: list[Obj]) -> bool:
    return any(obj.get("kind") == "RayService" for obj in objects)


def _has_ui(objects: list[Obj]) -> bool:
    return any(
        obj.get("kind") == "Deployment"
        and obj["metadata"]["labels"].get("app.kubernetes.io/component") == "ui"
        for obj in objects
    )


def allow_serving(config: WorkloadConfig, objects: list[Obj], port: int) -> list[Obj]:
    """The serving port, from the load balancer's side or (port-forward) from the workload's UI."""
    rule: Obj = {"ports": _tcp(port)}
    if config.blueprint.exposure.mode == "port-forward":
        if not _has_ui(objects):
            return []  # port-forward arrives over the pod's loopback: nothing to admit
        rule["from"] = [{"podSelector": {"matchLabels": _selector_labels(config, "ui")}}]
    spec = {
        "podSelector": _selector(config, _serving_components(objects)),
        "policyTypes": ["Ingress"],
        "ingress": [rule],
    }
    return [_policy(config, "allow-serving", spec)]


def _selector_labels(config: WorkloadConfig, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": config.blueprint.name, "app.kubernetes.io/component": component}


def allow_ray(config: WorkloadConfig, objects: list[Obj]) -> list[Obj]:
    """Ray head and workers to each other (every port), and the KubeRay operator to the head."""
    if not _is_ray(objects):
        return []
    ray_pods = _selector(config, RAY_COMPONENTS)
    kuberay = _from_namespace(addon("kuberay_operator").namespace, KUBERAY_OPERATOR_LABEL)
    return [
        _policy(
            config,
            "allow-ray",
            {
                "podSelector": ray_pods,
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": ray_pods}]}],
            },
        ),
        _policy(
            config,
            "allow-kuberay",
            {
                "podSelector": {"matchLabels": _selector_labels(config, "ray-head")},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [kuberay], "ports": _tcp(*KUBERAY_HEAD_PORTS)}],
            },
        ),
    ]


def _scaler_ports(objects: list[Obj]) -> list[int]:
    """Ports a ScaledObject's metrics-api trigger reads from the pods (its URL's port)."""
    ports = set()
    for obj in objects:
        if obj.get("kind") != "ScaledObject":
            continue
        for trigger in obj["spec"].get("triggers", []):
            url = urlsplit(trigger.get("metadata", {}).get("url", ""))
            if url.port is not None:
                ports.add(url.port)
    return sorted(ports)


def _scrape_ports(objects: list[Obj]) -> list[int]:
    """Ports named by the pods' Prometheus scrape annotations."""
    return sorted(
        {
            int(annotations[SCRAPE_PORT])
            for obj in objects
            for template in pod_templates(obj)
            if SCRAPE_PORT in (annotations := _template_annotations(obj, template.where))
        }
    )


def allow_metrics(config: WorkloadConfig, objects: list[Obj]) -> list[Obj]:
    """The metrics port of the pods something reads it from: KEDA's operator (a ScaledObject's
    metrics-api trigger) and the CloudWatch agent (pods with Prometheus scrape annotations)."""
    rules: list[Obj] = []
    if scaler := _scaler_ports(objects):
        rules.append({"from": [_from_namespace(addon("keda").namespace)], "ports": _tcp(*scaler)})
    if config.blueprint.observability.cloudwatch and (scrape := _scrape_ports(objects)):
        cloudwatch = addon("amazon-cloudwatch-observability").namespace
        rules.append({"from": [_from_namespace(cloudwatch)], "ports": _tcp(*scrape)})
    if not rules:
        return []
    spec = {
        "podSelector": _selector(config, _serving_components(objects)),
        "policyTypes": ["Ingress"],
        "ingress": rules,
    }
    return [_policy(config, "allow-metrics", spec)]


def _template_annotations(obj: Obj, where: str) -> dict[str, str]:
    """The pod template annotations of a manifest's pod template (`where` as `pods.pod_templates` says)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "RayService":
        cluster = spec["rayClusterConfig"]
        if where == "head group":
            template = cluster["headGroupSpec"]["template"]
        else:
            name = where.removeprefix("worker group ")
            template = next(g["template"] for g in cluster["workerGroupSpecs"] if g.get("groupName") == name)
    else:
        template = spec["template"]
    annotations: dict[str, str] = (template.get("metadata") or {}).get("annotations") or {}
    return annotations


def network_policies(config: WorkloadConfig, objects: list[Obj], serving_port: int) -> list[Obj]:
    """Every NetworkPolicy of the workload's namespace, for the objects the workload applies."""
    return [
        default_deny(config),
        allow_egress(config),
        *allow_ray(config, objects),
        *allow_serving(config, objects, serving_port),
        *allow_metrics(config, objects),
    ]
