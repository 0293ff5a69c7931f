"""The deployment targets' names, defined once: the registry, the CLI's `--target` and the workload
configuration read them from here. Pure data: importing it loads nothing heavy."""

from __future__ import annotations

from typing import Literal, get_args

# Targets whose workload is a Pulumi stack on Kubernetes: a cluster llmctl builds, or one it is given.
ClusterTarget = Literal["eks", "kubeconfig"]
TargetName = Literal[ClusterTarget, "local"]

TARGET_NAMES: tuple[TargetName, ...] = get_args(TargetName)
DEFAULT_TARGET: TargetName = "eks"
