"""KubeRay: the operator that runs RayService / RayCluster objects, on the core nodes."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from llmctl.infra.platform.charts import CORE_NODE_SELECTOR, release

NAMESPACE = "kuberay-operator"


class KubeRay(pulumi.ComponentResource):
    """The KubeRay operator (pinned chart)."""

    release: pulumi.Resource

    def __init__(
        self, name: str, *, after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("llmctl:platform:KubeRay", name, None, opts)
        self.release = release(
            f"{name}-release",
            "kuberay_operator",
            namespace=NAMESPACE,
            create_namespace=True,
            values={"nodeSelector": CORE_NODE_SELECTOR},
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({"namespace": NAMESPACE})
