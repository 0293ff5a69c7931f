"""Neuron: the Neuron Helm chart with the device plugin and the scheduler extension (`my-scheduler`),
tolerating the Neuron pools' taint."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from llmctl.infra.platform.charts import CORE_NODE_SELECTOR, release
from llmctl.infra.pools import NEURON_SCHEDULER, NEURON_TAINT

SCHEDULER_NAME = NEURON_SCHEDULER


def neuron_values() -> dict[str, object]:
    """Chart values: device plugin on Neuron nodes; the scheduler extension and the custom scheduler
    (`my-scheduler`) on the core nodes. The chart places them with separate keys:
    `scheduler.nodeSelector` (extension) and `scheduler.customScheduler.nodeSelector`."""
    toleration = {"key": NEURON_TAINT.key, "operator": "Exists", "effect": NEURON_TAINT.effect}
    return {
        "devicePlugin": {"enabled": True, "tolerations": [toleration]},
        "scheduler": {
            "enabled": True,
            "customScheduler": {"enabled": True, "nodeSelector": CORE_NODE_SELECTOR},
            "nodeSelector": CORE_NODE_SELECTOR,
        },
        "npd": {"enabled": False},
    }


class Neuron(pulumi.ComponentResource):
    """The Neuron device plugin and scheduler extension."""

    release: pulumi.Resource

    def __init__(
        self, name: str, *, after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmctl:platform:Neuron", name, None, opts)
        self.release = release(
            f"{name}-release",
            "neuron",
            release_name="neuron",
            namespace="kube-system",
            values=neuron_values(),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({"scheduler_name": SCHEDULER_NAME})
