"""The engine-order simulation: create and delete waves derived from the recorded resource graph
(llmctl.infra.lifecycle.engine_order) and the order invariants of order_invariants.yaml, checked
for every catalog blueprint's platform and workload stacks, and shown failing on broken graphs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from lifecycle_support import code_tag, lifecycle, push, seed_cache_bucket
from standin_support import StandinEngine, kube_objects

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.infra.aws.images import repository_name
from llmctl.infra.lifecycle.engine_order import (
    CycleError,
    Node,
    OrderGraph,
    nodes_from_registered,
    nodes_from_state,
)
from llmctl.infra.lifecycle.order_invariants import (
    StackGraph,
    StackOrder,
    Violation,
    check_images,
    check_order,
    load_invariants,
    pod_images,
    produced_images,
)
from llmctl.infra.plan.offline import run_offline
from llmctl.infra.plan.run import run_platform_offline
from llmctl.infra.platform.addons import ADDONS
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.workload.config import Delivery, PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.prepare.delivery import deliver

TOKEN = "hf_TESTtokenValue0123456789"
STACK = "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev"


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::p::{type_}::{name}"


def node(name: str, *, custom: bool = True, **fields: object) -> Node:
    return Node(
        urn=urn("t:m:R" if custom else "c:m:C", name),
        type="t:m:R" if custom else "c:m:C",
        custom=custom,
        **fields,
    )  # type: ignore[arg-type]


def names(graph: OrderGraph, waves: list[list[str]]) -> list[list[str]]:
    return [sorted(graph.nodes[u].name for u in wave) for wave in waves]


# ---- the engine's rules on small graphs ------------------------------------------------------------


def test_waves_follow_parents_explicit_property_provider_and_deleted_with_dependencies() -> None:
    provider = Node(urn=urn("pulumi:providers:aws", "aws"), type="pulumi:providers:aws", custom=True)
    vpc = node("vpc", provider=provider.urn)
    comp = node("comp", custom=False)
    subnet = node(
        "subnet", parent=comp.urn, property_dependencies=(("vpcId", (vpc.urn,)),), provider=provider.urn
    )
    table = node("table", parent=comp.urn, dependencies=(vpc.urn,), provider=provider.urn)
    # a dependency on a local component covers its descendants (as the engine's DependenciesOf)
    cluster = node("cluster", dependencies=(comp.urn,), provider=provider.urn)
    logs = node("logs", deleted_with=cluster.urn, provider=provider.urn)
    graph = OrderGraph([provider, vpc, comp, subnet, table, cluster, logs])
    assert names(graph, graph.create_waves()) == [
        ["aws"],
        ["vpc"],
        ["subnet", "table"],
        ["cluster"],
        ["logs"],
    ]
    assert names(graph, graph.delete_waves()) == [
        ["logs"],
        ["cluster"],
        ["subnet", "table"],  # children before their parent component, together
        ["comp", "vpc"],
        ["aws"],
    ]
    assert graph.must_wait(vpc.urn, cluster.urn, "create") == [cluster.urn, subnet.urn, vpc.urn]
    assert graph.must_wait(cluster.urn, vpc.urn, "delete") == [vpc.urn, subnet.urn, cluster.urn]
    assert graph.must_wait(subnet.urn, table.urn, "create") is None  # same wave: may run together


def test_a_cycle_is_refused_with_the_resources_named() -> None:
    a = node("a", dependencies=(urn("t:m:R", "b"),))
    b = node("b", dependencies=(a.urn,))
    with pytest.raises(CycleError, match=r"t:m:R a.*t:m:R b"):
        OrderGraph([a, b]).delete_waves()


def test_state_resources_read_like_a_stack_export() -> None:
    provider_urn = urn("pulumi:providers:aws", "default")
    exported = [
        {"urn": STACK, "type": "pulumi:pulumi:Stack", "custom": False},
        {"urn": provider_urn, "type": "pulumi:providers:aws", "custom": True, "parent": STACK},
        {
            "urn": urn("aws:ec2/vpc:Vpc", "vpc"),
            "type": "aws:ec2/vpc:Vpc",
            "custom": True,
            "parent": STACK,
            "provider": f"{provider_urn}::04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        },
        {
            "urn": urn("aws:ec2/subnet:Subnet", "subnet"),
            "type": "aws:ec2/subnet:Subnet",
            "custom": True,
            "parent": STACK,
            "provider": f"{provider_urn}::04da6b54-80e4-46f7-96ec-b56ff0331ba9",
            "propertyDependencies": {"vpcId": [urn("aws:ec2/vpc:Vpc", "vpc")]},
        },
    ]
    graph = OrderGraph(nodes_from_state(exported))
    assert names(graph, graph.delete_waves()) == [["subnet"], ["vpc"], ["default"], ["p-dev"]]


# ---- every catalog blueprint -------------------------------------------------------------------------


@functools.cache
def platform_graph(name: str) -> OrderGraph:
    config = PlatformConfig.for_blueprints([load_blueprint(name)], stack="dev")
    return OrderGraph(nodes_from_registered(run_platform_offline(config, preview=False)))


def workload_config(name: str) -> WorkloadConfig:
    bp = load_blueprint(name)
    return WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))


@functools.cache
def workload_graph(name: str) -> OrderGraph:
    from llmctl.infra.workload.program import build_workload

    config = workload_config(name)
    # as on `up`: the platform's kubeconfig output makes the workload's Kubernetes provider
    facts = config.platform.model_copy(update={"kubeconfig": '{"apiVersion": "v1", "kind": "Config"}'})
    config = config.model_copy(update={"platform": facts})
    return OrderGraph(nodes_from_registered(run_offline(lambda: build_workload(config, hf_token=TOKEN))))


def session(
    name: str, platform: OrderGraph | None = None, workload: OrderGraph | None = None
) -> list[StackGraph]:
    return [
        StackGraph("platform", "platform", platform or platform_graph(name)),
        StackGraph("workload", f"workload {name}", workload or workload_graph(name)),
    ]


def named(graph: OrderGraph, name: str) -> str:
    [found] = [u for u, n in graph.nodes.items() if n.name == name]
    return found


@pytest.mark.parametrize("name", catalog_names())
def test_catalog_blueprint_create_and_delete_order_keep_every_invariant(name: str) -> None:
    stacks = session(name)
    assert [str(v) for v in check_order(stacks)] == []
    platform = platform_graph(name)
    create, delete = platform.create_waves(), platform.delete_waves()
    wave = {urn: i for i, w in enumerate(delete) for urn in w}
    # what the invariants protect is really there, and independent steps do run together
    pools = [u for u, n in platform.nodes.items() if n.type.endswith((":NodePool", ":EC2NodeClass"))]
    nat = named(platform, "network-nat")
    assert pools and all(wave[p] < wave[nat] for p in pools)
    assert max(len(w) for w in create) > 1 and max(len(w) for w in delete) > 1


@pytest.mark.parametrize("name", catalog_names())
def test_catalog_blueprint_pods_use_only_images_an_earlier_step_produced(name: str) -> None:
    config = workload_config(name)
    manifests = build_manifests(config, hf_token=TOKEN)
    assert pod_images(manifests)
    assert [str(v) for v in check_images(manifests, produced_images(config))] == []


# ---- with the platform's ECR registry: the images of the delivery `up` decides ----------------------

#: what the platform exports on every `up` (infra/platform/program.py): the account's registry and
#: the cache bucket (always made, also for blueprints without caches)
REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
CACHE_BUCKET = "llmctl-dev-us-west-2-cache"


def registry_config(name: str) -> WorkloadConfig:
    config = workload_config(name)
    facts = config.platform.model_copy(update={"ecr_registry": REGISTRY, "cache_bucket": CACHE_BUCKET})
    return config.model_copy(update={"platform": facts})


def ecr_images(images: set[str]) -> set[str]:
    return {image for image in images if ".dkr.ecr." in image}


def assert_in_ecr(region: str, image: str) -> None:
    """The image is one ECR's DescribeImages finds (by digest)."""
    repository, digest = image.removeprefix(f"{REGISTRY}/").split("@")
    found = boto3.client("ecr", region_name=region).describe_images(
        repositoryName=repository, imageIds=[{"imageDigest": digest}]
    )
    assert [d["imageDigest"] for d in found["imageDetails"]] == [digest]


