"""The `kubeconfig` target: an existing cluster (its kubeconfig and a file naming its node pools).
Only the workload stacks are llmctl's: no platform stack, no sweep, no AWS credentials."""

from __future__ import annotations

from llmctl.infra.names import TARGET_SUMMARIES
from llmctl.infra.targets.base import OwnFlags, needs_table
from llmctl.infra.targets.cluster import KubernetesTarget


class KubeconfigTarget(KubernetesTarget):
    name = "kubeconfig"
    summary = TARGET_SUMMARIES["kubeconfig"]
    owns_platform = False
    needs = needs_table(
        up={"pulumi", "kubectl", "kubeconfig", "hf-token"},
        down={"pulumi"},
        status={"pulumi"},
        connect={"kubectl"},
    )
    own_flags = (
        OwnFlags(
            ("pools",),
            "--pools applies to --target kubeconfig only",
            "pass --target kubeconfig --kubeconfig FILE to deploy to an existing cluster; on eks llmctl "
            "builds its own pools",
        ),
    )
