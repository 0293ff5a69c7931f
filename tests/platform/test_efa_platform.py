"""EFA on the platform (issue 55): with GPU pools, the EFA device plugin chart tolerating the GPU taint and
the cluster security group's egress rule to itself (what EFA needs beside EKS's own rules), under Pulumi
mocks; a platform without GPU pools gets neither."""

from __future__ import annotations

from platform_support import graph_for

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.pools import GPU_TAINT
from llmctl.infra.platform.config import PlatformConfig

EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
RELEASE = "kubernetes:helm.sh/v3:Release"


def test_a_gpu_platform_gets_the_efa_plugin_and_the_self_egress_rule() -> None:
    graph = graph_for(PlatformConfig.for_blueprints([load_blueprint("llama31-405b-vllm-gpu")]))
    discovery = next(r for r in graph if r.name.endswith("cluster-sg-discovery"))
    cluster_sg = discovery.inputs["resourceId"]
    egress = [r for r in graph if r.type == EGRESS]
    assert len(egress) == 1
    rule = egress[0].inputs
    assert rule["securityGroupId"] == rule["referencedSecurityGroupId"] == cluster_sg
    assert rule["ipProtocol"] == "-1"  # every protocol and port: EFA's SRD traffic is not TCP
    assert "cidrIpv4" not in rule
    assert rule["tags"]["llmctl:cluster"] == discovery.inputs["value"]
    plugin = [r for r in graph if r.type == RELEASE and r.inputs["chart"] == "aws-efa-k8s-device-plugin"]
    assert len(plugin) == 1
    assert plugin[0].inputs["version"] == "v0.5.30"
    assert plugin[0].inputs["repositoryOpts"] == {"repo": "https://aws.github.io/eks-charts"}
    assert plugin[0].inputs["values"]["tolerations"] == [
        {"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect}
    ]


def test_a_platform_without_gpu_pools_gets_neither() -> None:
    graph = graph_for(PlatformConfig.for_blueprints([load_blueprint("llama2-inf2")]))
    assert not [r for r in graph if r.type == EGRESS]
    assert not [r for r in graph if r.type == RELEASE and "efa" in str(r.inputs.get("chart"))]
