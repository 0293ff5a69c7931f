"""The single entry point to the builders: every object of a workload, in apply order.

Order: Namespace, ServiceAccounts (the serving pods', the Ray head's, the mirror Job's and the UI's, each
when it has one), the namespace's
NetworkPolicies (before any pod), Secrets, the
wheel's ConfigMap (configmap delivery), cache objects (script ConfigMap, mirror Job), the runtime's
objects (RayService or Deployment, Services, HPA), then the UI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.runtimes import runtime
from llmctl.infra.workload.builders import admission, cache, common, device_user, placement, ray, security, ui
from llmctl.infra.workload.builders.network_policy import network_policies
from llmctl.infra.workload.builders.registry import builder_for
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery import ui_packages
from llmctl.infra.workload.delivery.serving_code import app_objects
from llmctl.infra.workload.pins.image_pins import pin_manifests

Obj = dict[str, Any]


@dataclass(frozen=True)
class EndpointInfo:
    """Where the endpoint of a workload is, inside the cluster."""

    namespace: str
    service: str
    port: int
    dashboard_service: str | None
    ui_service: str | None
    openai: bool
    path: str = ""

    @property
    def url(self) -> str:
        """The in-cluster URL of the app's root (the route prefix included; no trailing slash)."""
        return f"http://{self.service}.{self.namespace}.svc.cluster.local:{self.port}{self.path}"

    def as_dict(self) -> dict[str, Any]:
        """Stable keys for outputs and `--json`."""
        return {
            "namespace": self.namespace,
            "service": self.service,
            "port": self.port,
            "path": self.path,
            "url": self.url,
            "dashboard_service": self.dashboard_service,
            "ui_service": self.ui_service,
            "openai": self.openai,
        }


def endpoint_info(config: WorkloadConfig) -> EndpointInfo:
    """Service, port and companions of the workload's endpoint (its shape is in the runtime registry)."""

    bp = config.blueprint
    spec = runtime(bp.runtime)
    path = ""
    service_of = builder_for(bp.runtime).service
    if spec.endpoint == "service" and service_of is not None:
        (service, port), dashboard = service_of(config), None
    else:
        service, port, dashboard = (
            ray.serve_service_name(config),
            ray.SERVE_PORT,
            ray.head_service_name(config),
        )
        path = bp.serving.route_prefix.rstrip("/")  # serveConfigV2's route_prefix
    return EndpointInfo(
        namespace=config.ns,
        service=service,
        port=port,
        dashboard_service=dashboard,
        ui_service=ui.ui_service_name(config) if bp.ui != "none" else None,
        openai=spec.openai_routes,
        path=path,
    )


def build_manifests(
    config: WorkloadConfig,
    *,
    hf_token: str | None,
    api_key: str | None = None,
    webui_secret: str | None = None,
) -> list[Obj]:
    """Every Kubernetes object of the workload, in apply order.

    `hf_token` is only used when the model is gated; `api_key` only when the exposure requires
    one; `webui_secret` only with Open WebUI. Any may be None (e.g. for `llmctl render`, which redacts secrets anyway): the Secret
    is then emitted with an empty value.
    """
    head: list[Obj] = [common.namespace(config), common.service_account(config)]
    head.extend(ray.head_service_account(config))  # the Ray head's own (KubeRay binds its Role to it)
    head.extend(cache.mirror_service_account(config))  # the mirror Job's own
    head.extend(ui_packages.service_account(config))  # the Gradio UI's own (EKS), with the others
    head.extend(admission.admission_objects(config))  # what the Ray head's token may change, before any pod
    objects: list[Obj] = []
    if common.needs_hf_token(config):
        objects.append(common.opaque_secret(config, common.HF_SECRET, common.HF_SECRET_KEY, hf_token))
    if config.blueprint.exposure.api_key:
        objects.append(common.opaque_secret(config, common.API_KEY_SECRET, common.API_KEY_KEY, api_key))
    objects.extend(ui.secrets(config, webui_secret))
    objects.extend(app_objects(config))  # the wheel's ConfigMap (existing clusters without an image)
    objects.extend(cache.mirror_objects(config))
    objects.extend(builder_for(config.blueprint.runtime).build(config))
    endpoint = endpoint_info(config)
    objects.extend(ui.build(config, endpoint.url))
    # the namespace's NetworkPolicies before any pod: a pod never runs unconfined
    policies = network_policies(config, objects, endpoint.port)
    # a runtime's own policies (the fabric preflight's) join them, ahead of every pod too
    policies += [o for o in objects if o["kind"] == "NetworkPolicy"]
    objects = [o for o in objects if o["kind"] != "NetworkPolicy"]
    # plain trees (no shared sub-objects), then one hardening pass over every pod they hold
    head, policies, objects = (
        [json.loads(json.dumps(o)) for o in group] for group in (head, policies, objects)
    )
    # the Neuron images' pods as non-root where their devices allow it, then every pod hardened
    device_user.choose_users(objects, device_ownership=placement.serving_pool(config).device_ownership)
    restricted = security.harden(objects)
    head[0]["metadata"]["labels"].update(security.pod_security_labels(restricted))
    # the stack's recorded digests (up, images pin)
    return pin_manifests([*head, *policies, *objects], config.image_pins)
