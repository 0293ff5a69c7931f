"""Why a node does not come: Karpenter's NodeClaims and events, read while `up` waits.

Karpenter says why it cannot place a pod or launch a node in three places
(:mod:`llmctl.infra.lifecycle.karpenter_signals` names the upstream source of each): the pod's
`FailedScheduling` events ("no instance type has enough resources ...", "... has the required
offering"), the `InsufficientCapacityError` event it publishes on a NodeClaim before deleting it
(EC2's fleet errors: capacity in one AZ, the vCPU quota), and the `Launched` condition it leaves
Unknown on a NodeClaim for any other launch error (permissions, throttling). This module turns them
into findings, each either final (a quota, a permission, no offering ever, a pod bigger than any
node: `up` stops at once) or not (a capacity shortage, throttling: `up` says it and waits on).
Past `Launched`, a node that never joins the cluster is followed across polls by
:class:`llmctl.infra.lifecycle.registrations.JoinWatch` (Karpenter's 15-minute registration TTL).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.allocatable import node_allocatable
from llmctl.blueprints.hardware import hardware
from llmctl.errors import LlmctlError, ServingError
from llmctl.infra.lifecycle import karpenter_signals as ks
from llmctl.infra.lifecycle.registrations import JoinWatch
from llmctl.infra.workload.scheduling.capacity import parse_quantity


@dataclass(frozen=True)
class Finding:
    """One thing Karpenter said, in words, and whether it resolves by itself."""

    key: str  # what makes two findings the same (printed once)
    text: str
    final: bool
    hint: str = ""
    kind: str = (
        ""  # quota, permission, offering, resources, requirements, capacity, launch, registration, group
    )
    instance_type: str = ""  # the type EC2 refused (capacity, quota), for the offering rule


@dataclass(frozen=True)
class Context:
    """What the findings name: the region, the blueprint (for `llmctl doctor`), its instance type."""

    region: str
    instance_type: str
    blueprint: str = ""

    def doctor(self) -> str:
        named = f" --blueprint {self.blueprint}" if self.blueprint else ""
        return f"`llmctl doctor{named} --region {self.region}`"


def _time(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def _karpenter(event: dict[str, Any]) -> bool:
    source = str(event.get("reportingComponent") or (event.get("source") or {}).get("component") or "")
    return "karpenter" in source.lower()


def _instance_type(pod: dict[str, Any] | None) -> str | None:
    selector = ((pod or {}).get("spec") or {}).get("nodeSelector") or {}
    value = selector.get("node.kubernetes.io/instance-type")
    return str(value) if value else None


def _pool(pod: dict[str, Any]) -> str | None:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    value = selector.get("karpenter.sh/nodepool")
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


def _too_big(name: str, pod: dict[str, Any] | None, said: ks.Unschedulable) -> Finding:
    """A pod no instance type of its pools can hold: 'pod asks 735Gi, inf2.48xlarge offers 701Gi'."""
    asked = _pod_requests(pod)
    if not asked:  # no pod object: Karpenter's own figure (the pod's requests plus the DaemonSets')
        try:
            asked = {k: str(v) for k, v in json.loads(said.resources).items()}
        except ValueError:
            asked = {}
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
        kind="resources",
    )


def unsatisfiable(
    event: dict[str, Any], pod: dict[str, Any] | None, ctx: Context, refused: set[str]
) -> Finding | None:
    """What a pod's FailedScheduling event from Karpenter says; `refused`: the instance types whose
    launch EC2 refused (capacity or quota) in the events read with it."""
    said = ks.unschedulable(str(event.get("message") or ""))
    if said is None:
        return None
    name = str((event.get("involvedObject") or {}).get("name", "?"))
    if said.criterion == "resources":
        return _too_big(name, pod, said)
    if said.criterion == "requirements":
        return Finding(
            f"requirements:{name}",
            f"no instance type of its pool meets {name}'s scheduling requirements ({said.requirements})",
            final=True,
            hint="`llmctl validate` checks the pod's nodeSelector against the platform's pools",
            kind="requirements",
        )
    instance_type = _instance_type(pod) or ctx.instance_type
    if instance_type in refused or (refused and not _instance_type(pod)):
        return Finding(
            f"offering-wait:{instance_type}",
            f"no offering of {instance_type} is free for {name} now: EC2 refused it (above) and Karpenter "
            f"skips a refused offering for {ks.UNAVAILABLE_OFFERINGS_TTL_MIN} minutes, then tries again",
            final=False,
            kind="offering-wait",
        )
    if said.reserved_only:
        return Finding(
            f"offering:{instance_type}",
            f"the capacity reservation of {name}'s pool has no free {instance_type} (the pool may launch only "
            "reserved capacity): Karpenter will not launch a node for it until one frees",
            final=True,
            hint=f"{ctx.doctor()} shows the reservation on its 'capacity reservations' line; free an instance, "
            "or let the blueprint fall back (`capacity.fallback: on-demand`)",
            kind="offering",
        )
    return Finding(
        f"offering:{instance_type}",
        f"{instance_type} has no offering that {name}'s pool may launch (not offered in the platform's "
        "availability zones, or not in the pool's capacity type): Karpenter will never launch a node for it",
        final=True,
        hint=f"{ctx.doctor()} shows on its '{instance_type} in AZs' line which AZ IDs offer it; choose those "
        "(platform setting az_ids, `llmctl up --reselect-azs`) or another region",
        kind="offering",
    )


def _quota(instance_type: str, ctx: Context, spot: bool, limit: int | None) -> Finding:
    try:
        catalog = hardware()
        quota = catalog.quota_for(catalog.instance(instance_type), spot=spot)
    except LlmctlError:
        quota = None
    what = "spot instance" if spot else "vCPU"
    limit_text = f" (limit {limit} vCPUs)" if limit is not None else ""
    hint = f"request a higher EC2 {what} quota for the instance family"
    if quota is not None:
        hint = (
            f"{ctx.doctor()} shows it on its 'vCPU quota {quota.code}' line; request an increase of "
            f"{quota.name} ({quota.code}): `aws service-quotas request-service-quota-increase --service-code ec2 "
            f"--quota-code {quota.code} --desired-value N --region {ctx.region}`"
        )
    return Finding(
        f"quota:{instance_type}",
        f"the EC2 {what} quota refuses {instance_type}{limit_text}"
        + (f": quota {quota.code}" if quota else ""),
        final=True,
        hint=hint,
        kind="quota",
        instance_type=instance_type,
    )


def _permission(instance_type: str, reason: str, message: str) -> Finding:
    spot = reason == "SpotSLRCreationFailed" or "ServiceLinkedRole" in reason
    hint = (
        "create the Spot service-linked role once per account: `aws iam create-service-linked-role "
        "--aws-service-name spot.amazonaws.com`"
        if spot
        else "the Karpenter controller role (or an SCP or permissions boundary over it) lacks a permission: "
        "`llmctl up` again restores the policy llmctl writes; an organisation's SCP needs its administrator"
    )
    return Finding(
        f"permission:{reason}",
        f"EC2 refuses Karpenter's launch of {instance_type}: {message} ({reason})",
        final=True,
        hint=hint,
        kind="permission",
    )


def capacity_event(message: str, instance_type: str, ctx: Context) -> Finding | None:
    """An InsufficientCapacityError event on a NodeClaim: capacity (waits), quota or permission (final)."""
    errors = ks.fleet_errors(message)
    if not errors:
        if ks.unavailable_at_launch(message):
            return Finding(
                f"capacity:{instance_type}",
                f"every offering of {instance_type} was refused just before the launch: Karpenter retries",
                final=False,
                kind="capacity",
                instance_type=instance_type,
            )
        return None
    kind = ks.capacity_kind(errors)
    if kind == "quota":
        spot = not ({e.code for e in errors} & {"VcpuLimitExceeded"})
        return _quota(instance_type, ctx, spot, ks.vcpu_limit(errors))
    if kind == "permission":
        code = next(e for e in errors if e.code in ks.PERMISSION_CODES)
        return _permission(instance_type, code.code, "the Spot service-linked role cannot be created")
    named = next((e.instance_type for e in errors if e.instance_type), None) or instance_type
    zones = sorted({e.zone for e in errors if e.zone})
    where = f" in {', '.join(zones)}" if zones else ""
    codes = ", ".join(sorted({e.code for e in errors}))
    return Finding(
        f"capacity:{named}{where}",
        f"{codes} for {named}{where}: EC2 has none free there now; Karpenter skips that offering for "
        f"{ks.UNAVAILABLE_OFFERINGS_TTL_MIN} minutes, tries the others and retries",
        final=False,
        kind="capacity",
        instance_type=named,
    )


def launched_condition(cond: dict[str, Any], instance_type: str, ctx: Context) -> Finding | None:
    """A NodeClaim's Launched condition left Unknown with a reason (Karpenter never sets it False)."""
    if cond.get("type") != "Launched" or cond.get("status") == "True":
        return None
    reason = str(cond.get("reason") or "")
    message = str(cond.get("message") or "")
    if reason in ks.QUOTA_REASONS:
        return _quota(instance_type, ctx, ks.QUOTA_REASONS[reason] == "spot", None)
    if reason in ks.PERMISSION_REASONS:
        return _permission(instance_type, reason, message)
    if not reason or not message or reason == ks.AWAITING_REASON:  # not reconciled yet
        return None
    return Finding(
        f"launch:{reason}",
        f"the launch of {instance_type} failed: {message} ({reason}); Karpenter retries",
        final=False,
        kind="launch",
    )


