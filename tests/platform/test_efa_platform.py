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


def test_plan_prices_the_405b_blueprint_per_replica_of_two_nodes() -> None:
    import json

    from typer.testing import CliRunner

    from llmctl.cli.app import app

    runner = CliRunner()
    args = ["plan", "-b", "llama31-405b-vllm-gpu", "--offline", "--stack", "ci"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)["cost"]["workloads"][0]
    assert (row["nodes"], row["nodes_per_replica"]) == (2, 2)
    assert row["serving_hourly_usd"] == row["replica_hourly_usd"] == 110.08
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    assert "2 x p5.48xlarge, 2 nodes per replica at $110.08/h a replica" in text.stdout
    # and what NCCL runs over between the two nodes: AWS's Ray LLM DLC carries aws-ofi-nccl
    assert row["inter_node_transport"].startswith("between its 2 nodes NCCL runs over EFA: ")
    said = " ".join(text.stdout.split())  # the line as printed, whatever the width wrapped
    assert f"llama31-405b-vllm-gpu: {row['inter_node_transport']}" in said


def test_every_node_of_the_405b_replica_gets_a_root_volume_that_holds_the_whole_model() -> None:
    """Ray Serve LLM downloads the model on each node of a replica (ray 2.58.0 node_initialization_utils.py
    `initialize_node`): 811.7 GB = 756 GiB + 150 GiB for the image and caches, rounded up to 1000 GiB."""
    from llmctl.blueprints.catalog import catalog_names

    platform = PlatformConfig.for_blueprints([load_blueprint("llama31-405b-vllm-gpu")])
    # on the pool of replicas over several nodes (pools.pool_for_blueprint), not the single-node GPU pool
    assert platform.root_volume_gib == {"gpu-nvidia-efa": 1000}
    graph = graph_for(platform)
    gpu_class = next(r for r in graph if r.name == "nodepools-gpu-nvidia-efa-nodeclass")
    [mapping] = gpu_class.inputs["spec"]["blockDeviceMappings"]
    assert mapping["ebs"]["volumeSize"] == "1000Gi"
    # every other catalog model fits its pool's default: their EC2NodeClasses do not change
    others = [load_blueprint(name) for name in catalog_names() if name != "llama31-405b-vllm-gpu"]
    assert PlatformConfig.for_blueprints(others).root_volume_gib == {}
