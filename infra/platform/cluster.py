"""Cluster: the EKS control plane (pulumi-eks), its KMS key, access entries, logging, the managed
core node group (AL2023, IMDSv2) and the managed add-ons (VPC CNI, kube-proxy, Pod Identity agent,
CoreDNS, EBS CSI)."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from llmctl.blueprints.pools import CORE_POOL, pool
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.iam import (
    CNI_POLICY,
    ServiceAccount,
    managed_policy_output,
    node_role,
    pod_role,
    principal_for_access_entry,
)
from llmctl.infra.platform.manifests import DISCOVERY_TAG, METADATA_HOP_LIMIT
from llmctl.infra.platform.network import Network
from llmctl.infra.platform.system_policies import KUBE_SYSTEM, allow_namespace
from llmctl.infra.platform.tags import tags_for

LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# Add-ons the nodes need to become Ready, then those that need nodes to run on.
ADDONS_BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
ADDONS_AFTER_NODES = ("coredns",)
EBS_CSI = "aws-ebs-csi-driver"
VPC_CNI = "vpc-cni"
#: the service accounts of the add-ons that get a Pod Identity role (kube-system)
CNI_SERVICE_ACCOUNT = "aws-node"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"


def ebs_csi_configuration(cluster_name: str) -> str:
    """The EBS CSI add-on's configuration values: `controller.k8sTagClusterId` (the chart's key, passed
    to the controller as `--k8s-tag-cluster-id`) makes the driver tag every volume and snapshot it
    creates `kubernetes.io/cluster/<cluster>=owned` (and `KubernetesCluster=<cluster>`), the tags the
    teardown sweep finds them by; without it they carry only `ebs.csi.aws.com/cluster=true`."""
    return json.dumps({"controller": {"k8sTagClusterId": cluster_name}}, sort_keys=True)


def vpc_cni_configuration() -> str:
    """The VPC CNI add-on's configuration values: `enableNetworkPolicy` turns on its network policy
    agent, without which the workload namespaces' NetworkPolicies (default deny, docs/security.md)
    are accepted by the API server and enforced by nothing; `env.NETWORK_POLICY_ENFORCING_MODE:
    strict` makes a new pod start default-deny, not default-allow, until its policies are programmed
    (the add-on's values are its chart's: aws/amazon-vpc-cni-k8s v1.23.0
    ``charts/aws-vpc-cni/values.yaml`` ``env.NETWORK_POLICY_ENFORCING_MODE``, default ``standard``;
    EKS user guide ``cni-network-policy-configure``, step 1). Strict mode also denies every pod no
    policy selects: the platform's namespaces get theirs (`system_policies.py`)."""
    return json.dumps(
        {"enableNetworkPolicy": "true", "env": {"NETWORK_POLICY_ENFORCING_MODE": "strict"}}, sort_keys=True
    )


def admin_principals(config: PlatformConfig) -> list[str]:
    """The configured admins (assumed-role session ARNs mapped to their role), without duplicates.

    The identity that creates the cluster is not among them: pulumi-eks creates the cluster with
    `bootstrapClusterCreatorAdminPermissions`, so EKS already gives that principal an admin access
    entry, and a second entry for it fails with ResourceInUseException (409).
    """
    return list(dict.fromkeys(principal_for_access_entry(arn) for arn in config.admin_principal_arns))


