"""The platform program: every component, wired with explicit providers and dependencies, and the
stack outputs the workload stacks and the CLI read."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from llmctl.blueprints.pools import PoolSpec, pool
from llmctl.blueprints.versions import versions
from llmctl.infra.platform.cache import Cache
from llmctl.infra.platform.cluster import Cluster
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.efa import EfaDevicePlugin
from llmctl.infra.platform.ingress import Ingress
from llmctl.infra.platform.karpenter import Karpenter
from llmctl.infra.platform.keda import NAMESPACE as KEDA_NAMESPACE
from llmctl.infra.platform.keda import Keda
from llmctl.infra.platform.kuberay import NAMESPACE as KUBERAY_NAMESPACE
from llmctl.infra.platform.kuberay import KubeRay
from llmctl.infra.platform.manifests import pool_capacity_types, taint_dicts
from llmctl.infra.platform.network import Network
from llmctl.infra.platform.neuron import SCHEDULER_NAME, Neuron
from llmctl.infra.platform.nodepools import NodePools, karpenter_pools
from llmctl.infra.platform.nvidia import NvidiaDevicePlugin
from llmctl.infra.platform.observability import CLOUDWATCH_NAMESPACE, Observability
from llmctl.infra.platform.placement_groups import PlacementGroups
from llmctl.infra.platform.system_policies import KUBE_SYSTEM, allow_namespace
from llmctl.infra.platform.tags import tags_for


def node_pool_outputs(config: PlatformConfig) -> list[dict[str, Any]]:
    """The `node_pools` output: what workloads select and tolerate, per pool."""
    specs: list[PoolSpec] = [pool(name) for name in config.pools]
    return [
        {
            "name": spec.name,
            "labels": spec.node_labels(),
            "taints": taint_dicts(spec),
            "instance_families": list(spec.families),
            "instance_types": [config.core_nodes.instance_type]
            if spec.managed_by == "eks-nodegroup"
            else list(spec.instance_types),
            "capacity_types": list(pool_capacity_types(spec, config.capacity_reservations.get(spec.name))),
            "managed_by": spec.managed_by,
            "device_ownership": spec.device_ownership,
        }
        for spec in specs
    ]


def installed_versions(config: PlatformConfig) -> dict[str, Any]:
    """The `versions` output: every pinned version this config installs."""
    pinned = versions()
    installed = config.addons()
    return {
        "kubernetes": config.kubernetes_version,
        "ami_alias": pinned.ami["al2023_alias"].value,
        "charts": {row.key: pinned.charts[row.key].version for row in installed if row.kind == "chart"},
        "eks_addons": [row.key for row in installed if row.kind == "eks-addon"],
    }


def ecr_registry(account_id: str, region: str) -> str:
    """The ECR registry host of an account in a region."""
    return f"{account_id}.dkr.ecr.{region}.amazonaws.com"


def build_platform(config: PlatformConfig) -> None:
    """Register the whole platform for `config` (call inside a Pulumi program)."""
    aws_provider = aws.Provider("aws", region=config.region, default_tags={"tags": tags_for(config)})
    on_aws = pulumi.ResourceOptions(providers={"aws": aws_provider})
    network = Network("network", config, opts=on_aws)
    cluster = Cluster("cluster", config, network, opts=on_aws)
    kube = k8s.Provider("k8s", kubeconfig=cluster.kubeconfig, enable_server_side_apply=True)
    on_both = pulumi.ResourceOptions(providers={"aws": aws_provider, "kubernetes": kube})
    on_k8s = pulumi.ResourceOptions(providers={"kubernetes": kube})

    ingress = Ingress("ingress", config, cluster, network, opts=on_both)
    # The load balancer controller registers a mutating webhook for every new Service; until its
    # pods are ready, creating a Service fails ("no endpoints available for service
    # aws-load-balancer-webhook-service"; aws-load-balancer-controller issue 4140). The charts and
    # EKS add-ons that create Services therefore wait for the controller's release (and, on
    # destroy, go before it): Neuron, NVIDIA, KubeRay, KEDA, CloudWatch observability, metrics-server.
    after_lbc = [*cluster.ready, ingress.release]
    karpenter = Karpenter("karpenter", config, cluster, after=[ingress.release], opts=on_both)
    # the cluster placement group of the pool of replicas over several nodes, where the platform has it
    grouped = [spec for spec in karpenter_pools(config) if spec.placement is not None]
    placement = (
        PlacementGroups(
            "placement", grouped, cluster_name=config.cluster_name, tags=tags_for(config), opts=on_aws
        )
        if grouped
        else None
    )
    NodePools("nodepools", config, karpenter, placement, opts=on_k8s)
    installs = {row.key for row in config.addons()}  # the add-on registry decides what is installed
    if "neuron" in installs:
        Neuron("neuron", kubernetes_version=config.kubernetes_version, after=after_lbc, opts=on_k8s)
    if "nvidia_device_plugin" in installs:
        NvidiaDevicePlugin("nvidia", after=after_lbc, opts=on_k8s)
    if "aws_efa_device_plugin" in installs:
        EfaDevicePlugin(
            "efa",
            cluster_security_group_id=cluster.cluster_security_group_id,
            tags=tags_for(config),
            after=after_lbc,
            opts=on_both,
        )
    # strict NetworkPolicy mode: each platform namespace's allow-all policy before its pods
    # (kube-system's comes with the cluster, before the nodes: system_policies.py)
    policies = {
        namespace: allow_namespace(f"platform-{namespace}", namespace, on_k8s)
        for namespace in sorted({row.namespace for row in config.addons()} - {KUBE_SYSTEM})
    }
    KubeRay("kuberay", after=[*after_lbc, policies[KUBERAY_NAMESPACE]], opts=on_k8s)
    if "keda" in installs:
        Keda("keda", after=[*after_lbc, policies[KEDA_NAMESPACE]], opts=on_k8s)
    cloudwatch = [policies[CLOUDWATCH_NAMESPACE]] if CLOUDWATCH_NAMESPACE in policies else []
    Observability("observability", config, cluster, opts=on_aws, after=[ingress.release, *cloudwatch])
    cache = Cache("cache", config, opts=on_aws)

    pulumi.export("cluster_name", config.cluster_name)
    pulumi.export("region", config.region)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export("oidc_issuer", cluster.oidc_issuer)
    pulumi.export("oidc_provider_arn", cluster.oidc_provider_arn)
    pulumi.export("pod_identity", {"agent_addon": "eks-pod-identity-agent"})
    pulumi.export("api_access", config.endpoint.model_dump(mode="json"))  # kept by later `up`s and `down`s
    pulumi.export("vpc_id", network.vpc_id)
    # The AZ IDs of the subnets: later `up`s of the environment keep them (pinned_az_ids).
    pulumi.export("az_ids", [zone.id for zone in network.zones])
    pulumi.export("node_pools", node_pool_outputs(config))
    pulumi.export("neuron_scheduler", SCHEDULER_NAME)
    pulumi.export("ingress_class", ingress.ingress_class)
    pulumi.export("cache_bucket", cache.bucket.bucket)
    pulumi.export("versions", installed_versions(config))
    # Where `llmctl images build --push` puts the serving images (one repository per workload stack).
    identity = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=aws_provider))
    pulumi.export(
        "ecr_registry", identity.account_id.apply(lambda account: ecr_registry(account, config.region))
    )
