"""`up` with upgrade strategy replace: the running RayCluster goes, KubeRay builds the new one.

The RayService renders `upgradeStrategy.type: None`, so KubeRay leaves the running cluster as it is
after a cluster-spec change (ray-project/kuberay v1.7.0 rayservice_controller.go
`shouldPrepareNewCluster` / `isZeroDowntimeUpgradeEnabled`). Once the workload stack is updated, `up`
deletes the active RayCluster named in the RayService's `status.activeServiceStatus.rayClusterName`;
with neither an active nor a pending cluster left, KubeRay prepares a new one from the new spec
(`shouldPrepareNewCluster`: both nil -> true) and makes it active when it serves. `up` then waits for
the RayService to name another active cluster before its usual readiness wait (so the old pods, still
terminating, are not taken for the new ones).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmctl.errors import ServingError
from llmctl.infra.lifecycle.kube import kubectl_json, kubectl_text


def active_cluster(kubeconfig: Path | str | None, namespace: str, rayservice: str) -> str:
    """The RayService's active RayCluster ('' when it names none)."""
    obj: Any = kubectl_json(kubeconfig, "get", "rayservice", rayservice, "-n", namespace, "-o", "json")
    return str(((obj.get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName") or "")


def delete_active_cluster(kubeconfig: Path | str | None, namespace: str, rayservice: str) -> str:
    """Delete the RayService's active RayCluster (its pods go with it); its name, '' when none."""
    name = active_cluster(kubeconfig, namespace, rayservice)
    if name:
        kubectl_text(kubeconfig, "delete", "raycluster", name, "-n", namespace, "--wait=false")
    return name


def wait_replaced(
    kubeconfig: Path | str | None,
    namespace: str,
    rayservice: str,
    old: str,
    *,
    timeout_s: float,
    on_wait: Callable[[str], None],
    poll_s: float = 10,
) -> str:
    """Poll until the RayService names an active cluster other than `old`; its name."""
    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        now = active_cluster(kubeconfig, namespace, rayservice)
        if now and now != old:
            return now
        if not said:
            on_wait(f"RayService {rayservice}: KubeRay builds a new RayCluster in place of {old}")
            said = True
        if time.monotonic() > deadline:
            raise ServingError(
                f"RayService {namespace}/{rayservice} names no new RayCluster {int(timeout_s)} s after "
                f"{old} was deleted",
                f"inspect it with `kubectl --kubeconfig {kubeconfig} -n {namespace} describe rayservice "
                f"{rayservice}`; `llmctl up` again resumes waiting",
            )
        time.sleep(poll_s)