@pytest.mark.parametrize("pushed", [True, False], ids=["image-pushed", "no-image"])
@pytest.mark.parametrize("name", catalog_names())
def test_catalog_blueprint_with_an_ecr_registry_pods_use_only_images_an_earlier_step_produced(
    name: str, pushed: bool, aws: str
) -> None:
    config = registry_config(name)
    seed_cache_bucket(CACHE_BUCKET, aws)
    repository = repository_name(config.stack, name)
    digest = push(aws, repository, code_tag()) if pushed else None
    # the offline plan (no decision yet) names no ECR image: the registry alone makes none exist
    planned = build_manifests(config, hf_token=TOKEN)
    assert not ecr_images({image for _, _, image in pod_images(planned)})
    assert [str(v) for v in check_images(planned, produced_images(config))] == []

    decided = deliver(config, note=lambda _text: None)  # `up`'s delivery step: DescribeImages, upload
    assert decided.delivery is not None and decided.delivery.decided
    manifests = build_manifests(decided, hf_token=TOKEN)
    images = {image for _, _, image in pod_images(manifests)}
    if config.blueprint.image.serving_image:
        assert decided.delivery.image == config.blueprint.image.serving_image
    elif pushed:
        built = f"{REGISTRY}/{repository}@{digest}"
        assert decided.delivery.mode == "image" and ecr_images(images) == {built}
        assert_in_ecr(aws, built)
    else:
        assert decided.delivery.mode == "wheel" and not ecr_images(images)
        assert decided.delivery.image == config.blueprint.image.base
    assert [str(v) for v in check_images(manifests, produced_images(decided))] == []
    # the same pods without the delivery recorded: an ECR image counts as produced only once found
    undecided = decided.model_copy(update={"delivery": None})
    missing = [v.message for v in check_images(manifests, produced_images(undecided))]
    assert len(missing) == (len([i for *_, i in pod_images(manifests) if ".dkr.ecr." in i]))


