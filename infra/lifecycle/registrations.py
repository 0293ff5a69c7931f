"""Nodes that launch but never join: each NodeClaim followed past `Launched`, across polls.

What Karpenter does (kubernetes-sigs/karpenter v1.14.1 = 6e7eab7a, the version the AWS provider
v1.14.1 pins in its go.mod; tests/lifecycle/data/karpenter/registration_signals.yaml names every line):

- A NodeClaim's `Registered` condition stays Unknown until its Node joins: `NodeNotFound` "Node not
  registered with cluster" (`pkg/controllers/nodeclaim/lifecycle/registration.go` 68), or
  `RegistrationHookPending` while a provider hook waits (171); it goes True with reason `Registered`
  (119). `Initialized` then waits on the Node: `NodeNotReady`, `StartupTaintsExist`,
  `KnownEphemeralTaintsExist`, `ResourceNotRegistered` (a device plugin has not advertised the
  accelerator), `DRADriverPoolsNotPublished` (`initialization.go` 67-89), True with `Initialized` (100).
- The liveness check (`liveness.go` 51-55, 89-109) deletes a NodeClaim whose `Registered` has not
  gone True 15 minutes after that condition's lastTransitionTime, which is the NodeClaim's creation
  (operatorpkg sets a dependent condition's first lastTransitionTime to the creation timestamp and
  keeps it while the status stays Unknown). It publishes no event and writes no condition for it:
  the NodeClaim gets a deletionTimestamp, `InstanceTerminating` goes True once EC2 is asked to
  terminate the instance (`controller.go` 233-240), and the NodeClaim is gone when the finalizer is
  removed (263; operatorpkg's status controller then records a `Finalized karpenter.sh/termination`
  event). The pods are still pending, so the provisioner launches another NodeClaim of the same
  NodePool for them: a new node, paid again, every 15 minutes.

So the watch keeps what it saw of each NodeClaim: one that was not registered and is being deleted
(its deletionTimestamp), or gone (its `Finalized` event's time, else the poll that found it gone), at
or after its deadline was deleted by the liveness check; earlier, something else deleted it. Without
the event (operatorpkg records it best effort), a NodeClaim another controller deleted within one
poll before its deadline cannot be told apart and counts. `up` says each not-yet-joined
node's age against the deadline, each such deletion with what the node cost, and stops (a final
finding) at the second relaunch of a NodePool instead of waiting to pay for a third.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from llmctl.errors import LlmctlError

REGISTRATION_TTL = timedelta(minutes=15)  # liveness.go 52 registrationTimeout
RELAUNCH_LIMIT = 2  # `up` stops at the second relaunch (issue 51)
NEW_NODE = timedelta(minutes=3)  # an EC2 node usually joins within 1-3 minutes of its launch
NOTE_EVERY = NEW_NODE  # past that, a progress note every 3 minutes while a node has not joined

POOL_LABEL = "karpenter.sh/nodepool"
TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
CAPACITY_LABEL = "karpenter.sh/capacity-type"

# what the Initialized reasons of initialization.go mean for a node that joined but is not ready for pods
INITIALIZED_MEANING = {
    "NodeNotReady": "the kubelet does not report Ready (the CNI or the kubelet itself)",
    "StartupTaintsExist": "a startup taint is still on the node",
    "KnownEphemeralTaintsExist": "the node still has a not-ready or unreachable taint",
    "ResourceNotRegistered": "the device plugin has not advertised the accelerator yet",
    "DRADriverPoolsNotPublished": "a DRA driver has not published its devices",
}


def utc_now() -> datetime:
    return datetime.now(UTC)


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _minutes(delta: timedelta) -> int:
    return max(0, int(delta.total_seconds() // 60))


@dataclass(frozen=True)
class Claim:
    """One NodeClaim as kubectl shows it: where it runs and how far it got."""

    name: str
    pool: str
    instance_type: str
    zone: str
    capacity_type: str
    provider_id: str
    created: datetime
    launched: datetime | None  # Launched=True's lastTransitionTime
    registered: dict[str, Any]  # the Registered condition ({} before the first reconcile)
    initialized: dict[str, Any]
    deleting: datetime | None  # metadata.deletionTimestamp

    @classmethod
    def read(cls, obj: dict[str, Any]) -> Claim | None:
        meta = obj.get("metadata") or {}
        created = _time(meta.get("creationTimestamp"))
        if created is None:
            return None
        labels = meta.get("labels") or {}
        status = obj.get("status") or {}
        conditions = {str(c.get("type")): c for c in status.get("conditions") or []}
        launched = conditions.get("Launched") or {}
        name = str(meta.get("name") or "")
        return cls(
            name=name,
            pool=str(labels.get(POOL_LABEL) or name.rsplit("-", 1)[0]),
            instance_type=str(labels.get(TYPE_LABEL) or ""),
            zone=str(labels.get(ZONE_LABEL) or ""),
            capacity_type=str(labels.get(CAPACITY_LABEL) or ""),
            provider_id=str(status.get("providerID") or ""),
            created=created,
            launched=_time(launched.get("lastTransitionTime")) if launched.get("status") == "True" else None,
            registered=conditions.get("Registered") or {},
            initialized=conditions.get("Initialized") or {},
            deleting=_time(meta.get("deletionTimestamp")),
        )

    @property
    def joined(self) -> bool:
        return self.registered.get("status") == "True"

    @property
    def deadline(self) -> datetime:
        """When the liveness check deletes it unless it registers (liveness.go 94)."""
        return (_time(self.registered.get("lastTransitionTime")) or self.created) + REGISTRATION_TTL

    @property
    def instance_id(self) -> str:
        """The EC2 instance of `aws:///<zone>/<id>` (provider cloudprovider.go 500)."""
        return self.provider_id.rsplit("/", 1)[-1] if self.provider_id.startswith("aws://") else ""

    def where(self) -> str:
        parts = [self.instance_type or "instance type not known yet"]
        if self.zone:
            parts[0] += f" in {self.zone}"
        parts.append(self.instance_id or self.provider_id or "no instance id yet")
        return ", ".join(parts)


def hourly_price(instance_type: str, capacity_type: str) -> float | None:
    """What one node of the type costs per hour (the hardware catalog): spot at its recent price when
    the catalog has one, else on-demand (an upper bound); None for a type the catalog lacks."""
    from llmctl.blueprints.hardware import hardware  # lazy: kube.py reads this module's constants

    try:
        instance = hardware().instance(instance_type)
    except LlmctlError:
        return None
    if capacity_type == "spot" and instance.spot_usd is not None:
        return instance.spot_usd
    return instance.on_demand_usd


@dataclass(frozen=True)
class NeverJoined:
    """A node the liveness check deleted: how long it ran and what that cost."""

    claim: Claim
    ended: datetime
    hourly_usd: float | None

    @property
    def ran(self) -> timedelta:
        return self.ended - (self.claim.launched or self.claim.created)

    @property
    def cost_usd(self) -> float | None:
        return None if self.hourly_usd is None else self.hourly_usd * self.ran.total_seconds() / 3600

    def text(self) -> str:
        cost = "cost not known" if self.cost_usd is None else f"about ${self.cost_usd:.2f}"
        seconds = max(0, int(self.ran.total_seconds()))
        return (
            f"{self.claim.name} ({self.claim.where()}) ran {seconds // 60} min {seconds % 60:02d} s, {cost}"
        )


@dataclass(frozen=True)
class JoinFinding:
    """What the join watch says (turned into a launches.Finding by the caller)."""

    key: str
    text: str
    final: bool
    hint: str = ""


def _why(claims: list[Claim], cluster: str, region: str) -> str:
    """What usually keeps a launched node from joining, and where to look."""
    ids = [c.instance_id for c in claims if c.instance_id]
    console = (
        f"`aws ec2 get-console-output --instance-id {ids[-1]} --region {region} --latest` shows the last node's "
        "boot log (nodeadm, kubelet)"
        if ids
        else ""
    )
    role = f"{cluster}-karpenter-node" if cluster else "the Karpenter node role"
    access = f"`aws eks list-access-entries --cluster-name {cluster} --region {region}`" if cluster else ""
    return (
        "a node that launches but never joins usually has an AMI that does not suit the instance (the "
        "EC2NodeClass's amiSelectorTerms alias or variant: AL2023's NVIDIA or Neuron variant for an accelerator), "
        f"no EKS access entry of type EC2_LINUX for its role {role}"
        + (f" ({access} lists it)" if access else "")
        + ", broken user data, or a subnet without a route to the cluster API (NAT gateway or private "
        f"endpoint){'; ' + console if console else ''}"
    )


def _finalized(events: list[dict[str, Any]]) -> dict[str, datetime]:
    """When each NodeClaim's termination finalizer went: operatorpkg's `Finalized` event on it
    (status/controller.go; best effort, so it may be missing)."""
    out: dict[str, datetime] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        at = _time(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))
        if involved.get("kind") == "NodeClaim" and event.get("reason") == "Finalized" and at is not None:
            out[str(involved.get("name"))] = at
    return out


class JoinWatch:
    """Follows the workload's NodeClaims across polls (thread-safe: `up` polls from two phases)."""

    def __init__(
        self,
        *,
        cluster: str = "",
        region: str = "",
        clock: Callable[[], datetime] = utc_now,
        price: Callable[[str, str], float | None] = hourly_price,
    ) -> None:
        self.cluster = cluster
        self.region = region
        self.clock = clock
        self.price = price
        self.waiting: dict[str, Claim] = {}  # launched, not joined, at the last poll
        self.counted: set[str] = set()  # NodeClaims already counted as deleted by the liveness check
        self.failed: dict[str, list[NeverJoined]] = {}  # per NodePool, oldest first
        self._lock = threading.Lock()

    def observe(
        self,
        objects: list[dict[str, Any]],
        ours: Callable[[str], bool],
        events: list[dict[str, Any]] | None = None,
    ) -> list[JoinFinding]:
        """One poll's NodeClaims (`ours`: whether a NodeClaim name is of the workload's pools) and
        events (operatorpkg's `Finalized` event dates a NodeClaim that went between two polls)."""
        now = self.clock()
        finalized = _finalized(events or [])
        claims = [c for obj in objects if (c := Claim.read(obj)) is not None and ours(c.name)]
        current = {c.name: c for c in claims}
        out: list[JoinFinding] = []
        with self._lock:
            ended: list[tuple[Claim, datetime]] = []
            for name, last in list(self.waiting.items()):
                seen = current.get(name)
                if seen is None:  # gone between two polls: when its finalizer went, else at the latest now
                    ended.append((last, min(finalized.get(name) or now, now)))
                if seen is None or seen.joined or seen.deleting is not None:
                    del self.waiting[name]
            for claim in claims:  # being deleted (also one this watch had not seen before)
                if claim.deleting is not None and not claim.joined and claim.launched is not None:
                    ended.append((claim, claim.deleting))
            for claim, at in ended:
                # before its deadline something else deleted it (consolidation, a person): not the liveness check
                if claim.name in self.counted or at < claim.deadline:
                    continue
                self.counted.add(claim.name)
                failed = NeverJoined(claim, at, self.price(claim.instance_type, claim.capacity_type))
                self.failed.setdefault(claim.pool, []).append(failed)
                out.append(self._relaunched(failed, claims))
            for claim in claims:
                if claim.deleting is not None or claim.launched is None:
                    continue
                if not claim.joined:
                    self.waiting[claim.name] = claim
                note = self._initializing(claim) if claim.joined else self._waiting(claim, now)
                if note is not None:
                    out.append(note)
        return out

    def _relaunched(self, failed: NeverJoined, claims: list[Claim]) -> JoinFinding:
        pool = failed.claim.pool
        history = self.failed[pool]
        newer = sorted(
            (c for c in claims if c.pool == pool and c.created > failed.claim.created and c.deleting is None),
            key=lambda c: c.created,
        )
        replacement = newer[-1] if newer else None
        nth = len(history)
        if nth >= RELAUNCH_LIMIT:
            return self._stop(pool, history, replacement)
        then = (
            f"Karpenter launched {replacement.name} for the same pods"
            if replacement is not None
            else "Karpenter launches another for the same pods"
        )
        return JoinFinding(
            f"never-joined:{failed.claim.name}",
            f"node {failed.text()}, and never joined the cluster: Karpenter deleted it "
            f"{_minutes(REGISTRATION_TTL)} min after it was created; {then} (relaunch {nth}; `up` stops at relaunch "
            f"{RELAUNCH_LIMIT} rather than pay for another); {_why([failed.claim], self.cluster, self.region)}",
            final=False,
        )

    def _stop(self, pool: str, history: list[NeverJoined], replacement: Claim | None) -> JoinFinding:
        costs = [f.cost_usd for f in history]
        total = (
            f"together about ${sum(c for c in costs if c is not None):.2f}"
            if all(c is not None for c in costs)
            else "cost not known for all"
        )
        hourly = (
            None if replacement is None else self.price(replacement.instance_type, replacement.capacity_type)
        )
        running = (
            "Karpenter launches another node for them"
            if replacement is None
            else f"{replacement.name} ({replacement.where()}) runs now"
            + ("" if hourly is None else f" at about ${hourly:.2f}/h")
        )
        return JoinFinding(
            f"never-joined-stop:{pool}",
            f"{len(history)} nodes of NodePool {pool} launched and never joined the cluster: "
            + "; ".join(f.text() for f in history)
            + f" ({total}); Karpenter deleted each {_minutes(REGISTRATION_TTL)} min after it was created and "
            f"relaunched {len(history)} times: `up` stops here rather than pay for a third; {running}, and "
            f"Karpenter launches another every {_minutes(REGISTRATION_TTL)} min while the workload's pods wait",
            final=True,
            hint=_why([f.claim for f in history], self.cluster, self.region),
        )

    def _waiting(self, claim: Claim, now: datetime) -> JoinFinding | None:
        """A launched node not joined after a few minutes: its age against the 15-minute deadline."""
        age = now - (_time(claim.registered.get("lastTransitionTime")) or claim.created)
        mark = int(age / NOTE_EVERY)
        if mark < 1:
            return None
        left = _minutes(claim.deadline - now)
        reason = str(claim.registered.get("reason") or "")
        said = f", Registered {reason}: {claim.registered.get('message')}" if reason else ""
        relaunch = len(self.failed.get(claim.pool, []))
        after = f"; relaunch {relaunch}" if relaunch else ""
        ending = (
            f"Karpenter deletes it and launches another if it has not joined {_minutes(REGISTRATION_TTL)} min after it "
            f"was created ({left} min left)"
            if left > 0
            else f"past Karpenter's {_minutes(REGISTRATION_TTL)}-min deadline: it deletes it and launches another"
        )
        return JoinFinding(
            f"joining:{claim.name}:{mark}",
            f"node {claim.name} ({claim.where()}{after}) has not joined the cluster {_minutes(age)} min after "
            f"Karpenter created it{said}; {ending}",
            final=False,
        )

    def _initializing(self, claim: Claim) -> JoinFinding | None:
        """A node that joined and is not initialized: Karpenter's reason, once per reason."""
        cond = claim.initialized
        reason = str(cond.get("reason") or "")
        if cond.get("status") == "True" or reason not in INITIALIZED_MEANING:
            return None
        return JoinFinding(
            f"initializing:{claim.name}:{reason}",
            f"node {claim.name} ({claim.where()}) joined the cluster but is not initialized: "
            f"{cond.get('message')} ({reason}: {INITIALIZED_MEANING[reason]})",
            final=False,
        )
