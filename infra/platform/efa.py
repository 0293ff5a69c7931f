"""EFA: the device plugin on the GPU pool's EFA-capable nodes, and the security-group rule EFA needs.

A platform with GPU pools gets both; they cost nothing until a pod asks for `vpc.amazonaws.com/efa`
(only a replica over several nodes does: infra/workload/builders/efa.py), and Karpenter then launches
its node with every EFA interface the instance type takes.

- The chart (aws/eks-charts stable/aws-efa-k8s-device-plugin, pinned in blueprints/data/versions.yaml)
  runs its DaemonSet only on the instance types it lists as EFA-capable (its own required node
  affinity on `node.kubernetes.io/instance-type`, and never on EKS Auto Mode nodes) and tolerates only
  `CriticalAddonsOnly` by itself; the GPU pool's nodes carry the `nvidia.com/gpu` taint, so the values
  add that toleration, and nothing else.
- The security group: EFA's OS-bypass traffic passes only between interfaces whose security group
  allows all traffic in from, and all traffic out to, the security group itself (EC2 User Guide, "Get
  started with EFA", step "Prepare an EFA-enabled security group"). The nodes Karpenter launches join
  the EKS cluster security group, whose EKS-made rules already allow all traffic in from itself and all
  traffic out to 0.0.0.0/0 (EKS User Guide, "Amazon EKS security group requirements"); the one rule EFA
  still lacks is all traffic out to the group itself, added here. (A second inbound self rule would be
  refused by EC2 as a duplicate.)
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from llmctl.blueprints.pools import GPU_TAINT
from llmctl.infra.platform.charts import release

#: the chart's resource, as the workload pods request it
EFA_RESOURCE = "vpc.amazonaws.com/efa"


def efa_values() -> dict[str, object]:
    """Chart values: tolerate the GPU pool's taint (the chart's node affinity picks the EFA types)."""
    return {"tolerations": [{"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect}]}


EGRESS_DESCRIPTION = "EFA: all traffic to the same security group (the nodes of a multi-node replica)"


class EfaDevicePlugin(pulumi.ComponentResource):
    """The EFA device plugin chart, and the cluster security group's egress rule to itself."""

    release: pulumi.Resource
    egress: aws.vpc.SecurityGroupEgressRule

    def __init__(
        self,
        name: str,
        *,
        cluster_security_group_id: pulumi.Input[str],
        tags: dict[str, str],
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:platform:EfaDevicePlugin", name, None, opts)
        self.egress = aws.vpc.SecurityGroupEgressRule(
            f"{name}-self-egress",
            security_group_id=cluster_security_group_id,
            referenced_security_group_id=cluster_security_group_id,
            ip_protocol="-1",  # every protocol and port
            description=EGRESS_DESCRIPTION,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.release = release(
            f"{name}-release",
            "aws_efa_device_plugin",
            namespace="kube-system",
            values=efa_values(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({})
