"""The add-on registry: every Helm chart and EKS add-on the platform installs, one typed row each.

A row says what the add-on is (a chart pinned in `blueprints/data/versions.yaml`, or an EKS managed
add-on whose version EKS picks for the cluster's Kubernetes version), when the platform installs it,
in which namespace, what it must come after, which platform module installs it and which upstream
values file its Helm values are checked against. Everything that lists add-ons reads this table:
the platform program (what to install), `PlatformConfig.chart_keys` (the pin checks of `doctor` and
`up`), the `versions` stack output, the create/delete-order invariants (an add-on is created after,
and deleted before, what it comes after) and the conformance tests (the upstream values files).
Adding a chart is one row here plus its component (docs/contributing.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from llmctl.blueprints import versions as pinned
from llmctl.blueprints.pools import NEURON_ACCELERATORS

AddonKind = Literal["chart", "eks-addon"]
# When the platform installs an add-on: always, when one of its pools has that accelerator family,
# when the observability setting of the same name is on, or when a workload scales a Deployment on
# its queue (KEDA).
Condition = Literal["always", "neuron-pools", "nvidia-pools", "cloudwatch", "metrics-server", "queue-scaling"]
# Accelerators whose pools bring the Neuron chart (and its custom scheduler): NEURON_ACCELERATORS.
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
EKS_ADDON = "aws:eks/addon:Addon"


class Addon(BaseModel):
    """One platform add-on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(
        description="The add-on's key: its `charts` key in blueprints/data/versions.yaml (a chart) or "
        "its EKS add-on name (an EKS add-on)."
    )
    kind: AddonKind = Field(description="A Helm chart, or an EKS managed add-on.")
    version_source: Literal["versions.yaml", "eks"] = Field(
        description="Where its version is pinned: `charts.<key>` of versions.yaml, or EKS's default "
        "version of the add-on for the cluster's Kubernetes version."
    )
    condition: Condition = Field(description="When the platform installs it.")
    namespace: str = Field(description="The namespace its workloads run in.")
    after: tuple[str, ...] = Field(
        (),
        description="Keys of the add-ons it must be created after (and deleted before): the order "
        "invariants check the platform graph for each.",
    )
    component: str = Field(
        description="The module of llmctl.infra.platform that installs it (e.g. `karpenter`)."
    )
    upstream_values: str | None = Field(
        None,
        description="A chart's upstream values.yaml (a file of tests/conformance/upstream_manifest.yaml) "
        "its Helm values are checked against; None when llmctl sets no values.",
    )
    upstream_chart: str | None = Field(
        None,
        description="A chart's upstream Chart.yaml (its subchart conditions are valid value keys).",
    )

    def installed(
        self,
        accelerators: Iterable[str],
        *,
        cloudwatch: bool,
        metrics_server: bool,
        queue_scaling: bool = False,
    ) -> bool:
        """Whether a platform with pools of these accelerator families (and these observability
        and autoscaling settings) installs this add-on."""
        families = set(accelerators)
        return {
            "always": True,
            "neuron-pools": bool(families & set(NEURON_ACCELERATORS)),
            "nvidia-pools": "nvidia" in families,
            "cloudwatch": cloudwatch,
            "metrics-server": metrics_server,
            "queue-scaling": queue_scaling,
        }[self.condition]

    def selector(self) -> tuple[str, dict[str, str]]:
        """How its resource shows in the platform's graph: its Pulumi type token and input globs,
        as an order-invariant selector takes them."""
        if self.kind == "eks-addon":
            return EKS_ADDON, {"addonName": self.key}
        return HELM_RELEASE, {"chart": f"*{self.chart_name()}"}

    def chart_name(self) -> str:
        """The chart's name in its repository (versions.yaml); an EKS add-on's name."""
        return pinned.versions().charts[self.key].chart if self.kind == "chart" else self.key


_BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
_LBC = "aws_load_balancer_controller"