def incomplete_group(
    pods: list[dict[str, Any]], instance_type: str, nodes_per_replica: int
) -> Finding | None:
    """A replica over several nodes whose nodes came only in part: Karpenter launches one node per
    pending pod, not the group at once, so some stage pods may run (and their nodes bill) while the
    others wait; nothing serves until all have come. Names the waiting pods and what runs meanwhile."""
    if nodes_per_replica < 2:
        return None
    workers = [
        pod
        for pod in pods
        if ((pod.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/component")
        == "ray-worker"
        and _instance_type(pod) == instance_type
    ]
    placed = [pod for pod in workers if (pod.get("spec") or {}).get("nodeName")]
    waiting = sorted(str((pod.get("metadata") or {}).get("name")) for pod in workers if pod not in placed)
    if not placed or not waiting:
        return None
    try:
        hourly = hardware().instance(instance_type).on_demand_usd * len(placed)
    except LlmctlError:
        hourly = 0.0
    return Finding(
        f"group:{len(placed)}/{len(workers)}",
        f"{len(placed)} of the {len(workers)} {instance_type} nodes of {len(workers) // nodes_per_replica} "
        f"replica(s) of {nodes_per_replica} nodes run (about ${hourly:.2f}/h on demand) while "
        f"{', '.join(waiting)} wait(s) for a node; a replica serves only once all {nodes_per_replica} of its "
        "nodes run",
        final=False,
        hint="reserve the whole group in one zone (capacity.reservations: an ODCR or a Capacity Block for ML)",
        kind="group",
        instance_type=instance_type,
    )


def findings(
    nodeclaims: list[dict[str, Any]],
    events: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    region: str,
    instance_type: str,
    blueprint: str = "",
    joins: JoinWatch | None = None,
    nodes_per_replica: int = 1,
) -> list[Finding]:
    """Everything Karpenter says about the workload's pods and the NodeClaims of their pools, oldest
    first (`instance_type`: the serving nodes', for claims whose type is not known: a NodeClaim
    whose launch EC2 refused is deleted at once). `joins` follows the NodeClaims past `Launched`
    across polls (registration, the liveness check's deletions and relaunches); `nodes_per_replica`
    above 1 adds a replica whose nodes came only in part (:func:`incomplete_group`)."""
    ctx = Context(region, instance_type, blueprint)
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in pods}
    pools = {pool for pod in pods if (pool := _pool(pod))}

    def ours(claim: str) -> bool:  # NodeClaims are named <nodepool>-<suffix> (nodeclaimtemplate.go)
        return not pools or any(claim.startswith(f"{pool}-") for pool in pools)

    claim_types = {
        str((c.get("metadata") or {}).get("name")): str(
            ((c.get("metadata") or {}).get("labels") or {}).get("node.kubernetes.io/instance-type", "")
        )
        for c in nodeclaims
    }
    found: list[Finding] = []
    for claim in nodeclaims:
        name = str((claim.get("metadata") or {}).get("name"))
        if not ours(name):
            continue
        for cond in (claim.get("status") or {}).get("conditions") or []:
            hit = launched_condition(cond, claim_types.get(name) or instance_type, ctx)
            if hit:
                found.append(hit)
    ordered = sorted((e for e in events if _karpenter(e)), key=_time)
    claim_events = [e for e in ordered if (e.get("involvedObject") or {}).get("kind") == "NodeClaim"]
    for event in claim_events:
        claim_name = str((event.get("involvedObject") or {}).get("name"))
        if ours(claim_name):
            hit = capacity_event(
                str(event.get("message") or ""), claim_types.get(claim_name) or instance_type, ctx
            )
            if hit:
                found.append(hit)
    if joins is not None:
        found.extend(
            Finding(j.key, j.text, j.final, j.hint, kind="registration")
            for j in joins.observe(nodeclaims, ours, events)
        )
    refused = {f.instance_type for f in found if f.kind in ("capacity", "quota")}
    for event in ordered:
        involved = event.get("involvedObject") or {}
        pod = by_name.get(str(involved.get("name")))
        if involved.get("kind") != "Pod" or event.get("reason") != "FailedScheduling" or pod is None:
            continue
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
            continue  # it has a node now: what the scheduler said before no longer holds
        hit = unsatisfiable(event, pod, ctx, refused)
        if hit:
            found.append(hit)
    group = incomplete_group(pods, instance_type, nodes_per_replica)
    if group is not None:
        found.append(group)
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
        wait_note: str = "",
        explain: Callable[[Finding], ServingError] | None = None,
    ) -> None:
        self.poll = poll
        # the stop in the words of what `up` does (a surge under way: surge_stop.py), else the finding's
        self.explain = explain
        self.namespace = namespace
        self.say = say
        self.stop_hint = stop_hint
        self.wait_note = wait_note  # said once, with the first shortage: how long `up` waits, what bills
        self._noted = False
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
                text = f"Karpenter: {finding.text}"
                # a node that launched bills already: its own text says what (registrations.py)
                if (
                    not finding.final
                    and self.wait_note
                    and not self._noted
                    and finding.kind != "registration"
                ):
                    text, self._noted = f"{text}; {self.wait_note}", True
                self.say(text)
                if finding.final and self.final is None:
                    self.final = finding
            return self.final

    def error(self) -> ServingError:
        """The stop: the finding, what to do about it, and what still runs (``stop_hint``)."""
        assert self.final is not None
        if self.explain is not None:
            return self.explain(self.final)
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
