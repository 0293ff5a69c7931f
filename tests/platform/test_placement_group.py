"""The pool of replicas over several nodes (issue 55): `gpu-nvidia-efa`, chosen per blueprint
(`pools.pool_for_blueprint`), its nodes in one cluster placement group that the platform makes and the
pool's EC2NodeClass names (`placementGroupSelector`; Karpenter v1.14.1 resolves an existing group and
never creates one: aws/karpenter-provider-aws 1d927085dd81 pkg/providers/placementgroup/provider.go).
Single-node blueprints keep the pool, platform and render they had."""

from __future__ import annotations

from platform_support import Graph, graph_for

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import (
    EFA_GPU_TYPES,
    GPU_EFA_POOL,
    INSTANCE_TYPE_LABEL,
    pool,
    pool_for_blueprint,
    pool_for_instance,
)
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.program import node_pool_outputs

BIG = "llama31-405b-vllm-gpu"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def _single_node() -> list[str]:
    return [name for name in catalog_names() if load_blueprint(name).nodes_per_replica == 1]


def test_a_replica_over_several_nodes_gets_the_efa_pool_and_every_other_blueprint_its_old_one() -> None:
    catalog = hardware()
    big = load_blueprint(BIG)
    assert big.nodes_per_replica == 2
    assert pool_for_blueprint(big, catalog).name == GPU_EFA_POOL
    # the same instance type on one node stays on the GPU pool
    assert pool_for_instance(catalog.instance(big.compute.instance_type)).name == "gpu-nvidia"
    singles = _single_node()
    assert len(singles) == 7
    for name in singles:
        bp = load_blueprint(name)
        assert pool_for_blueprint(bp, catalog) == pool_for_instance(
            catalog.instance(bp.compute.instance_type)
        )


def test_the_efa_pool_takes_exactly_the_catalogs_nvidia_types_with_efa() -> None:
    """Every type a multi-node blueprint may use (the rules refuse one without EFA), and no other."""
    efa = {
        i.name for i in hardware().instances.values() if i.accelerator == "nvidia" and i.efa_interfaces > 0
    }
    assert set(EFA_GPU_TYPES) == efa
    spec = pool(GPU_EFA_POOL)
    assert spec.placement == "cluster" and spec.taints == pool("gpu-nvidia").taints
    assert set(spec.families) == set(pool("gpu-nvidia").families)
    assert spec.labels["instanceType"] == GPU_EFA_POOL != pool("gpu-nvidia").labels["instanceType"]


def test_the_405b_platform_makes_the_group_and_its_pool_launches_into_it() -> None:
    config = PlatformConfig.for_blueprints([load_blueprint(BIG)], stack="ci")
    assert GPU_EFA_POOL in config.pools and "gpu-nvidia" not in config.pools
    graph = Graph(graph_for(config))
    [group] = graph.of(PLACEMENT_GROUP)
    assert group.inputs["name"] == "llmctl-ci-gpu-nvidia-efa"
    assert group.inputs["strategy"] == "cluster"
    assert group.inputs["tags"] == {
        "llmctl:stack": "ci",
        "llmctl:cluster": "llmctl-ci",
        "llmctl:pool": GPU_EFA_POOL,
    }
    node_class = graph.named("nodepools-gpu-nvidia-efa-nodeclass")
    assert node_class.inputs["spec"]["placementGroupSelector"] == {"name": "llmctl-ci-gpu-nvidia-efa"}
    # made before the node class, deleted after it (whose finalizer waits for its instances to go)
    assert graph.depends(node_class, group)
    node_pool = graph.named("nodepools-gpu-nvidia-efa-nodepool")
    requirements = node_pool.inputs["spec"]["template"]["spec"]["requirements"]
    assert {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(EFA_GPU_TYPES)} in requirements
    assert node_pool.inputs["spec"]["template"]["metadata"]["labels"]["instanceType"] == GPU_EFA_POOL
    [output] = [row for row in node_pool_outputs(config) if row["name"] == GPU_EFA_POOL]
    assert output["instance_types"] == list(EFA_GPU_TYPES)


def test_single_node_platforms_have_no_group_and_the_gpu_pool_as_it_was() -> None:
    singles = [load_blueprint(name) for name in _single_node()]
    config = PlatformConfig.for_blueprints(singles, stack="ci")
    assert GPU_EFA_POOL not in config.pools
    graph = Graph(graph_for(config))
    assert not graph.of(PLACEMENT_GROUP)
    assert "llmctl:platform:PlacementGroups" not in graph.types()
    for node_class in graph.of(NODECLASS):
        assert "placementGroupSelector" not in node_class.inputs["spec"]
    gpu = graph.named("nodepools-gpu-nvidia-nodepool")
    keys = [r["key"] for r in gpu.inputs["spec"]["template"]["spec"]["requirements"]]
    assert INSTANCE_TYPE_LABEL not in keys
    [output] = [row for row in node_pool_outputs(config) if row["name"] == "gpu-nvidia"]
    assert output["instance_types"] == []


def test_the_405b_beside_a_single_node_gpu_blueprint_splits_the_pools() -> None:
    """Its 1 000 GiB root volume and its reservations go to its own pool; the GPU pool keeps 500 GiB."""
    config = PlatformConfig.for_blueprints([load_blueprint(BIG), load_blueprint("llama2-70b-vllm-gpu")])
    assert {"gpu-nvidia", GPU_EFA_POOL} <= set(config.pools)
    assert config.root_volume_gib == {GPU_EFA_POOL: 1000}


def test_plan_and_validate_of_the_405b_name_the_pool_and_plan_makes_the_group() -> None:
    import json

    from typer.testing import CliRunner

    from llmctl.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["plan", "-b", BIG, "--offline", "--stack", "ci", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["pools"] == ["core", "default", "ray-head", GPU_EFA_POOL]
    text = runner.invoke(app, ["plan", "-b", BIG, "--offline", "--stack", "ci"])
    assert "pools=core,default,ray-head,gpu-nvidia-efa" in text.stdout
    assert "aws:ec2/placementGroup:PlacementGroup placement-gpu-nvidia-efa" in text.stdout
    checked = runner.invoke(app, ["validate", "-b", BIG])
    assert checked.exit_code == 0, checked.output
    assert "schedulable on pools core, default, ray-head, gpu-nvidia-efa" in " ".join(checked.stdout.split())
