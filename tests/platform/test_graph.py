"""The platform program's resource graph under Pulumi mocks, for every catalog blueprint."""

from __future__ import annotations

import json

import pytest
from platform_support import Graph, graph_for

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.pools import pool
from llmctl.blueprints.versions import versions
from llmctl.errors import BlueprintError
from llmctl.infra.plan.policy import check_policy, errors, taggable
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.tags import CLUSTER_TAG, STACK_TAG

NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _graph(name: str) -> tuple[PlatformConfig, Graph]:
    config = PlatformConfig.for_blueprints([load_blueprint(name)], stack="ci")
    return config, Graph(graph_for(config))


@pytest.mark.parametrize("name", catalog_names())
def test_catalog_blueprint_graph_has_its_pools_and_passes_policy(name: str) -> None:
    config, graph = _graph(name)
    blueprint = load_blueprint(name)
    nodepools = {r.inputs["metadata"]["name"]: r for r in graph.of(NODEPOOL)}
    expected = {spec for spec in config.pools if pool(spec).managed_by == "karpenter"}
    assert set(nodepools) == expected
    assert "default" in nodepools
    assert {
        "llmctl:platform:Network", "llmctl:platform:Cluster", "llmctl:platform:Karpenter", "llmctl:platform:NodePools",
        "llmctl:platform:KubeRay", "llmctl:platform:Ingress", "llmctl:platform:Observability", "llmctl:platform:Cache",
    } <= graph.types()  # fmt: skip
    charts = {r.inputs["name"] for r in graph.of(RELEASE)}
    assert ("neuron" in charts) == blueprint.is_neuron
    assert ("nvidia-device-plugin" in charts) == (blueprint.compute.accelerator == "nvidia")
    assert [v for v in errors(check_policy(graph.resources))] == []


def test_every_taggable_aws_resource_is_tagged(all_pools_graph: Graph) -> None:
    checked = 0
    for res in all_pools_graph.resources:
        if res.type.startswith(("aws:", "eks:")) and taggable(res.type):
            checked += 1
            assert res.inputs["tags"][STACK_TAG] == "dev", res.name
            assert res.inputs["tags"][CLUSTER_TAG] == "llmctl-dev", res.name
    assert checked > 30


def test_user_tags_reach_resources() -> None:
    config = PlatformConfig.for_blueprints([], tags={"team": "ml", STACK_TAG: "ignored"})
    vpc = Graph(graph_for(config)).named("network-vpc")
    assert vpc.inputs["tags"]["team"] == "ml"
    assert vpc.inputs["tags"][STACK_TAG] == "dev"


