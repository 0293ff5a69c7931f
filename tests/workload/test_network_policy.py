"""Issue 45, high 3: a tenant's pods cannot reach another workload's Ray control plane.

Two halves: Ray's own token auth (KubeRay `authOptions.mode: token`, checked against the upstream
CRD by tests/conformance/test_crds.py) and the namespace's NetworkPolicies, read here with the
Kubernetes NetworkPolicy rules (a pod selected by no policy of a direction is open in it; once
selected, a connection is allowed when any rule of any selecting policy admits it; peers and ports
inside a rule are ORed, a rule's `from` and `ports` ANDed; an omitted list matches everything).
The evaluator is the API's documented meaning, kept small: ipBlock peers are matched only for sources
outside the cluster, as the API says they are meant for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import kubernetes_validate
import pytest
from test_workload_builders import SCHEMA
from workload_helpers import TOKEN, blueprint, config_for, find, manifests_for

from llmctl.blueprints.versions import versions
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests, endpoint_info
from llmctl.serving.lockfiles import locks

Obj = dict[str, Any]
RAY_BLUEPRINTS = ("tiny-cpu", "llama2-7b-cpu", "llama2-inf2", "llama3-vllm-inf2", "llama2-70b-vllm-gpu")
HEAD_CONTROL_PORTS = (6379, 8265, 10001)


@dataclass(frozen=True)
class Pod:
    """A pod as a NetworkPolicy sees it (ip_only: a source outside the cluster, e.g. an NLB node)."""

    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    ip_only: bool = False

    def ns_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.namespace, **self.namespace_labels}


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        present, value = expr["key"] in labels, labels.get(expr["key"])
        op = expr["operator"]
        if (op == "In" and value not in expr["values"]) or (op == "NotIn" and value in expr["values"]):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def _peer_admits(peer: Obj, source: Pod, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        return source.ip_only
    if source.ip_only:
        return False
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], source.ns_labels()):
            return False
    elif source.namespace != policy_ns:
        return False
    return _matches(peer.get("podSelector") or {}, source.labels)


def ingress_allowed(policies: list[Obj], source: Pod, target: Pod, port: int) -> bool:
    """Whether `source` may open a TCP connection to `target`'s `port` under the policies."""
    selecting = [
        p
        for p in policies
        if p["metadata"]["namespace"] == target.namespace
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and _matches(p["spec"]["podSelector"], target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            if ports is not None and not any(
                p.get("port") == port and p.get("protocol", "TCP") == "TCP" for p in ports
            ):
                continue
            peers = rule.get("from")
            if peers is None or any(_peer_admits(peer, source, target.namespace) for peer in peers):
                return True
    return False


def _policies(objects: list[Obj]) -> list[Obj]:
    return [o for o in objects if o["kind"] == "NetworkPolicy"]


def _pod(objects: list[Obj], component: str, namespace: str) -> Pod:
    """The labels the workload's pods of a component carry (from their templates)."""
    for obj in objects:
        if obj["kind"] == "RayService":
            cluster = obj["spec"]["rayClusterConfig"]
            templates = [
                cluster["headGroupSpec"]["template"],
                *(g["template"] for g in cluster["workerGroupSpecs"]),
            ]
        elif obj["kind"] in ("Deployment", "Job"):
            templates = [obj["spec"]["template"]]
        else:
            continue
        for template in templates:
            labels = template["metadata"]["labels"]
            if labels.get("app.kubernetes.io/component") == component:
                return Pod(namespace, dict(labels))
    raise AssertionError(f"no {component} pod")


def _with_exposure(name: str, **exposure: object) -> WorkloadConfig:
    bp = blueprint(name)
    bp = bp.model_copy(update={"exposure": bp.exposure.model_validate(exposure)})
    return config_for(name).model_copy(update={"blueprint": bp})


TENANT = Pod("other-tenant", {"app.kubernetes.io/component": "ray-head", "app.kubernetes.io/instance": "x"})
KUBERAY = Pod("kuberay-operator", {"app.kubernetes.io/name": "kuberay-operator"})
OUTSIDE = Pod("", ip_only=True)  # the NLB's addresses, a client on the internet


@pytest.mark.parametrize("name", RAY_BLUEPRINTS)
def test_another_namespace_cannot_reach_the_ray_control_plane(name: str) -> None:
    """Fails without the policies: nothing selects the head, so every pod reaches 6379/8265/10001."""
    objects = manifests_for(name)
    policies = _policies(objects)
    head = _pod(objects, "ray-head", name)
    worker = _pod(objects, "ray-worker", name)
    for port in HEAD_CONTROL_PORTS:
        assert not ingress_allowed(policies, TENANT, head, port), port
        assert not ingress_allowed(policies, OUTSIDE, head, port), port
        # a pod that copies this workload's labels in its own namespace gets nothing either
        assert not ingress_allowed(policies, Pod("other-tenant", head.labels), head, port), port
        assert ingress_allowed(policies, worker, head, port), port  # the cluster itself still works
    assert ingress_allowed(policies, head, worker, 12345)  # raylet/worker ports Ray picks
    # the KubeRay operator submits the Serve config (dashboard) and checks the head's proxy
    assert ingress_allowed(policies, KUBERAY, head, 8265) and ingress_allowed(policies, KUBERAY, head, 8000)
    assert not ingress_allowed(policies, KUBERAY, head, 6379)
    assert not ingress_allowed(policies, Pod("other-tenant", KUBERAY.labels), head, 8265)


def test_every_pod_is_under_default_deny_and_the_policies_validate(catalog_name: str) -> None:
    objects = manifests_for(catalog_name)
    policies = _policies(objects)
    deny = find(policies, "NetworkPolicy", "default-deny")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    for policy in policies:
        kubernetes_validate.validate(policy, SCHEMA, strict=True)
    # before any pod: the component makes every pod wait for its prerequisites (NetworkPolicy among them)
    kinds = [o["kind"] for o in objects]
    first_pod = min(i for i, k in enumerate(kinds) if k in ("RayService", "Deployment", "Job"))
    assert max(i for i, k in enumerate(kinds) if k == "NetworkPolicy") < first_pod


def test_egress_is_dns_namespace_https_and_pod_identity_only() -> None:
    egress = find(manifests_for("tiny-cpu"), "NetworkPolicy", "allow-egress")["spec"]["egress"]
    ports = {(p["protocol"], p["port"]) for rule in egress for p in rule.get("ports", [])}
    assert ports == {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 80)}
    [http] = [r for r in egress if {"protocol": "TCP", "port": 80} in r.get("ports", [])]
    assert http["to"] == [{"ipBlock": {"cidr": "169.254.170.23/32"}}]  # not the instance metadata service
    assert [r for r in egress if "ports" not in r] == [{"to": [{"podSelector": {}}]}]  # own namespace only


def test_port_forward_serving_port_admits_only_the_workloads_ui() -> None:
    """llama3-vllm-inf2 (port-forward, Open WebUI): the UI reaches the Serve port, no other tenant does."""
    objects = manifests_for("llama3-vllm-inf2")
    policies, ns = _policies(objects), "llama3-vllm-inf2"
    ui, head, worker = _pod(objects, "ui", ns), _pod(objects, "ray-head", ns), _pod(objects, "ray-worker", ns)
    for target in (head, worker):
        assert ingress_allowed(policies, ui, target, 8000)
        assert not ingress_allowed(policies, TENANT, target, 8000)
        assert not ingress_allowed(policies, OUTSIDE, target, 8000)
    assert not ingress_allowed(policies, ui, head, 8265)  # the UI gets the Serve port, not the dashboard
    assert not ingress_allowed(policies, TENANT, ui, 8080)  # the UI itself: port-forward only


@pytest.mark.parametrize("name", ["llama2-triton-vllm-gpu", "llama2-torchserve-inf2", "tiny-cpu"])
def test_load_balancer_reaches_only_the_serving_port(name: str) -> None:
    config = _with_exposure(name, mode="internal-lb")
    objects = build_manifests(config, hf_token=TOKEN)
    policies, port = _policies(objects), endpoint_info(config).port
    serving = _pod(objects, "ray-head" if name == "tiny-cpu" else "serving", name)
    assert ingress_allowed(policies, OUTSIDE, serving, port)
    closed = {
        "llama2-triton-vllm-gpu": (8001, 8002),
        "llama2-torchserve-inf2": (8081, 8082),
        "tiny-cpu": (8265, 6379),
    }
    for other in closed[name]:
        assert not ingress_allowed(policies, OUTSIDE, serving, other), other


def test_keda_reads_the_metrics_port_of_a_queue_scaled_deployment() -> None:
    objects = manifests_for("llama2-triton-vllm-gpu")
    policies, ns = _policies(objects), "llama2-triton-vllm-gpu"
    serving = _pod(objects, "serving", ns)
    # KEDA reads vLLM's queue gauge, served beside Triton on 8003 (serving/triton_vllm/queue_metrics.py)
    assert ingress_allowed(policies, Pod("keda", {"app": "keda-operator"}), serving, 8003)
    assert not ingress_allowed(policies, Pod("keda", {"app": "keda-operator"}), serving, 8000)
    assert not ingress_allowed(policies, TENANT, serving, 8003)


def test_ray_token_auth_on_every_rayservice_with_a_ray_that_has_it(catalog_name: str) -> None:
    """KubeRay 1.7's `authOptions.mode: token` (ray-project/kuberay v1.7.0 raycluster_types.go: KubeRay
    makes the Secret and sets RAY_AUTH_MODE/RAY_AUTH_TOKEN); Ray has token auth from 2.52.0."""
    for obj in manifests_for(catalog_name):
        if obj["kind"] != "RayService":
            continue
        cluster = obj["spec"]["rayClusterConfig"]
        assert cluster["authOptions"] == {"mode": "token"}
        assert tuple(int(x) for x in cluster["rayVersion"].split(".")) >= (2, 52, 0)


def test_every_locked_ray_has_token_auth() -> None:
    """The pods of base-image mode install Ray from these locks; each must be >= 2.52."""
    found = []
    for spec in locks().locks.values():
        for line in spec.path.read_text(encoding="utf-8").splitlines():
            if line.startswith("ray=="):
                version = line.split("==")[1].split()[0]
                found.append(version)
                assert tuple(int(x) for x in version.split(".")) >= (2, 52, 0), (spec.path, version)
    assert found and versions().python["ray"].value in found
