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
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmctl.errors import BadInput, PrerequisiteError, ServingError
from llmctl.infra.lifecycle.registrations import NEW_NODE, REGISTRATION_TTL, utc_now
from llmctl.state import state_dir

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.registrations import JoinWatch


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


def kubectl_text(kubeconfig: Path | str | None, *args: str, timeout: float = 60) -> str:
    """`kubectl <args>` output as text (e.g. `logs`); PrerequisiteError when kubectl is missing,
    ServingError when it fails or does not answer within `timeout` seconds."""
    argv = ["kubectl", *(["--kubeconfig", str(kubeconfig)] if kubeconfig else []), *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        from llmctl.infra.aws.preflight import KUBECTL_INSTALL  # lazy: off the CLI start-up path

        raise PrerequisiteError("kubectl is not installed", KUBECTL_INSTALL) from None
    except subprocess.TimeoutExpired:  # an API server that accepts but never answers
        raise ServingError(
            f"`kubectl {' '.join(args)}` did not answer within {timeout:g} s",
            "the cluster's API server is unreachable or overloaded: check the network path to it "
            "(VPN, security groups) and `llmctl status`, then run the command again",
        ) from None
    if done.returncode != 0:
        raise ServingError(
            f"`kubectl {' '.join(args)}` failed: {done.stderr.strip()[:300]}",
            "check the cluster with `llmctl status`",
        )
    return done.stdout


def kubectl_json(kubeconfig: Path | str | None, *args: str, timeout: float = 30) -> Any:
    """`kubectl <args> -o json` parsed; the same errors as :func:`kubectl_text`."""
    return json.loads(kubectl_text(kubeconfig, *args, "-o", "json", timeout=timeout) or "{}")


NEURON_RESOURCES = ("aws.amazon.com/neuron", "aws.amazon.com/neuroncore")


def _component(event: dict[str, Any]) -> str:
    return str(event.get("reportingComponent") or event.get("source", {}).get("component") or "")


def _pod_events(events: list[dict[str, Any]], name: str) -> dict[str, dict[str, Any]]:
    """The pod's latest event of each reason (Nominated, FailedScheduling, Pulling, Pulled, ...);
    Karpenter's own events under 'karpenter:<reason>' (the scheduler reports FailedScheduling too)."""
    mine = [
        e
        for e in events
        if e.get("involvedObject", {}).get("kind") == "Pod"
        and e.get("involvedObject", {}).get("name") == name
    ]
    mine.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return {
        ("karpenter:" if "karpenter" in _component(e).lower() else "") + str(e.get("reason")): e for e in mine
    }


def _uses_neuron(pod: dict[str, Any]) -> bool:
    containers = pod.get("spec", {}).get("containers", [])
    return any(
        key in NEURON_RESOURCES
        for c in containers
        for part in ("limits", "requests")
        for key in c.get("resources", {}).get(part, {})
    )


def _first_time(event: dict[str, Any]) -> datetime | None:
    value = event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp")
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None


def _unscheduled(
    name: str, cond: dict[str, Any], latest: dict[str, dict[str, Any]], now: datetime | None = None
) -> str:
    """Pending without a node: Karpenter's own events say whether a node is on its way, and (`now`
    given) whether it is late: past a few minutes the node is not "new" any more."""
    failed = latest.get("karpenter:FailedScheduling")
    nominated = latest.get("karpenter:Nominated")
    newer = nominated is None or (
        failed is not None
        and str(nominated.get("lastTimestamp") or "") < str(failed.get("lastTimestamp") or "")
    )
    if failed is not None and newer:
        return f"a node for {name}, but Karpenter cannot launch one: {failed.get('message', '')[:200]}"
    if nominated is not None:
        said = nominated.get("message", "")[:100]
        since = _first_time(nominated)  # the first nomination to this NodeClaim (repeats keep it)
        if now is None or since is None or now - since < NEW_NODE:
            return f"a node from Karpenter for {name} ({said}; new nodes take 1-3 min)"
        return (
            f"a node from Karpenter for {name} ({said}; not joined after {NEW_NODE.seconds // 60} min: Karpenter "
            f"deletes a node not joined {REGISTRATION_TTL.seconds // 60} min after it created it and launches another)"
        )
    return f"a node from Karpenter for {name} (scheduler: {cond.get('message', 'unschedulable')[:120]})"


def _container_waiting(name: str, cs: dict[str, Any], latest: dict[str, dict[str, Any]]) -> str:
    waiting = cs.get("state", {}).get("waiting", {})
    reason = waiting.get("reason", "")
    image = cs.get("image", "")
    if reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
        return f"{name}: cannot pull {image} ({reason}: {waiting.get('message', '')[:160]})"
    if reason == "CrashLoopBackOff":
        last = cs.get("lastState", {}).get("terminated", {})
        return (
            f"{name}: container {cs.get('name')} keeps crashing ({cs.get('restartCount', 0)} restarts, last exit "
            f"{last.get('reason', '?')} code {last.get('exitCode', '?')}); see `kubectl logs --previous`"
        )
    pulling, pulled = latest.get("Pulling"), latest.get("Pulled")
    if (
        reason == "ContainerCreating"
        and pulling is not None
        and (
            pulled is None or str(pulled.get("lastTimestamp") or "") < str(pulling.get("lastTimestamp") or "")
        )
    ):
        return f"{name}: pulling the serving image {image} (multi-GB images take minutes)"
    if reason == "PodInitializing":
        return f"{name}: init containers"
    return f"{name}: {reason or 'starting'}"


def waiting_reason(
    pod: dict[str, Any], events: list[dict[str, Any]] | None = None, now: datetime | None = None
) -> str:
    """What a not-ready pod waits for, in words, from its status and its events: a node from
    Karpenter (or why Karpenter cannot launch one), the image pull, init containers, a crash loop,
    or the model download and (on Neuron) compilation of a running container."""
    status = pod.get("status", {})
    name = pod.get("metadata", {}).get("name", "?")
    latest = _pod_events(events or [], name)
    for cond in status.get("conditions", []):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return _unscheduled(name, cond, latest, now)
    for cs in status.get("initContainerStatuses", []):
        if "running" in cs.get("state", {}):
            return f"{name}: init container {cs.get('name')} is running (model download)"
        if "waiting" in cs.get("state", {}):
            return _container_waiting(name, cs, latest)
    for cs in status.get("containerStatuses", []):
        if "waiting" in cs.get("state", {}):
            return _container_waiting(name, cs, latest)
    for cs in status.get("containerStatuses", []):
        if "running" in cs.get("state", {}) and not cs.get("ready"):
            if _uses_neuron(pod):
                return f"{name}: model download and Neuron compilation (15-60 min without a compile cache)"
            return f"{name}: model download and loading"
    if status.get("phase") == "Pending" and not status.get("containerStatuses"):
        return f"{name}: pulling the serving image" if "Pulling" in latest else f"{name}: starting"
    return f"{name}: {status.get('phase', 'unknown')}"


@dataclass(frozen=True)
class Readiness:
    ready: bool
    pods: int
    waiting_for: list[str]


def readiness(kubeconfig: Path | str | None, namespace: str, now: datetime | None = None) -> Readiness:
    """Whether every pod in the namespace is Ready, and what the others wait for (`now`: the time the
    events' ages are measured against)."""
    pods = kubectl_json(kubeconfig, "get", "pods", "-n", namespace).get("items", [])
    pending = []
    for pod in pods:
        conditions = {c.get("type"): c.get("status") for c in pod.get("status", {}).get("conditions", [])}
        if pod.get("status", {}).get("phase") == "Succeeded":
            continue
        if conditions.get("Ready") != "True":
            pending.append(pod)
    events: list[dict[str, Any]] = []
    if pending:
        try:
            events = kubectl_json(kubeconfig, "get", "events", "-n", namespace).get("items", [])
        except ServingError:
            events = []  # the status alone still says most of it
    waiting = [waiting_reason(pod, events, now) for pod in pending]
    return Readiness(ready=bool(pods) and not waiting, pods=len(pods), waiting_for=waiting)


def launch_findings(
    kubeconfig: Path | str | None,
    namespace: str,
    *,
    region: str,
    instance_type: str,
    blueprint: str = "",
    joins: JoinWatch | None = None,
    nodes_per_replica: int = 1,
) -> list[Any]:
    """What Karpenter says about the namespace's pods and the cluster's NodeClaims
    (:mod:`llmctl.infra.lifecycle.launches`; `joins`, a
    :class:`~llmctl.infra.lifecycle.registrations.JoinWatch`, follows them across polls); empty when
    kubectl cannot tell."""
    from llmctl.infra.lifecycle.launches import findings  # lazy: off the CLI start-up path

    try:
        pods = kubectl_json(kubeconfig, "get", "pods", "-n", namespace).get("items", [])
        claims = kubectl_json(kubeconfig, "get", "nodeclaims.karpenter.sh").get("items", [])
        events = kubectl_json(kubeconfig, "get", "events", "-A").get("items", [])
    except ServingError:
        return []
    return findings(
        claims,
        events,
        pods,
        region=region,
        instance_type=instance_type,
        blueprint=blueprint,
        joins=joins,
        nodes_per_replica=nodes_per_replica,
    )


def wait_ready(
    kubeconfig: Path | str | None,
    namespace: str,
    *,
    timeout_s: float,
    on_wait: Callable[[str], None],
    poll_s: float = 10,
    watch: Callable[[], list[Any]] | None = None,
    stop_hint: str = "",
    wait_note: str = "",
    clock: Callable[[], datetime] = utc_now,
    explain: Callable[[Any], ServingError] | None = None,
) -> None:
    """Poll until the namespace's pods are Ready; say what is being waited for; ServingError on timeout.

    `watch` (e.g. :func:`launch_findings`) adds what Karpenter says, each finding once; at a final one
    (no instance type can hold a pod, the vCPU quota refuses the family) the wait stops at once with
    the finding and `stop_hint` (the running cost, the `llmctl down` command) instead of the timeout;
    a shortage Karpenter retries is said once with `wait_note` (how long this waits, what bills meanwhile).
    `clock` is the time a Karpenter nomination's age is measured against (a node not joined after a few
    minutes is said to be late, not "new"). `explain` words a final finding's stop (a surge under way:
    :mod:`llmctl.infra.lifecycle.surge_stop`)."""
    from llmctl.infra.lifecycle.launches import LaunchWatch  # lazy: the hardware catalog, only for a watch

    deadline = time.monotonic() + timeout_s
    last = ""
    launches = (
        LaunchWatch(watch, namespace, on_wait, stop_hint, wait_note, explain) if watch is not None else None
    )
    while True:
        state = readiness(kubeconfig, namespace, clock())
        if state.ready:
            return
        if launches is not None and launches.check() is not None:
            raise launches.error()
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
        from llmctl.infra.aws.preflight import KUBECTL_INSTALL  # lazy: off the CLI start-up path

        raise PrerequisiteError("kubectl is not installed", KUBECTL_INSTALL) from None


def remove_finalizers(
    kubeconfig: Path | str | None, resource: str, name: str, namespace: str | None = None
) -> None:
    """`kubectl patch` an object's metadata.finalizers away (a merge patch: CRDs accept it too)."""
    kubectl_text(
        kubeconfig,
        "patch",
        resource,
        name,
        *(["-n", namespace] if namespace else []),
        "--type=merge",
        "-p",
        json.dumps({"metadata": {"finalizers": None}}),
    )


def kubeconfig_file(path: Path | None) -> Path:
    """The kubeconfig file of an existing cluster: given, and a file."""
    if path is None:
        raise BadInput("--target kubeconfig needs --kubeconfig FILE", "pass your cluster's kubeconfig")
    if not path.is_file():
        raise PrerequisiteError(
            f"kubeconfig {path} does not exist", "pass the path of your cluster's kubeconfig"
        )
    return path