class Cluster(pulumi.ComponentResource):
    """The EKS cluster and everything it needs before workloads can be scheduled."""

    name: str
    eks_cluster: eks.Cluster
    kubeconfig: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    core_node_group: aws.eks.NodeGroup
    system_policy: pulumi.Resource
    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, config: PlatformConfig, network: Network, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmctl:platform:Cluster", name, None, opts)
        self.name = config.cluster_name
        tags = tags_for(config)
        child = pulumi.ResourceOptions(parent=self)

        key = aws.kms.Key(
            f"{name}-secrets-key",
            description=f"EKS secrets encryption for {config.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            tags=tags,
            opts=child,
        )
        aws.kms.Alias(
            f"{name}-secrets-key-alias",
            name=f"alias/{config.cluster_name}-secrets",
            target_key_id=key.key_id,
            opts=child,
        )

        # EKS gets the use of the key through a grant made with the caller's permissions (the
        # default key policy defers to IAM). pulumi-eks creates the cluster's service role; a role
        # passed in would be a resource reference, which Pulumi's mocks cannot rehydrate.
        access_entries = {
            f"admin-{index}": eks.AccessEntryArgs(
                principal_arn=principal,
                access_policies={
                    "cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    )
                },
            )
            for index, principal in enumerate(admin_principals(config))
        }
        self.eks_cluster = eks.Cluster(
            f"{name}-eks",
            name=config.cluster_name,
            version=config.kubernetes_version,
            vpc_id=network.vpc_id,
            private_subnet_ids=network.control_plane_subnet_ids,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries or None,
            encryption_config_key_arn=key.arn,
            enabled_cluster_log_types=LOG_TYPES,
            endpoint_private_access=True,
            endpoint_public_access=config.endpoint.public,
            public_access_cidrs=config.endpoint.public_cidrs if config.endpoint.public else None,
            create_oidc_provider=True,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            # Managed add-ons are created below as aws.eks.Addon, in the order nodes need them.
            bootstrap_self_managed_addons=False,
            use_default_vpc_cni=True,
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=False),
            tags=tags,
            cluster_tags=tags,
            # Created after, deleted before the subnets' routes and NAT: everything that runs on the
            # cluster depends on it, so the way out to the AWS APIs outlives all of it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=network.routing),
        )
        cluster_dep = pulumi.ResourceOptions(parent=self, depends_on=[self.eks_cluster])
        self.kubeconfig = pulumi.Output.secret(self.eks_cluster.kubeconfig_json)
        self.oidc_issuer = self.eks_cluster.oidc_issuer
        self.oidc_provider_arn = self.eks_cluster.oidc_provider_arn
        self.cluster_security_group_id = self.eks_cluster.cluster_security_group_id
        # Karpenter nodes join the EKS-created cluster security group, like managed nodes.
        aws.ec2.Tag(
            f"{name}-cluster-sg-discovery",
            resource_id=self.cluster_security_group_id,
            key=DISCOVERY_TAG,
            value=config.cluster_name,
            opts=cluster_dep,
        )

        others = [
            self._addon(name, addon, config, cluster_dep) for addon in ADDONS_BEFORE_NODES if addon != VPC_CNI
        ]
        # the CNI's credentials come through the Pod Identity agent: the agent's add-on first
        early = [
            self._cni(
                name,
                config,
                pulumi.ResourceOptions.merge(cluster_dep, pulumi.ResourceOptions(depends_on=others)),
            ),
            *others,
        ]
        # strict NetworkPolicy mode (vpc_cni_configuration): kube-system's pods (CoreDNS first) need a
        # policy before they start, so before the nodes they run on
        early_kube = k8s.Provider(
            f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True, opts=cluster_dep
        )
        self.system_policy = allow_namespace(
            f"{name}-kube-system",
            KUBE_SYSTEM,
            pulumi.ResourceOptions(parent=self, provider=early_kube, depends_on=[self.eks_cluster]),
        )
        self.core_node_group = self._core_nodes(name, config, network, [*early, self.system_policy])
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=[self.core_node_group])
        late = [self._addon(name, addon, config, after_nodes) for addon in ADDONS_AFTER_NODES]
        late.append(self._ebs_csi(name, config, after_nodes))
        self.ready = [self.core_node_group, *early, *late]
        self.register_outputs(
            {"name": self.name, "oidc_issuer": self.oidc_issuer, "kubeconfig": self.kubeconfig}
        )

    def _addon(
        self,
        name: str,
        addon: str,
        config: PlatformConfig,
        opts: pulumi.ResourceOptions,
        pod_identity: list[aws.eks.AddonPodIdentityAssociationArgs] | None = None,
        configuration_values: str | None = None,
    ) -> aws.eks.Addon:
        return aws.eks.Addon(
            f"{name}-addon-{addon}",
            cluster_name=config.cluster_name,
            addon_name=addon,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags_for(config),
            pod_identity_associations=pod_identity,
            configuration_values=configuration_values,
            opts=opts,
        )

    def _addon_role(
        self, name: str, config: PlatformConfig, service_account: str, policy: str
    ) -> tuple[aws.iam.Role, aws.iam.RolePolicyAttachment]:
        """A Pod Identity role for one kube-system service account, with one AWS-managed policy."""
        child = pulumi.ResourceOptions(parent=self)
        who = ServiceAccount(config.cluster_name, "kube-system", service_account)
        role = pod_role(f"{name}-role", who, tags_for(config), child)
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-policy", role=role.name, policy_arn=managed_policy_output(policy, self), opts=child
        )
        return role, attachment

    def _cni(self, name: str, config: PlatformConfig, opts: pulumi.ResourceOptions) -> aws.eks.Addon:
        """The VPC CNI with its own Pod Identity role (AmazonEKS_CNI_Policy), not the node role's."""
        role, attachment = self._addon_role(f"{name}-vpc-cni", config, CNI_SERVICE_ACCOUNT, CNI_POLICY)
        return self._addon(
            name,
            VPC_CNI,
            config,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[attachment])),
            [aws.eks.AddonPodIdentityAssociationArgs(role_arn=role.arn, service_account=CNI_SERVICE_ACCOUNT)],
            # its network policy agent on: EKS accepts NetworkPolicies without it but enforces none
            vpc_cni_configuration(),
        )

    def _ebs_csi(self, name: str, config: PlatformConfig, opts: pulumi.ResourceOptions) -> aws.eks.Addon:
        role, attachment = self._addon_role(
            f"{name}-ebs-csi", config, EBS_CSI_SERVICE_ACCOUNT, "service-role/AmazonEBSCSIDriverPolicy"
        )
        return self._addon(
            name,
            EBS_CSI,
            config,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[attachment])),
            [
                aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=role.arn, service_account=EBS_CSI_SERVICE_ACCOUNT
                )
            ],
            ebs_csi_configuration(config.cluster_name),
        )

    def _core_nodes(
        self, name: str, config: PlatformConfig, network: Network, addons: list[pulumi.Resource]
    ) -> aws.eks.NodeGroup:
        spec = pool(CORE_POOL)
        tags = tags_for(config)
        child = pulumi.ResourceOptions(parent=self)
        role, attachments = node_role(f"{name}-core-node", tags=tags, opts=child)
        template = aws.ec2.LaunchTemplate(
            f"{name}-core-lt",
            description=f"llmctl core nodes of {config.cluster_name}",
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",
                "http_put_response_hop_limit": METADATA_HOP_LIMIT,
            },
            block_device_mappings=[
                {
                    "device_name": "/dev/xvda",
                    "ebs": {
                        "volume_size": spec.root_volume_gib,
                        "volume_type": "gp3",
                        "encrypted": "true",
                        "delete_on_termination": "true",
                    },
                }
            ],
            tag_specifications=[
                {
                    "resource_type": "instance",
                    "tags": tags_for(config, {"Name": f"{config.cluster_name}-core"}),
                },
                {"resource_type": "volume", "tags": tags},
            ],
            update_default_version=True,
            tags=tags,
            opts=child,
        )
        return aws.eks.NodeGroup(
            f"{name}-core",
            cluster_name=config.cluster_name,
            node_group_name=f"{config.cluster_name}-core",
            node_role_arn=role.arn,
            subnet_ids=network.node_subnet_ids,
            ami_type="AL2023_x86_64_STANDARD",
            capacity_type="ON_DEMAND",
            instance_types=[config.core_nodes.instance_type],
            labels=dict(spec.labels),
            scaling_config={
                "desired_size": config.core_nodes.size,
                "min_size": config.core_nodes.size,
                "max_size": config.core_nodes.max_size,
            },
            update_config={"max_unavailable": 1},
            launch_template={"id": template.id, "version": template.latest_version.apply(lambda v: str(v))},
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.eks_cluster, *network.routing, *attachments, *addons]
            ),
        )
