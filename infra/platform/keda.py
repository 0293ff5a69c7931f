"""KEDA: the event-driven autoscaler whose ScaledObjects scale the Deployment runtimes on their
queue (infra/workload/builders/autoscaling.py), on the core nodes. Installed only when a workload
needs it (the add-on registry's `queue-scaling` condition)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from llmctl.infra.platform.charts import CORE_NODE_SELECTOR, release

NAMESPACE = "keda"


class Keda(pulumi.ComponentResource):
    """The KEDA operator, its metrics API server and admission webhooks (pinned chart)."""

    release: pulumi.Resource

    def __init__(
        self, name: str, *, after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmctl:platform:Keda", name, None, opts)
        self.release = release(
            f"{name}-release",
            "keda",
            namespace=NAMESPACE,
            create_namespace=True,
            values={"nodeSelector": CORE_NODE_SELECTOR},
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({"namespace": NAMESPACE})
