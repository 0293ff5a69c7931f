"""Why a node does not come: Karpenter's NodeClaims and events, read while `up` waits.

Karpenter says why it cannot place a pod or launch a node in three places: the pod's
`FailedScheduling` events ("no instance type satisfied resources ..."), the NodeClaim's `Launched`
condition and the `FailedLaunch`-style events on the NodeClaim (EC2's error: capacity in one AZ,
the vCPU quota). This module turns them into findings, each either transient (Karpenter retries:
InsufficientInstanceCapacity in one AZ) or final (no instance type can ever hold the pod, the vCPU
quota refuses the family): `up` prints every new one and stops waiting at a final one.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.allocatable import node_allocatable
from llmctl.blueprints.hardware import hardware
from llmctl.errors import LlmctlError, ServingError
from llmctl.infra.workload.capacity import parse_quantity

# "Failed to schedule pod, no instance type has enough resources, requirements=..., resources={...}"
# (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/nodeclaim.go InstanceTypeFilterError,
# events.go PodFailedToScheduleEvent; older releases said "no instance type satisfied resources {...}")
_RESOURCES = re.compile(r"no instance type[^{]*?(\{[^}]*\})")
_ICE_ZONE = re.compile(r"Availability Zone you requested \(([a-z0-9-]+)\)")
# EC2's VcpuLimitExceeded; Karpenter's NodeClaim reason VCPULimitExceeded ("... exceed your VCPU quota",
# aws/karpenter-provider-aws pkg/errors/errors.go ToReasonMessage)
_VCPU = re.compile(r"vcpu ?limit ?exceeded|vcpu quota|vcpu limit of (\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """One thing Karpenter said, in words, and whether it resolves by itself."""

    key: str  # what makes two findings the same (printed once)
    text: str
    final: bool
    hint: str = ""


def _time(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def _karpenter(event: dict[str, Any]) -> bool:
    source = str(event.get("reportingComponent") or (event.get("source") or {}).get("component") or "")
    return "karpenter" in source.lower()


def _instance_type(pod: dict[str, Any] | None) -> str | None:
    selector = ((pod or {}).get("spec") or {}).get("nodeSelector") or {}
    value = selector.get("node.kubernetes.io/instance-type")
    return str(value) if value else None


def _offer(instance_type: str | None, resource: str) -> str:
    """What one node of the type offers a pod (Karpenter's allocatable less DaemonSets), as Karpenter writes it."""
    if not instance_type:
        return ""

    try:
        node = node_allocatable(hardware().instance(instance_type))
    except LlmctlError:
        return ""
    if resource == "memory":
        return f"{node.pod_memory_mib // 1024}Gi"
    if resource == "cpu":
        return f"{node.cpu_m}m"
    return ""


def _pod_requests(pod: dict[str, Any] | None) -> dict[str, str]:
    """The pod's memory and CPU requests as written (one container), or summed (several)."""
    containers = ((pod or {}).get("spec") or {}).get("containers") or []
    requests = [(c.get("resources") or {}).get("requests") or {} for c in containers]
    out: dict[str, str] = {}
    for resource in ("memory", "cpu"):
        values = [r[resource] for r in requests if resource in r]
        if len(values) == 1:
            out[resource] = str(values[0])
        elif values:
            total = sum(parse_quantity(v) for v in values)
            out[resource] = f"{total / 1024**3:g}Gi" if resource == "memory" else f"{total:g}"
    return out


def unsatisfiable(event: dict[str, Any], pod: dict[str, Any] | None) -> Finding | None:
    """A pod no instance type of its pools can hold: 'pod asks 735Gi, inf2.48xlarge offers 701Gi'."""
    message = str(event.get("message") or "")
    match = _RESOURCES.search(message)
    if not match:
        return None
    asked = _pod_requests(pod)
    if not asked:  # no pod object: Karpenter's own figure (the pod's requests plus the DaemonSets')
        try:
            asked = {k: str(v) for k, v in json.loads(match.group(1)).items()}
        except ValueError:
            asked = {}
    name = (event.get("involvedObject") or {}).get("name", "?")
    instance_type = _instance_type(pod)
    parts = []
    for resource in ("memory", "cpu"):
        if resource in asked:
            offer = _offer(instance_type, resource)
            parts.append(
                f"pod asks {asked[resource]}" + (f", {instance_type} offers {offer}" if offer else "")
            )
    detail = f" ({'; '.join(parts)})" if parts else ""
    return Finding(
        f"unsatisfiable:{name}",
        f"no instance type satisfied resources{detail}: Karpenter will not launch a node for {name}",
        final=True,
        hint="lower the replica's requests (`llmctl validate` shows what the node offers) or choose a larger instance type",
    )


_NAMED_TYPE = re.compile(r"sufficient ([a-z0-9-]+\.[a-z0-9-]+) capacity")


def launch_error(message: str, instance_type: str, region: str) -> Finding | None:
    """EC2's refusal of a launch, from a NodeClaim's condition or event."""
    named = _NAMED_TYPE.search(message)
    instance_type = named.group(1) if named else instance_type
    if "InsufficientInstanceCapacity" in message or "insufficient capacity" in message.lower():
        zone = _ICE_ZONE.search(message)
        where = f" in {zone.group(1)}" if zone else ""
        return Finding(
            f"ice:{instance_type}{where}",
            f"InsufficientInstanceCapacity for {instance_type}{where}: EC2 has none free there now; "
            "Karpenter tries the other zones and retries",
            final=False,
        )
    vcpu = _VCPU.search(message)
    if vcpu:
        limit = f" (limit {vcpu.group(1)} vCPUs)" if vcpu.group(1) else ""
        hint = "request a higher EC2 vCPU quota for the instance family"
        try:
            catalog = hardware()
            quota = catalog.quota_for(catalog.instance(instance_type))
        except LlmctlError:
            quota = None
        if quota is not None:
            hint = (
                f"request an increase of {quota.name} ({quota.code}): `aws service-quotas "
                f"request-service-quota-increase --service-code ec2 --quota-code {quota.code} --desired-value N "
                f"--region {region}`"
            )
        return Finding(
            f"quota:{instance_type}",
            f"the EC2 vCPU quota refuses {instance_type}{limit}" + (f": quota {quota.code}" if quota else ""),
            final=True,
            hint=hint,
        )
    return None


def findings(
    nodeclaims: list[dict[str, Any]],
    events: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    region: str,
    instance_type: str,
) -> list[Finding]:
    """Everything Karpenter says about the workload's pods and the NodeClaims of its instance type,
    oldest first (`instance_type`: the serving nodes', for claims whose type is not known yet)."""
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    claim_types = {
        str((c.get("metadata") or {}).get("name")): str(
            ((c.get("metadata") or {}).get("labels") or {}).get("node.kubernetes.io/instance-type", "")
        )
        for c in nodeclaims
    }
    found: list[Finding] = []
    for claim in nodeclaims:
        name = str((claim.get("metadata") or {}).get("name"))
        for cond in (claim.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Launched" and cond.get("status") == "False":
                said = f"{cond.get('reason') or ''}: {cond.get('message') or ''}"
                hit = launch_error(said, claim_types.get(name) or instance_type, region)
                if hit:
                    found.append(hit)
    for event in sorted(events, key=_time):
        involved = event.get("involvedObject") or {}
        if involved.get("kind") == "Pod" and _karpenter(event) and event.get("reason") == "FailedScheduling":
            if str(involved.get("name")) in by_name:
                hit = unsatisfiable(event, by_name.get(str(involved.get("name"))))
                if hit:
                    found.append(hit)
        elif involved.get("kind") == "NodeClaim" and _karpenter(event):
            claim_name = str(involved.get("name"))
            hit = launch_error(
                str(event.get("message") or ""), claim_types.get(claim_name) or instance_type, region
            )
            if hit:
                found.append(hit)
    unique: dict[str, Finding] = {}
    for item in found:
        unique.setdefault(item.key, item)
    return list(unique.values())


class LaunchWatch:
    """What Karpenter says about one workload, each finding said once; the first final one is kept.

    ``check`` runs one poll (the readiness wait calls it between its own polls); ``in_background``
    polls on a thread while something else waits, such as the workload stack's update, in which
    Pulumi awaits the serving objects for up to hours: a final finding there calls ``on_final``
    (which stops the update) instead of waiting out Pulumi's timeout.
    """

    def __init__(
        self,
        poll: Callable[[], list[Finding]],
        namespace: str,
        say: Callable[[str], None],
        stop_hint: str = "",
    ) -> None:
        self.poll = poll
        self.namespace = namespace
        self.say = say
        self.stop_hint = stop_hint
        self.seen: set[str] = set()
        self.final: Finding | None = None
        self._lock = threading.Lock()

    def check(self) -> Finding | None:
        """One poll: say each new finding; returns the final one once there is one."""
        found = self.poll()
        with self._lock:
            for finding in found:
                if finding.key in self.seen:
                    continue
                self.seen.add(finding.key)
                self.say(f"Karpenter: {finding.text}")
                if finding.final and self.final is None:
                    self.final = finding
            return self.final

    def error(self) -> ServingError:
        """The stop: the finding, what to do about it, and what still runs (``stop_hint``)."""
        assert self.final is not None
        return ServingError(
            f"the workload in namespace {self.namespace} cannot start: {self.final.text}",
            "; ".join(part for part in (self.final.hint, self.stop_hint) if part) or None,
        )

    @contextlib.contextmanager
    def in_background(self, on_final: Callable[[], None], poll_s: float = 20) -> Iterator[None]:
        """Poll every ``poll_s`` seconds while the body runs; at a final finding call ``on_final`` once."""
        done = threading.Event()

        def loop() -> None:
            while not done.is_set():
                try:
                    final = self.check()
                except Exception:  # a failed poll only skips this round; the wait goes on
                    final = None
                if final is not None:
                    on_final()
                    return
                done.wait(poll_s)

        thread = threading.Thread(target=loop, name="llmctl-launch-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(timeout=60)
