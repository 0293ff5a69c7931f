"""The edge of the parts check: read an existing cluster's CRDs, DaemonSets and Deployments with
kubectl, then let :mod:`llmctl.infra.workload.parts` decide what is missing."""

from __future__ import annotations

from pathlib import Path

from llmctl.errors import LlmctlError, ServingError
from llmctl.infra.lifecycle.kube import kubectl_json
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.parts import Inventory, MissingPartsError, missing_parts, required_parts


def read_inventory(kubeconfig: Path | str | None) -> Inventory:
    """`kubectl get crd`, `get daemonsets -A`, `get deployments -A` (PrerequisiteError without kubectl)."""

    try:
        crds = kubectl_json(kubeconfig, "get", "crd")
        daemonsets = kubectl_json(kubeconfig, "get", "daemonsets", "-A")
        deployments = kubectl_json(kubeconfig, "get", "deployments", "-A")
    except ServingError as exc:
        raise LlmctlError(
            f"cannot read the cluster's platform parts: {exc.message}",
            f"check --kubeconfig {kubeconfig} (`kubectl --kubeconfig {kubeconfig} get nodes`); the user needs "
            "to list CRDs, DaemonSets and Deployments in every namespace",
        ) from None
    return Inventory.from_lists(crds, daemonsets, deployments)


def ensure_cluster_parts(config: WorkloadConfig, kubeconfig: Path | str | None) -> None:
    """Raise MissingPartsError listing every platform part the workload needs and the cluster lacks."""

    needs = required_parts(build_manifests(config, hf_token=None))
    if not needs:
        return
    facts = config.platform
    missing = missing_parts(needs, read_inventory(kubeconfig), facts.present_parts)
    if missing:
        raise MissingPartsError(facts.cluster_name, config.blueprint.name, missing)