def test_network_layout_and_discovery_tags(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    assert graph.named("network-vpc").inputs["cidrBlock"] == "10.1.0.0/21"
    assert graph.named("network-pods-cidr").inputs["cidrBlock"] == "100.64.0.0/16"
    subnets = {r.name: r for r in graph.of("aws:ec2/subnet:Subnet")}
    # the mocks' zones a..d carry usw2-az1..4; the us-west-2 preference is az4, az1
    assert {s.inputs["availabilityZone"] for s in subnets.values()} == {"us-west-2a", "us-west-2d"}
    nodes = [s for n, s in subnets.items() if "-nodes-" in n]
    assert len(nodes) == 2 and all(s.inputs["tags"]["karpenter.sh/discovery"] == "llmctl-dev" for s in nodes)
    assert all(graph.depends(s, graph.named("network-pods-cidr")) for s in nodes)
    assert all(
        s.inputs["tags"]["kubernetes.io/role/elb"] == "1" for n, s in subnets.items() if "-public-" in n
    )
    assert all(
        s.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
        for n, s in subnets.items()
        if "-private-" in n
    )
    assert len(graph.of("aws:ec2/natGateway:NatGateway")) == 1
    sg_tag = graph.named("cluster-cluster-sg-discovery")
    assert (
        sg_tag.inputs["key"] == "karpenter.sh/discovery"
        and sg_tag.inputs["resourceId"] == "sg-llmctl-dev-cluster"
    )


def test_existing_vpc_creates_no_network_resources() -> None:
    config = PlatformConfig.for_blueprints(
        [], vpc={"existing_vpc_id": "vpc-123", "private_subnet_ids": ["subnet-a", "subnet-b"]}
    )
    graph = Graph(graph_for(config))
    assert not graph.of("aws:ec2/vpc:Vpc") and not graph.of("aws:ec2/subnet:Subnet")
    tags = graph.of("aws:ec2/tag:Tag")
    assert {t.inputs["resourceId"] for t in tags} >= {"subnet-a", "subnet-b"}
    assert graph.of("eks:index:Cluster")[0].inputs["vpcId"] == "vpc-123"


def test_cluster_inputs(all_pools_graph: Graph) -> None:
    cluster = all_pools_graph.of("eks:index:Cluster")[0].inputs
    assert cluster["name"] == "llmctl-dev"
    assert cluster["version"] == versions().eks.kubernetes_version.value
    assert cluster["authenticationMode"] == "API"
    # The identity creating the cluster is made admin by EKS itself (see test_aws_fields).
    assert "accessEntries" not in cluster
    assert cluster["encryptionConfigKeyArn"].startswith("arn:aws:kms:")
    assert set(cluster["enabledClusterLogTypes"]) == {
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    }
    assert cluster["skipDefaultNodeGroup"] is True and cluster["createOidcProvider"] is True
    assert cluster["endpointPrivateAccess"] is True
    key = all_pools_graph.named("cluster-secrets-key").inputs
    assert key["enableKeyRotation"] is True


def test_private_endpoint_and_cidrs() -> None:
    private = PlatformConfig.for_blueprints([])  # the default: nobody outside the VPC
    inputs = Graph(graph_for(private)).of("eks:index:Cluster")[0].inputs
    assert inputs["endpointPublicAccess"] is False and "publicAccessCidrs" not in inputs
    with pytest.raises(BlueprintError) as refused:  # public needs its ranges named
        PlatformConfig.for_blueprints([], endpoint={"public": True})
    assert refused.value.problems == [
        (
            "endpoint",
            "a public endpoint needs public_cidrs (the ranges that run llmctl and kubectl, e.g. "
            "'203.0.113.7/32'); or set public to false (private)",
        )
    ]
    narrow = PlatformConfig.for_blueprints([], endpoint={"public": True, "public_cidrs": ["203.0.113.0/24"]})
    graph = Graph(graph_for(narrow))
    assert graph.of("eks:index:Cluster")[0].inputs["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert not [v for v in check_policy(graph.resources) if v.rule == "open-endpoint"]


def test_core_node_group_and_addon_order(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    group = graph.named("cluster-core")
    assert group.inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert group.inputs["labels"] == {"llmctl.dev/role": "core", "workload": "rayhead"}
    assert group.inputs["launchTemplate"]["id"] == "cluster-core-lt-id"
    template = graph.named("cluster-core-lt").inputs
    assert template["metadataOptions"]["httpTokens"] == "required"
    addons = {r.inputs["addonName"]: r for r in graph.of("aws:eks/addon:Addon")}
    assert set(addons) >= {"vpc-cni", "kube-proxy", "eks-pod-identity-agent", "coredns", "aws-ebs-csi-driver"}
    for early in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent"):
        assert graph.depends(group, addons[early])
    for late in ("coredns", "aws-ebs-csi-driver"):
        assert graph.depends(addons[late], group)
    ebs = addons["aws-ebs-csi-driver"].inputs["podIdentityAssociations"][0]
    assert ebs["serviceAccount"] == "ebs-csi-controller-sa"


def test_vpc_cni_enforces_network_policies(all_pools_graph: Graph) -> None:
    """The workloads' NetworkPolicies are enforced on EKS only by the VPC CNI's network policy agent,
    which the add-on runs only with `enableNetworkPolicy` in its configuration values."""
    addons = {r.inputs["addonName"]: r for r in all_pools_graph.of("aws:eks/addon:Addon")}
    assert json.loads(addons["vpc-cni"].inputs["configurationValues"])["enableNetworkPolicy"] == "true"


def test_karpenter_iam_queue_and_release_dependencies(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    release = graph.named("karpenter-release")
    assert release.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert release.inputs["version"] == versions().charts["karpenter"].version
    settings = release.inputs["values"]["settings"]
    assert settings["clusterName"] == "llmctl-dev"
    assert settings["interruptionQueue"].startswith("llmctl-dev-karpenter-")  # unique per creation
    # the controller computes allocatable with the settings `llmctl validate` assumes
    from llmctl.blueprints.allocatable import karpenter_model

    controller = karpenter_model().controller
    assert settings["vmMemoryOverheadPercent"] == controller.vm_memory_overhead_percent == 0.075
    assert settings["reservedENIs"] == str(controller.reserved_enis) == "0"
    assert settings["featureGates"] == {"reservedCapacity": True}
    for dep in ("karpenter-controller-policy", "karpenter-pod-identity", "karpenter-interruption-policy",
                "karpenter-node-access", "cluster-core"):  # fmt: skip
        assert graph.depends(release, graph.named(dep)), dep
    assert graph.named("karpenter-node-access").inputs["type"] == "EC2_LINUX"
    identity = graph.named("karpenter-pod-identity").inputs
    assert identity["serviceAccount"] == "karpenter" and identity["namespace"] == "kube-system"
    trust = json.loads(graph.named("karpenter-controller-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"]["Service"] == "pods.eks.amazonaws.com"
    policy = json.loads(graph.named("karpenter-controller-policy").inputs["policy"])
    actions = {
        a
        for s in policy["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"ec2:RunInstances", "ec2:TerminateInstances", "iam:PassRole", "sqs:ReceiveMessage"} <= actions
    assert graph.named("karpenter-interruption").inputs["messageRetentionSeconds"] == 300
    patterns = [json.loads(r.inputs["eventPattern"]) for r in graph.of("aws:cloudwatch/eventRule:EventRule")]
    assert {p["detail-type"][0] for p in patterns} == {
        "AWS Health Event", "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }  # fmt: skip
    assert len(graph.of("aws:cloudwatch/eventTarget:EventTarget")) == 5


def test_nodepools_depend_on_release_and_their_nodeclass(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    release = graph.named("karpenter-release")
    classes = {r.inputs["metadata"]["name"]: r for r in graph.of(NODECLASS)}
    for nodepool in graph.of(NODEPOOL):
        name = nodepool.inputs["metadata"]["name"]
        assert graph.depends(nodepool, release) and graph.depends(nodepool, classes[name])
        assert graph.depends(classes[name], release)
        assert classes[name].inputs["spec"]["role"] == "llmctl-dev-karpenter-node"
    assert set(classes) == {
        "default",
        "ray-head",
        "inferentia-inf2",
        "trainium-trn1",
        "trainium-trn2",
        "gpu-nvidia",
        "gpu-nvidia-efa",
    }


def test_device_plugins_tolerate_their_taints(all_pools_graph: Graph) -> None:
    neuron = all_pools_graph.named("neuron-release").inputs
    assert neuron["chart"] == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    values = neuron["values"]
    assert values["devicePlugin"]["enabled"] is True
    assert (
        values["scheduler"]["enabled"] is True and values["scheduler"]["customScheduler"]["enabled"] is True
    )
    assert values["devicePlugin"]["tolerations"][0]["key"] == "aws.amazon.com/neuron"
    nvidia = all_pools_graph.named("nvidia-release").inputs
    assert nvidia["repositoryOpts"]["repo"] == versions().charts["nvidia_device_plugin"].repository
    assert nvidia["values"]["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_ingress_observability_and_cache(all_pools_graph: Graph) -> None:
    graph = all_pools_graph
    lbc = graph.named("ingress-lbc")
    assert graph.depends(lbc, graph.named("ingress-lbc-policy")) and graph.depends(
        lbc, graph.named("ingress-lbc-pod-identity")
    )
    ingress_class = graph.named("ingress-internal-class")
    assert graph.depends(ingress_class, lbc)
    assert graph.named("ingress-internal-params").inputs["spec"]["scheme"] == "internal"
    addons = {r.inputs["addonName"] for r in graph.of("aws:eks/addon:Addon")}
    assert {"amazon-cloudwatch-observability", "metrics-server"} <= addons
    cw = graph.named("observability-amazon-cloudwatch-observability").inputs
    assert '"accelerated_compute_metrics": true' in cw["configurationValues"]
    block = graph.named("cache-public-access-block").inputs
    assert all(
        block[k] is True
        for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    assert graph.depends(graph.named("cache-encryption"), graph.named("cache-bucket"))
    # over TLS only, versioned (an overwritten object can be restored), old versions expired
    [deny] = json.loads(graph.named("cache-tls-only").inputs["policy"])["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "s3:*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert graph.named("cache-versioning").inputs["versioningConfiguration"] == {"status": "Enabled"}
    [rule] = graph.named("cache-lifecycle").inputs["rules"]
    assert rule["status"] == "Enabled" and rule["noncurrentVersionExpiration"]["noncurrentDays"] == 30
    assert graph.depends(graph.named("cache-lifecycle"), graph.named("cache-versioning"))
    # no bucket-wide role: each workload makes its own, granted its own prefixes
    assert not [r for r in graph.of("aws:iam/role:Role") if "cache" in r.name]


def test_observability_toggles_off() -> None:
    config = PlatformConfig.for_blueprints([], observability={"cloudwatch": False, "metrics_server": False})
    addons = {r.inputs["addonName"] for r in Graph(graph_for(config)).of("aws:eks/addon:Addon")}
    assert "amazon-cloudwatch-observability" not in addons and "metrics-server" not in addons


def test_kubeconfig_provider_is_secret(all_pools_graph: Graph) -> None:
    provider = all_pools_graph.of("pulumi:providers:kubernetes")[0]
    assert "kubeconfig" in provider.secret_inputs
    assert graph_depends_on_cluster(all_pools_graph, provider)


def graph_depends_on_cluster(graph: Graph, res) -> bool:  # type: ignore[no-untyped-def]
    return graph.depends(res, graph.of("eks:index:Cluster")[0])


def test_exports(exports) -> None:  # type: ignore[no-untyped-def]
    config = PlatformConfig.for_blueprints([load_blueprint("llama2-inf2")])
    out = exports(config)
    assert out["cluster_name"] == "llmctl-dev" and out["region"] == "us-west-2"
    assert "clusters" in out["kubeconfig"]
    assert out["oidc_issuer"].startswith("oidc.eks.us-west-2")
    names = [p["name"] for p in out["node_pools"]]
    assert names == ["core", "default", "ray-head", "inferentia-inf2"]
    inf2 = out["node_pools"][3]
    assert inf2["taints"] == [{"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}]
    assert inf2["labels"]["karpenter.sh/nodepool"] == "inferentia-inf2" and inf2["instance_families"] == [
        "inf2"
    ]
    assert out["cache_bucket"]
    assert out["ecr_registry"] == "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    from llmctl.infra.workload.config import PlatformFacts

    assert PlatformFacts.from_outputs(out).ecr_registry == out["ecr_registry"]
    assert out["versions"]["charts"]["karpenter"] == versions().charts["karpenter"].version
    assert "nvidia_device_plugin" not in out["versions"]["charts"] and "neuron" in out["versions"]["charts"]