# In install order; `chart_keys()` and the `versions` output list them in this order.
ADDONS: tuple[Addon, ...] = (
    # charts (versions.yaml `charts`)
    Addon(key="karpenter", kind="chart", version_source="versions.yaml", condition="always",
          namespace="kube-system", after=("karpenter_crd", _LBC), component="karpenter",
          upstream_values="karpenter/values.yaml", upstream_chart="karpenter/Chart.yaml"),
    Addon(key="karpenter_crd", kind="chart", version_source="versions.yaml", condition="always",
          namespace="kube-system", component="karpenter"),
    Addon(key="kuberay_operator", kind="chart", version_source="versions.yaml", condition="always",
          namespace="kuberay-operator", after=(_LBC,), component="kuberay",
          upstream_values="kuberay/values.yaml", upstream_chart="kuberay/Chart.yaml"),
    Addon(key=_LBC, kind="chart", version_source="versions.yaml", condition="always",
          namespace="kube-system", component="ingress",
          upstream_values="aws-load-balancer-controller/values.yaml",
          upstream_chart="aws-load-balancer-controller/Chart.yaml"),
    Addon(key="neuron", kind="chart", version_source="versions.yaml", condition="neuron-pools",
          namespace="kube-system", after=(_LBC,), component="neuron",
          upstream_values="neuron-helm-chart/values.yaml", upstream_chart="neuron-helm-chart/Chart.yaml"),
    Addon(key="nvidia_device_plugin", kind="chart", version_source="versions.yaml", condition="nvidia-pools",
          namespace="kube-system", after=(_LBC,), component="nvidia",
          upstream_values="nvidia-device-plugin/values.yaml", upstream_chart="nvidia-device-plugin/Chart.yaml"),
    Addon(key="aws_efa_device_plugin", kind="chart", version_source="versions.yaml", condition="nvidia-pools",
          namespace="kube-system", after=(_LBC,), component="efa",
          upstream_values="aws-efa-k8s-device-plugin/values.yaml",
          upstream_chart="aws-efa-k8s-device-plugin/Chart.yaml"),
    Addon(key="keda", kind="chart", version_source="versions.yaml", condition="queue-scaling",
          namespace="keda", after=(_LBC,), component="keda",
          upstream_values="keda/values.yaml", upstream_chart="keda/Chart.yaml"),
    # EKS managed add-ons (versions chosen by EKS per Kubernetes version)
    *(
        Addon(key=name, kind="eks-addon", version_source="eks", condition="always",
              namespace="kube-system", component="cluster")
        for name in _BEFORE_NODES
    ),
    Addon(key="coredns", kind="eks-addon", version_source="eks", condition="always",
          namespace="kube-system", after=_BEFORE_NODES, component="cluster"),
    Addon(key="aws-ebs-csi-driver", kind="eks-addon", version_source="eks", condition="always",
          namespace="kube-system", after=_BEFORE_NODES, component="cluster"),
    Addon(key="amazon-cloudwatch-observability", kind="eks-addon", version_source="eks",
          condition="cloudwatch", namespace="amazon-cloudwatch", after=(_LBC,), component="observability"),
    Addon(key="metrics-server", kind="eks-addon", version_source="eks", condition="metrics-server",
          namespace="kube-system", after=(_LBC,), component="observability"),
)  # fmt: skip


def addon(key: str) -> Addon:
    """The registry row of `key` (KeyError for an unknown key)."""
    for row in ADDONS:
        if row.key == key:
            return row
    raise KeyError(key)


def installed_addons(
    accelerators: Iterable[str],
    *,
    cloudwatch: bool = True,
    metrics_server: bool = True,
    queue_scaling: bool = False,
) -> list[Addon]:
    """The add-ons a platform with pools of these accelerator families installs, in registry order."""
    families = set(accelerators)
    return [
        row
        for row in ADDONS
        if row.installed(
            families, cloudwatch=cloudwatch, metrics_server=metrics_server, queue_scaling=queue_scaling
        )
    ]
