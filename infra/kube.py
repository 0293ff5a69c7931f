"""kubectl at the edge: readiness waits, cluster status and port-forwards for `llmctl connect`.

These only shell out to kubectl with an explicit kubeconfig; nothing here holds state.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.errors import PrerequisiteError, ServingError
from llmctl.state import state_dir


def kubeconfig_path(stack: str) -> Path:
    """Where `llmctl up` keeps the platform's kubeconfig (user-only permissions)."""
    return state_dir() / "kube" / f"{stack}.yaml"


def save_kubeconfig(stack: str, text: str) -> Path:
    path = kubeconfig_path(stack)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return path


def kubectl_json(kubeconfig: Path | str | None, *args: str, timeout: float = 30) -> Any:
    """`kubectl <args> -o json` parsed; PrerequisiteError when kubectl is missing."""
    argv = ["kubectl", *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []), *args, "-o", "json"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        from llmctl.infra.preflight import KUBECTL_INSTALL

        raise PrerequisiteError("kubectl is not installed", KUBECTL_INSTALL) from None
    if done.returncode != 0:
        raise ServingError(
            f"`kubectl {' '.join(args)}` failed: {done.stderr.strip()[:300]}",
            "check the cluster with `llmctl status`",
        )
    return json.loads(done.stdout or "{}")


def _waiting_reason(pod: dict[str, Any]) -> str:
    """What a not-ready pod is doing, in words (image pull, model download/compile, pending)."""
    status = pod.get("status", {})
    name = pod.get("metadata", {}).get("name", "?")
    if status.get("phase") == "Pending":
        for cond in status.get("conditions", []):
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return f"a node for {name} (Karpenter is launching one: {cond.get('message', '')[:80]})"
    for cs in status.get("containerStatuses", []) + status.get("initContainerStatuses", []):
        waiting = cs.get("state", {}).get("waiting")
        if waiting:
            reason = waiting.get("reason", "")
            if reason in ("ContainerCreating", "PodInitializing"):
                return f"{name}: pulling the serving image (multi-GB images take minutes)"
            return f"{name}: {reason}"
        if cs.get("state", {}).get("running") and not cs.get("ready"):
            return f"{name}: model download and compilation (Neuron compiles can take 15-60 min)"
    return f"{name}: {status.get('phase', 'unknown')}"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    pods: int
    waiting_for: list[str]


def readiness(kubeconfig: Path | str | None, namespace: str) -> Readiness:
    """Whether every pod in the namespace is Ready, and what the others wait for."""
    pods = kubectl_json(kubeconfig, "get", "pods", "-n", namespace).get("items", [])
    waiting = []
    for pod in pods:
        conditions = {c.get("type"): c.get("status") for c in pod.get("status", {}).get("conditions", [])}
        if pod.get("status", {}).get("phase") == "Succeeded":
            continue
        if conditions.get("Ready") != "True":
            waiting.append(_waiting_reason(pod))
    return Readiness(ready=bool(pods) and not waiting, pods=len(pods), waiting_for=waiting)


def wait_ready(
    kubeconfig: Path | str | None,
    namespace: str,
    *,
    timeout_s: float,
    on_wait: Callable[[str], None],
    poll_s: float = 10,
) -> None:
    """Poll until the namespace's pods are Ready; say what is being waited for; ServingError on timeout."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        state = readiness(kubeconfig, namespace)
        if state.ready:
            return
        text = "; ".join(state.waiting_for[:2]) or f"pods in namespace {namespace}"
        if text != last:
            on_wait(text)
            last = text
        if time.monotonic() > deadline:
            raise ServingError(
                f"the workload in namespace {namespace} is not ready after {int(timeout_s)}s: {text}",
                f"inspect it with `kubectl --kubeconfig {kubeconfig} -n {namespace} get pods` and `describe pod`; "
                "`llmctl up` again resumes waiting",
            )
        time.sleep(poll_s)


def cluster_status(kubeconfig: Path | str | None) -> dict[str, Any]:
    """Nodes, NodePools, device plugins and the Neuron scheduler, as plain data."""
    nodes = kubectl_json(kubeconfig, "get", "nodes").get("items", [])
    try:
        pools = [
            p["metadata"]["name"]
            for p in kubectl_json(kubeconfig, "get", "nodepools.karpenter.sh").get("items", [])
        ]
    except ServingError:
        pools = []
    daemonsets = kubectl_json(kubeconfig, "get", "daemonsets", "-A").get("items", [])
    deployments = kubectl_json(kubeconfig, "get", "deployments", "-A").get("items", [])
    plugins = {
        d["metadata"][
            "name"
        ]: f"{d.get('status', {}).get('numberReady', 0)}/{d.get('status', {}).get('desiredNumberScheduled', 0)}"
        for d in daemonsets
        if any(key in d["metadata"]["name"] for key in ("neuron", "nvidia"))
    }
    schedulers = {
        d["metadata"][
            "name"
        ]: f"{d.get('status', {}).get('readyReplicas', 0)}/{d.get('spec', {}).get('replicas', 0)}"
        for d in deployments
        if "scheduler" in d["metadata"]["name"]
    }
    return {
        "nodes": [
            {
                "name": n["metadata"]["name"],
                "instance_type": n["metadata"].get("labels", {}).get("node.kubernetes.io/instance-type"),
                "nodepool": n["metadata"].get("labels", {}).get("karpenter.sh/nodepool"),
            }
            for n in nodes
        ],
        "nodepools": pools,
        "device_plugins": plugins,
        "schedulers": schedulers,
    }


def port_forward(
    kubeconfig: Path | str | None, namespace: str, service: str, local: int, remote: int
) -> subprocess.Popen[bytes]:
    """Start `kubectl port-forward svc/<service> local:remote` (the caller stops it)."""
    argv = [
        "kubectl",
        *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []),
        "port-forward",
        "-n",
        namespace,
        f"svc/{service}",
        f"{local}:{remote}",
    ]
    try:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except FileNotFoundError:
        from llmctl.infra.preflight import KUBECTL_INSTALL

        raise PrerequisiteError("kubectl is not installed", KUBECTL_INSTALL) from None
