"""The Workload component: applies the objects of `build_manifests` as typed Pulumi resources.

One resource per object (a Namespace, ServiceAccount, Secret, ConfigMap, Service, Deployment, Job
or HPA of `pulumi_kubernetes`, and an `apiextensions.CustomResource` for anything else such as a
RayService), all parented to the component, so every object is visible in previews and under
mocks. Secrets go in as Pulumi secrets. Readiness comes from the annotations the builders set:
`pulumi.com/waitFor` makes Pulumi wait until the RayService has its `Ready` condition, and
`pulumi.com/timeoutSeconds` allows for model download and Neuron compilation, so `up` returns only
once the endpoint answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pulumi

from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests, endpoint_info

Obj = dict[str, Any]

# Objects the serving objects wait for (created before them, deleted after them).
# NetworkPolicies among them: no pod of the workload starts before its namespace is confined.
PREREQUISITE_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "NetworkPolicy",
    "Secret",
    "ConfigMap",
    "Job",
)


def prerequisite(obj: Obj) -> bool:
    """Whether the objects after `obj` wait for it: the kinds above, and a headless Service (the DNS
    names a Job's pods find each other by: the fabric preflight's), which Pulumi awaits only until it
    exists, not until it has endpoints (pulumi/pulumi-kubernetes provider/pkg/await/service.go,
    `shouldWaitForPods`, 0012b9d2), so nothing waits on pods that come later."""
    headless = obj["kind"] == "Service" and obj.get("spec", {}).get("clusterIP") == "None"
    return obj["kind"] in PREREQUISITE_KINDS or headless


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _typed_class(api_version: str, kind: str) -> Any | None:
    """The pulumi_kubernetes class for a core object, or None for custom resources."""
    import pulumi_kubernetes as k8s

    classes: dict[tuple[str, str], Any] = {
        ("v1", "Namespace"): k8s.core.v1.Namespace,
        ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
        ("v1", "Secret"): k8s.core.v1.Secret,
        ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
        ("v1", "Service"): k8s.core.v1.Service,
        ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
        ("batch/v1", "Job"): k8s.batch.v1.Job,
        ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
        ("autoscaling/v2", "HorizontalPodAutoscaler"): k8s.autoscaling.v2.HorizontalPodAutoscaler,
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"): (
            k8s.admissionregistration.v1.ValidatingAdmissionPolicy
        ),
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"): (
            k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding
        ),
    }
    return classes.get((api_version, kind))


def resource_name(obj: Obj) -> str:
    """Logical Pulumi name of an object: `<namespace>/<name>`, or `<name>` for cluster objects."""
    meta = obj.get("metadata", {})
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def apply_object(
    obj: Obj,
    opts: pulumi.ResourceOptions,
    *,
    ignore_secret_changes: bool = False,
) -> pulumi.CustomResource:
    """Create the Pulumi resource for one Kubernetes object."""
    import pulumi_kubernetes as k8s

    api_version, kind = obj["apiVersion"], obj["kind"]
    body = {key: value for key, value in obj.items() if key not in ("apiVersion", "kind")}
    name = resource_name(obj)
    if kind == "Secret":
        values = {key: body.pop(key) for key in ("stringData", "data") if key in body}
        secret_opts = pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(
                additional_secret_outputs=["data", "stringData"],
                ignore_changes=["stringData"] if ignore_secret_changes else None,
            ),
        )
        return k8s.core.v1.Secret(
            name,
            metadata=body["metadata"],
            type=body.get("type"),
            string_data=pulumi.Output.secret(values["stringData"]) if "stringData" in values else None,
            data=pulumi.Output.secret(values["data"]) if "data" in values else None,
            opts=secret_opts,
        )
    typed = _typed_class(api_version, kind)
    if typed is not None:
        resource: pulumi.CustomResource = typed(name, **{_snake(k): v for k, v in body.items()}, opts=opts)
        return resource
    extra = {key: value for key, value in body.items() if key != "metadata"}
    return k8s.apiextensions.CustomResource(
        name, api_version=api_version, kind=kind, metadata=body["metadata"], opts=opts, **extra
    )


class Workload(pulumi.ComponentResource):
    """One blueprint deployed into its own namespace."""

    namespace: pulumi.Output[str]
    service: pulumi.Output[str]
    port: pulumi.Output[int]
    endpoint: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: WorkloadConfig,
        *,
        hf_token: str | None = None,
        api_key: str | None = None,
        api_key_generated: bool = False,
        webui_secret: str | None = None,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:workload:Workload", name, None, opts)
        manifests = build_manifests(config, hf_token=hf_token, api_key=api_key, webui_secret=webui_secret)
        # secrets made by the program: kept as first created (a new random value each run is no change)
        generated_names = {"open-webui-secret", *(["api-key"] if api_key_generated else [])}
        prerequisites: list[pulumi.Resource] = list(depends_on)
        self.resources: list[pulumi.CustomResource] = []
        for obj in manifests:
            child_opts = pulumi.ResourceOptions(parent=self, depends_on=list(prerequisites))
            generated = obj["kind"] == "Secret" and obj["metadata"]["name"] in generated_names
            resource = apply_object(obj, child_opts, ignore_secret_changes=generated)
            self.resources.append(resource)
            if prerequisite(obj):
                prerequisites.append(resource)
        info = endpoint_info(config)
        url = info.url
        self.namespace = pulumi.Output.from_input(info.namespace)
        self.service = pulumi.Output.from_input(info.service)
        self.port = pulumi.Output.from_input(info.port)
        self.endpoint = pulumi.Output.from_input(url)
        self.register_outputs(
            {
                "namespace": info.namespace,
                "service": info.service,
                "port": info.port,
                "endpoint": url,
                "dashboard_service": info.dashboard_service,
                "ui_service": info.ui_service,
            }
        )
