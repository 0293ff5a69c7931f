"""Neuron: the Neuron Helm chart with the device plugin and the scheduler extension (`my-scheduler`),
tolerating the Neuron pools' taint."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from llmctl.blueprints.pools import NEURON_SCHEDULER, NEURON_TAINT
from llmctl.blueprints.versions import versions
from llmctl.errors import BlueprintError
from llmctl.infra.platform.charts import CORE_NODE_SELECTOR, release

SCHEDULER_NAME = NEURON_SCHEDULER


def kube_scheduler_tag(kubernetes_version: str) -> str:
    """The pinned EKS Distro kube-scheduler tag for the cluster's Kubernetes minor.

    The custom scheduler talks to the API server like the control plane's own scheduler, so the
    version-skew policy applies: the chart's default (v1.28) must not run on a newer cluster."""
    minor = ".".join(kubernetes_version.split(".")[:2])
    pinned = versions().kube_scheduler
    if minor not in pinned:
        raise BlueprintError(
            f"no kube-scheduler image is pinned for Kubernetes {minor} (the Neuron custom scheduler "
            "must match the cluster's minor version)",
            hint=f"use Kubernetes {', '.join(sorted(pinned))}, or add an EKS Distro kube-scheduler tag for "
            f"{minor} under `kube_scheduler` in blueprints/data/versions.yaml",
        )
    return pinned[minor].value


def neuron_values(kubernetes_version: str) -> dict[str, object]:
    """Chart values: device plugin on Neuron nodes; the scheduler extension and the custom scheduler
    (`my-scheduler`) on the core nodes. The chart places them with separate keys:
    `scheduler.nodeSelector` (extension) and `scheduler.customScheduler.nodeSelector`; the custom
    scheduler's kube-scheduler image follows the cluster's Kubernetes minor."""
    toleration = {"key": NEURON_TAINT.key, "operator": "Exists", "effect": NEURON_TAINT.effect}
    return {
        "devicePlugin": {"enabled": True, "tolerations": [toleration]},
        "scheduler": {
            "enabled": True,
            "customScheduler": {
                "enabled": True,
                "nodeSelector": CORE_NODE_SELECTOR,
                "image": {"tag": kube_scheduler_tag(kubernetes_version)},
            },
            "nodeSelector": CORE_NODE_SELECTOR,
        },
        "npd": {"enabled": False},
    }


class Neuron(pulumi.ComponentResource):
    """The Neuron device plugin and scheduler extension."""

    release: pulumi.Resource

    def __init__(
        self,
        name: str,
        *,
        kubernetes_version: str,
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("llmctl:platform:Neuron", name, None, opts)
        self.release = release(
            f"{name}-release",
            "neuron",
            release_name="neuron",
            namespace="kube-system",
            values=neuron_values(kubernetes_version),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({"scheduler_name": SCHEDULER_NAME})
