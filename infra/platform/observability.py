"""Observability: the CloudWatch observability add-on (Container Insights, with accelerator metrics
from neuron-monitor / DCGM when enabled) and metrics-server, both as EKS managed add-ons."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from llmctl.infra.platform.cluster import Cluster
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.iam import ServiceAccount, managed_policy_output, pod_role
from llmctl.infra.platform.tags import tags_for

#: where the amazon-cloudwatch-observability add-on runs its agent, and the agent's service account
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"
CLOUDWATCH_SERVICE_ACCOUNT = "cloudwatch-agent"

CLOUDWATCH_ADDON = "amazon-cloudwatch-observability"
METRICS_SERVER_ADDON = "metrics-server"


def cloudwatch_configuration(neuron_metrics: bool) -> str:
    """Add-on configuration: enhanced Container Insights, accelerator metrics on or off."""
    return json.dumps(
        {
            "agent": {
                "config": {
                    "logs": {
                        "metrics_collected": {
                            "kubernetes": {
                                "enhanced_container_insights": True,
                                "accelerated_compute_metrics": neuron_metrics,
                            }
                        }
                    }
                }
            },
            "containerLogs": {"enabled": True},
        },
        sort_keys=True,
    )


class Observability(pulumi.ComponentResource):
    """CloudWatch observability and metrics-server add-ons (each behind a toggle).

    Both add-ons create Services, which the load balancer controller's webhook must admit: `after`
    carries the controller's release, so they wait for it on create and go before it on destroy."""

    addons: list[aws.eks.Addon]

    def __init__(
        self,
        name: str,
        config: PlatformConfig,
        cluster: Cluster,
        opts: pulumi.ResourceOptions | None = None,
        *,
        after: Sequence[pulumi.Resource] = (),
    ) -> None:
        super().__init__("llmctl:platform:Observability", name, None, opts)
        tags = tags_for(config)
        self.addons = []
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=[*cluster.ready, *after])
        if config.observability.cloudwatch:
            who = ServiceAccount(config.cluster_name, CLOUDWATCH_NAMESPACE, CLOUDWATCH_SERVICE_ACCOUNT)
            role = pod_role(f"{name}-cloudwatch-role", who, tags, pulumi.ResourceOptions(parent=self))
            attachments = [
                aws.iam.RolePolicyAttachment(
                    f"{name}-cloudwatch-{policy}",
                    role=role.name,
                    policy_arn=managed_policy_output(policy, self),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                for policy in ("CloudWatchAgentServerPolicy", "AWSXrayWriteOnlyAccess")
            ]
            self.addons.append(
                aws.eks.Addon(
                    f"{name}-{CLOUDWATCH_ADDON}",
                    cluster_name=config.cluster_name,
                    addon_name=CLOUDWATCH_ADDON,
                    configuration_values=cloudwatch_configuration(config.observability.neuron_metrics),
                    pod_identity_associations=[
                        aws.eks.AddonPodIdentityAssociationArgs(
                            role_arn=role.arn, service_account=CLOUDWATCH_SERVICE_ACCOUNT
                        )
                    ],
                    resolve_conflicts_on_create="OVERWRITE",
                    resolve_conflicts_on_update="OVERWRITE",
                    tags=tags,
                    opts=pulumi.ResourceOptions.merge(
                        after_nodes, pulumi.ResourceOptions(depends_on=attachments)
                    ),
                )
            )
        if config.observability.metrics_server:
            self.addons.append(
                aws.eks.Addon(
                    f"{name}-{METRICS_SERVER_ADDON}",
                    cluster_name=config.cluster_name,
                    addon_name=METRICS_SERVER_ADDON,
                    resolve_conflicts_on_create="OVERWRITE",
                    resolve_conflicts_on_update="OVERWRITE",
                    tags=tags,
                    opts=after_nodes,
                )
            )
        self.register_outputs({"addons": [a.addon_name for a in self.addons]})
