"""How the endpoint is reached: a ClusterIP Service (port-forward), an internal NLB or a public NLB.

Load balancers are made by the AWS Load Balancer Controller from Service annotations (an NLB in
IP target mode). A public endpoint always requires an API key, source CIDRs and an ACM certificate
(the blueprint schema enforces all three): its listener is TLS and only the listed networks reach
it. The key lives in the `api-key` Secret and reaches the serving app as `LLMCTL_API_KEY`. Only
the serving port goes on a load balancer; admin and metrics ports stay on ClusterIP Services.
"""

from __future__ import annotations

from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.meta import metadata

LB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
LB_TARGET = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
LB_SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
LB_SSL_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
LB_SSL_PORTS = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports"
LB_SSL_POLICY = "service.beta.kubernetes.io/aws-load-balancer-ssl-negotiation-policy"
#: TLS 1.3 and 1.2 only (an ELB security policy the NLB's TLS listeners accept)
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"


def service_type(config: WorkloadConfig) -> str:
    """ClusterIP for port-forward, LoadBalancer otherwise."""
    return "ClusterIP" if config.blueprint.exposure.mode == "port-forward" else "LoadBalancer"


def lb_annotations(config: WorkloadConfig, ports: list[Obj]) -> dict[str, str]:
    """AWS Load Balancer Controller annotations for the exposure mode (empty for ClusterIP).

    With a certificate (required for `public`) every listener of the Service is TLS, terminated at
    the NLB with the ACM certificate; the NLB forwards plain TCP to the pod inside the VPC.
    """
    exposure = config.blueprint.exposure
    if exposure.mode == "port-forward":
        return {}
    annotations = {
        LB_TYPE: "external",
        LB_TARGET: "ip",
        LB_SCHEME: "internet-facing" if exposure.mode == "public" else "internal",
    }
    if exposure.tls_certificate_arn:
        annotations[LB_SSL_CERT] = exposure.tls_certificate_arn
        annotations[LB_SSL_PORTS] = ",".join(str(p["name"]) for p in ports)
        annotations[LB_SSL_POLICY] = TLS_POLICY
    return annotations


def _spec(config: WorkloadConfig, ports: list[Obj], selector: dict[str, str] | None) -> Obj:
    spec: Obj = {"type": service_type(config), "ports": ports}
    if selector is not None:
        spec["selector"] = selector
    cidrs = config.blueprint.exposure.allowed_cidrs
    if spec["type"] == "LoadBalancer" and cidrs:
        spec["loadBalancerSourceRanges"] = list(cidrs)
    return spec


def port(name: str, number: int, target: int | str | None = None) -> Obj:
    """A TCP service port."""
    return {
        "name": name,
        "port": number,
        "targetPort": target if target is not None else number,
        "protocol": "TCP",
    }


def service(
    config: WorkloadConfig, name: str, component: str, ports: list[Obj], *, exposed: bool = True
) -> Obj:
    """A Service selecting a component's pods; `exposed` applies the blueprint's exposure mode."""
    selector = {"app.kubernetes.io/instance": config.blueprint.name, "app.kubernetes.io/component": component}
    if not exposed:
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(config, name, component),
            "spec": {"type": "ClusterIP", "ports": ports, "selector": selector},
        }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(config, name, component, lb_annotations(config, ports)),
        "spec": _spec(config, ports, selector),
    }


def serve_service(config: WorkloadConfig, name: str, ports: list[Obj]) -> Obj:
    """The RayService `serveService` template (KubeRay fills the selector)."""
    annotations = lb_annotations(config, ports)
    return {
        "metadata": {
            "name": name,
            "labels": metadata(config, name, "serving")["labels"],
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": _spec(config, ports, None),
    }