def saved_delivery_config(engine: StandinEngine, name: str) -> tuple[WorkloadConfig, list[dict[str, Any]]]:
    """The workload config with the delivery the stack recorded, and its saved Kubernetes objects."""
    outputs = engine.outputs(f"llmctl-{name}", "dev")
    config = workload_config(name).model_copy(
        update={"delivery": Delivery.model_validate(outputs["delivery"])}
    )
    return config, kube_objects(engine.resources(f"llmctl-{name}", "dev"))


def test_scenario_up_without_then_with_the_pushed_image_pulls_only_produced_images(
    engine: StandinEngine, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    lifecycle().up(BP, region=aws, wait=False)  # the first `up`: an empty account, no image pushed
    assert engine.outputs("llmctl-platform", "dev")["ecr_registry"] == REGISTRY
    config, objects = saved_delivery_config(engine, BP)
    assert config.delivery is not None and config.delivery.mode == "wheel"
    images = {image for _, _, image in pod_images(objects)}
    assert images and not ecr_images(images)
    assert {"Job", "RayService"} <= {obj["kind"] for obj in objects}
    assert [str(v) for v in check_images(objects, produced_images(config))] == []

    # `llmctl images build --push`, then `up` again: the pods run the image ECR has, by digest
    digest = push(aws, repository_name("dev", BP), code_tag())
    lifecycle().up(BP, region=aws, wait=False)
    config, objects = saved_delivery_config(engine, BP)
    built = f"{REGISTRY}/{repository_name('dev', BP)}@{digest}"
    assert config.delivery is not None and config.delivery.mode == "image" and config.delivery.image == built
    assert ecr_images({image for _, _, image in pod_images(objects)}) == {built}
    assert_in_ecr(aws, built)
    assert [str(v) for v in check_images(objects, produced_images(config))] == []


# ---- each invariant fails on a deliberately broken graph ----------------------------------------


def cut(graph: OrderGraph, dependent: str, *dependencies: str) -> OrderGraph:
    """The graph with the named resource's edges to the named dependencies dropped (all but its
    parent when none are named)."""
    source = named(graph, dependent)
    targets = [named(graph, d) for d in dependencies] or sorted(
        graph.dependencies(source) - {graph.nodes[source].parent or ""}
    )
    for target in targets:
        graph = graph.without_edge(source, target)
    return graph


BP = "llama2-inf2"  # Neuron, an internal load balancer, a RayService with caches


def reversed_stack_order() -> StackOrder:
    return StackOrder(create=["workload", "platform"], delete=["platform", "workload"])


def broken_routes() -> list[Violation]:
    # as before the fix: nothing on the cluster depends on the routes or the NAT
    graph = platform_graph(BP)
    kinds = ("RouteTableAssociation", "RouteTable", "NatGateway", "Eip", "InternetGateway")
    routing = [n.name for n in graph.nodes.values() if n.type.endswith(kinds)]
    for dependent in ("cluster-eks", "cluster-core"):
        graph = cut(graph, dependent, *routing)
    return check_order(session(BP, platform=graph))


def broken_karpenter() -> list[Violation]:
    graph = cut(platform_graph(BP), "nodepools-inferentia-inf2-nodeclass", "karpenter-release")
    return check_order(session(BP, platform=graph))


def broken_placement_group() -> list[Violation]:
    # a node class that names its group without waiting for it (nor outliving it)
    big = "llama31-405b-vllm-gpu"
    graph = cut(platform_graph(big), "nodepools-gpu-nvidia-efa-nodeclass", "placement-gpu-nvidia-efa")
    return check_order(session(big, platform=graph))


def broken_lb_controller() -> list[Violation]:
    graph = cut(platform_graph(BP), "ingress-internal-params", "ingress-lbc")
    return check_order(session(BP, platform=graph))


def broken_service_addons() -> list[Violation]:
    # as before the fix (issue 25, item 1): the add-ons wait for the cluster only
    graph = platform_graph(BP)
    for addon in ("observability-amazon-cloudwatch-observability", "observability-metrics-server"):
        graph = cut(graph, addon, "ingress-lbc")
    return check_order(session(BP, platform=graph))


def broken_device_plugins() -> list[Violation]:
    graph = cut(platform_graph(BP), "neuron-release")
    return check_order(session(BP, platform=graph))


def broken_stack_order() -> list[Violation]:
    spec = load_invariants()
    return check_order(session(BP), spec.model_copy(update={"stack_order": reversed_stack_order()}))


def broken_prerequisites() -> list[Violation]:
    graph = cut(workload_graph(BP), f"{BP}/{BP}")
    return check_order(session(BP, workload=graph))


def broken_image() -> list[Violation]:
    # the serving image of an empty ECR repository, with no delivery recorded in the config
    config = workload_config(BP)
    manifests = build_manifests(config, hf_token=TOKEN)
    missing = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/llmctl/dev/{BP}:0.0.0"
    ray = next(obj for obj in manifests if obj["kind"] == "RayService")
    ray["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = (
        missing
    )
    return check_images(manifests, produced_images(config))


# invariant -> (how to break it, what the message must name)
BROKEN: dict[str, tuple[Callable[[], list[Violation]], tuple[str, ...]]] = {
    "cluster-outlives-routes": (
        broken_routes,
        ("eks:index:Cluster cluster-eks", "network-nodes-usw2-az1-rta", "NatGateway network-nat"),
    ),
    "karpenter-outlives-node-pools": (
        broken_karpenter,
        (
            "EC2NodeClass nodepools-inferentia-inf2-nodeclass",
            "Release karpenter-release",
            "Queue karpenter-interruption",
            "Role karpenter-controller-role",
        ),
    ),
    "placement-group-outlives-its-node-class": (
        broken_placement_group,
        ("EC2NodeClass nodepools-gpu-nvidia-efa-nodeclass", "PlacementGroup placement-gpu-nvidia-efa"),
    ),
    "lb-controller-outlives-load-balancers": (
        broken_lb_controller,
        ("IngressClassParams ingress-internal-params", "Release ingress-lbc", "Role ingress-lbc-role"),
    ),
    "service-addons-after-lb-controller": (
        broken_service_addons,
        (
            "Addon observability-amazon-cloudwatch-observability",
            "Addon observability-metrics-server",
            "Release ingress-lbc",
        ),
    ),
    "device-plugins-need-the-cluster": (
        broken_device_plugins,
        ("Release neuron-release", "eks:index:Cluster cluster-eks", "NodeGroup cluster-core"),
    ),
    "kuberay-outlives-ray-services": (
        broken_stack_order,
        (
            f"RayService {BP}/{BP} (workload {BP})",
            "Release kuberay-release (platform)",
            "stack order (delete: platform then workload)",
        ),
    ),
    "serving-objects-outlive-their-prerequisites": (
        broken_prerequisites,
        (f"RayService {BP}/{BP}", f"Namespace {BP}", f"ServiceAccount {BP}/llmctl-serving"),
    ),
    "images-produced-before-use": (
        broken_image,
        (
            "RayService/llama2-inf2",
            "container 'ray-worker'",
            "dkr.ecr.us-west-2.amazonaws.com/llmctl/dev/llama2-inf2:0.0.0",
            "which no earlier step produced",
        ),
    ),
}


# the invariants the add-on registry adds (one per `after`): each has the generic broken-graph test below
ADDON_INVARIANTS = {f"addon-{row.key}-after-{key}": (row.key, key) for row in ADDONS for key in row.after}


def test_every_invariant_has_a_broken_graph_test() -> None:
    spec = load_invariants()
    assert set(BROKEN) | set(ADDON_INVARIANTS) == {i.id for i in spec.invariants} | {spec.images.id}


@pytest.mark.parametrize("invariant", sorted(ADDON_INVARIANTS))
def test_each_add_on_order_fails_when_the_add_on_stops_waiting(invariant: str) -> None:
    """An add-on whose resource no longer depends on anything (but its parent) breaks the order its
    registry row declares, in both phases, and the message names both add-ons' resources."""
    [spec] = [i for i in load_invariants().invariants if i.id == invariant]
    for name in (BP, "llama2-70b-vllm-gpu", "llama2-triton-vllm-gpu"):  # Neuron, NVIDIA pools, then KEDA
        graph = platform_graph(name)
        dependents = [n.name for n in graph.nodes.values() if spec.while_any[0].matches("platform", n)]
        if dependents:
            break
    assert dependents, f"{invariant}: no catalog platform installs {ADDON_INVARIANTS[invariant][0]}"
    required = [n.name for n in graph.nodes.values() if spec.requires[0].matches("platform", n)]
    assert required, f"{invariant}: {ADDON_INVARIANTS[invariant][1]} is not installed with it"
    for dependent in dependents:
        graph = cut(graph, dependent)
    violations = [v for v in check_order(session(name, platform=graph)) if v.invariant == invariant]
    assert violations, f"{invariant} did not notice"
    text = "\n".join(str(v) for v in violations)
    assert all(part in text for part in (*dependents, *required)), text[:2000]
    assert {v.phase for v in violations} == {"create", "delete"}


@pytest.mark.parametrize("invariant", sorted(BROKEN))
def test_each_invariant_fails_on_a_broken_graph_naming_the_resources(invariant: str) -> None:
    breaker, expected = BROKEN[invariant]
    violations = [v for v in breaker() if v.invariant == invariant]
    assert violations, f"{invariant} did not notice"
    text = "\n".join(str(v) for v in violations)
    for part in expected:
        assert part in text, f"{part!r} not named in:\n{text[:2000]}"
    if invariant != "images-produced-before-use":
        assert {v.phase for v in violations} == {"create", "delete"}


def test_the_load_balancer_invariant_crosses_stacks_by_the_stack_order() -> None:
    # llama2-inf2's RayService serves through an internal NLB the platform's controller manages
    spec = load_invariants()
    violations = check_order(session(BP), spec.model_copy(update={"stack_order": reversed_stack_order()}))
    lb = [str(v) for v in violations if v.invariant == "lb-controller-outlives-load-balancers"]
    assert any(
        f"RayService {BP}/{BP} (workload {BP})" in v and "Release ingress-lbc (platform)" in v for v in lb
    )


def test_a_required_resource_no_stack_has_is_named() -> None:
    graph = platform_graph(BP)
    queue = named(graph, "karpenter-interruption")
    nodes = [n for u, n in graph.nodes.items() if u != queue]
    violations = check_order(session(BP, platform=OrderGraph(nodes)))
    assert any(
        v.invariant == "karpenter-outlives-node-pools"
        and "need(s) the interruption queue, which no stack has" in v.message
        for v in violations
    )


def test_an_existing_vpc_brings_its_own_routes_and_the_rest_still_holds() -> None:
    config = PlatformConfig.for_blueprints(
        [load_blueprint(BP)],
        vpc={"existing_vpc_id": "vpc-123", "private_subnet_ids": ["subnet-a", "subnet-b"]},
    )
    graph = OrderGraph(nodes_from_registered(run_platform_offline(config, preview=False)))
    assert not [n for n in graph.nodes.values() if n.type == "aws:ec2/natGateway:NatGateway"]
    assert [str(v) for v in check_order(session(BP, platform=graph))] == []


def test_an_image_the_config_records_as_delivered_counts_as_produced() -> None:
    config = workload_config(BP)
    built = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/llmctl/dev/{BP}:0.0.0"
    assert built not in produced_images(config)
    assert built in produced_images(config.model_copy(update={"image": built}))
    pod = {"kind": "Job", "metadata": {"name": "mirror"}, "spec": {"template": {"spec": {
        "initContainers": [{"name": "fetch", "image": built}], "containers": [{"name": "main", "image": "python:3.11-slim"}],
    }}}}  # fmt: skip
    assert pod_images([pod]) == [("Job/mirror", "fetch", built), ("Job/mirror", "main", "python:3.11-slim")]
    [violation] = check_images([pod], produced_images(config))
    assert "Job/mirror container 'fetch' uses" in violation.message and built in violation.message
