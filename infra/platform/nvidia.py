"""NVIDIA: the device plugin on GPU pool nodes, tolerating their taint."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from llmctl.blueprints.pools import GPU_TAINT
from llmctl.infra.platform.charts import release


def nvidia_values() -> dict[str, object]:
    """Chart values: run on nodes Karpenter labels as NVIDIA GPU nodes (no node feature discovery
    needed), tolerating the GPU taint."""
    return {
        "tolerations": [{"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "karpenter.k8s.aws/instance-gpu-manufacturer",
                                    "operator": "In",
                                    "values": ["nvidia"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
        "gfd": {"enabled": False},
        "nfd": {"enabled": False},
    }


class NvidiaDevicePlugin(pulumi.ComponentResource):
    """The NVIDIA device plugin."""

    release: pulumi.Resource

    def __init__(
        self, name: str, *, after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmctl:platform:NvidiaDevicePlugin", name, None, opts)
        self.release = release(
            f"{name}-release",
            "nvidia_device_plugin",
            namespace="kube-system",
            values=nvidia_values(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({})
