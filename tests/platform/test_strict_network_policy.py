"""Issue 53, finding 7: the VPC CNI enforces NetworkPolicies in strict mode.

In standard mode (the add-on's default) a new pod starts default-allow until its policies are
programmed: for its first moments a workload pod reaches, and is reached by, anything. Strict mode
starts it default-deny. Strict mode also keeps every pod that no policy selects default-deny for good
(aws/aws-network-policy-agent v1.4.1 ``pkg/rpc/rpc_handler.go``), so each namespace a platform add-on
runs in carries an allow-all policy that exists before the pods there start (kube-system's before the
core nodes, the others before their chart or add-on). Held on the platform graph under Pulumi mocks.
"""

from __future__ import annotations

import json

import pytest
from platform_support import Graph, Registered, graph_for

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.system_policies import ALLOW_ALL

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RELEASE = "kubernetes:helm.sh/v3:Release"
ADDON = "aws:eks/addon:Addon"


def _policies(graph: Graph) -> dict[str, Registered]:
    found = [r for r in graph.of(POLICY) if r.inputs["metadata"]["name"] == ALLOW_ALL]
    return {r.inputs["metadata"]["namespace"]: r for r in found}


def test_the_vpc_cni_starts_new_pods_default_deny(all_pools_graph: Graph) -> None:
    addons = {r.inputs["addonName"]: r for r in all_pools_graph.of(ADDON)}
    values = json.loads(addons["vpc-cni"].inputs["configurationValues"])
    assert values == {"enableNetworkPolicy": "true", "env": {"NETWORK_POLICY_ENFORCING_MODE": "strict"}}


@pytest.mark.parametrize(
    "blueprints", [[], ["llama2-triton-vllm-gpu", "llama2-inf2"]], ids=["all-pools", "keda"]
)
def test_every_platform_namespace_allows_its_pods_before_they_start(blueprints: list[str]) -> None:
    config = PlatformConfig.for_blueprints([load_blueprint(b) for b in blueprints], all_pools=not blueprints)
    graph = Graph(graph_for(config))
    policies = _policies(graph)
    assert set(policies) == {row.namespace for row in config.addons()}
    for policy in policies.values():
        assert policy.inputs["spec"] == {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{}],
            "egress": [{}],
        }
    # kube-system's exists before any node: CoreDNS and the controllers start under it
    assert graph.depends(graph.named("cluster-core"), policies["kube-system"])
    for release in graph.of(RELEASE):
        namespace = release.inputs["namespace"]
        if namespace != "kube-system":  # kube-system's charts wait for the core nodes, which wait for it
            assert graph.depends(release, policies[namespace]), release.name
    for addon in graph.of(ADDON):
        if addon.inputs["addonName"] == "amazon-cloudwatch-observability":
            assert graph.depends(addon, policies["amazon-cloudwatch"])
    # a namespace a chart creates is made (or adopted) first by a server-side apply patch
    patches = {r.inputs["metadata"]["name"] for r in graph.of("kubernetes:core/v1:NamespacePatch")}
    assert patches == set(policies) - {"kube-system"}
    if blueprints:
        assert "keda" in policies
