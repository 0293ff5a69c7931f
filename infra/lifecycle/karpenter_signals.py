"""Karpenter's words about a launch, sorted into what waiting fixes and what it never does.

Where each signal comes from (kubernetes-sigs/karpenter v1.14.1, aws/karpenter-provider-aws at
1d927085, the versions of ../shared/upstream; tests/lifecycle/data/karpenter/launch_signals.yaml
holds the recorded shapes with their files):

- A launch whose every EC2 CreateFleet error is one of the provider's unfulfillable-capacity codes
  (`pkg/errors/errors.go`) is an InsufficientCapacityError (`combineFleetErrors`,
  `pkg/providers/instance/instance.go`): Karpenter publishes an `InsufficientCapacityError` event on
  the NodeClaim ("NodeClaim N event: creating instance, insufficient capacity, with fleet error(s),
  CODE: EC2's text") and deletes the NodeClaim (`pkg/controllers/nodeclaim/lifecycle/launch.go`).
  The codes include the vCPU quota (VcpuLimitExceeded) and the spot count
  (MaxSpotInstanceCountExceeded), so "insufficient capacity" alone says nothing: the code decides.
- Any other launch error leaves the NodeClaim with `Launched` Unknown and the provider's
  `ToReasonMessage` reason (Unauthorized, VCPULimitExceeded, RequestLimitExceeded, ...).
- A refused offering (type, zone, capacity type) is skipped for 3 minutes (`pkg/cache/cache.go`
  UnavailableOfferingsTTL), during which the scheduler tells the pod "no instance type has the
  required offering"; the same sentence, with no refusal before it, means the pool can never
  launch the type (not offered in its zones, or its reservation has no free instance).

Final (waiting never helps): a quota, a permission, no offering ever, a pod bigger than any node.
Everything else (a capacity shortage, throttling, an unknown launch error) is reported and waited on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# pkg/errors/errors.go: codes that are quotas (a request to AWS fixes them, waiting does not)
QUOTA_CODES = {"VcpuLimitExceeded": "on-demand", "MaxSpotInstanceCountExceeded": "spot"}
# ... and the one permission code that combineFleetErrors also counts as capacity
PERMISSION_CODES = {"AuthFailure.ServiceLinkedRoleCreationNotPermitted"}
# the rest of unfulfillableCapacityErrorCodes: EC2 has none free there now, Karpenter retries
CAPACITY_CODES = {
    "InsufficientInstanceCapacity",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
}
# ToReasonMessage reasons on a NodeClaim's Launched=Unknown condition
QUOTA_REASONS = {"VCPULimitExceeded": "on-demand", "SpotQuotaExceeded": "spot"}
PERMISSION_REASONS = {"Unauthorized", "AMIAuthorizationFailure", "SpotSLRCreationFailed"}

# a condition not reconciled yet: operatorpkg's first Unknown (status/condition_set.go SetUnknown), which a
# new NodeClaim carries for Launched until the launch returns (registration_signals.yaml)
AWAITING_REASON = "AwaitingReconciliation"
UNAVAILABLE_OFFERINGS_TTL_MIN = 3  # provider pkg/cache/cache.go UnavailableOfferingsTTL

_FLEET = re.compile(r"insufficient capacity, with fleet error\(s\), (.*)", re.DOTALL)
_CODE = re.compile(r"^([A-Z][A-Za-z]+(?:\.[A-Za-z]+)?): ?(.*)$", re.DOTALL)
_ZONE = re.compile(r"Availability Zone you requested \(([a-z0-9-]+)\)")
_NAMED_TYPE = re.compile(r"sufficient ([a-z0-9-]+\.[a-z0-9-]+) capacity")
_VCPU_LIMIT = re.compile(r"vCPU limit of (\d+)")
_UNAVAILABLE_AT_LAUNCH = "all requested instance types were unavailable during launch"

# InstanceTypeFilterError sentences (scheduling/nodeclaim.go): the prefix says which criteria failed
_OFFERING_ONLY = (
    "no instance type has the required offering",
    "no instance type which met the scheduling requirements and had enough resources, had a required offering",
    "no instance type met the requirements/resources/offering tuple",
)
_RESOURCES = (
    "no instance type met the scheduling requirements or had enough resources",  # also the three-way one
    "no instance type had enough resources or had a required offering",
    "no instance type has enough resources",
    "no instance type which met the scheduling requirements and the required offering had the required resources",
)
_REQUIREMENTS = (
    "no instance type met the scheduling requirements or had a required offering",
    "no instance type met all requirements",
    "no instance type which had enough resources and the required offering met the scheduling requirements",
)
_CLAUSE = re.compile(
    r"(no instance type [^,]*(?:, had a required offering)?), requirements=(.*?), resources=(.*)$"
)


@dataclass(frozen=True)
class FleetError:
    """One `CODE: text` of a launch's fleet errors."""

    code: str
    text: str

    @property
    def instance_type(self) -> str | None:
        named = _NAMED_TYPE.search(self.text)
        return named.group(1) if named else None

    @property
    def zone(self) -> str | None:
        found = _ZONE.search(self.text)
        return found.group(1) if found else None


def fleet_errors(message: str) -> list[FleetError]:
    """The fleet errors an InsufficientCapacityError event carries (empty: not such an event).

    The message may be cut at 300 characters ("..."): a cut code is kept with what is left of its text."""
    found = _FLEET.search(message)
    if not found:
        return []
    out = []
    for part in found.group(1).split("; "):
        code = _CODE.match(part.strip())
        if code:
            out.append(FleetError(code.group(1), code.group(2)))
    return out


def capacity_kind(errors: list[FleetError]) -> str:
    """'quota', 'permission' or 'capacity': what an InsufficientCapacityError really is."""
    codes = {e.code for e in errors}
    if codes & QUOTA_CODES.keys():
        return "quota"
    if codes & PERMISSION_CODES:
        return "permission"
    return "capacity"


def vcpu_limit(errors: list[FleetError]) -> int | None:
    """The vCPU limit EC2 names in a VcpuLimitExceeded text, when the text was not cut before it."""
    for error in errors:
        found = _VCPU_LIMIT.search(error.text)
        if error.code == "VcpuLimitExceeded" and found:
            return int(found.group(1))
    return None


def unavailable_at_launch(message: str) -> bool:
    """The provider's filter found every offering already refused between scheduling and launch."""
    return _UNAVAILABLE_AT_LAUNCH in message


@dataclass(frozen=True)
class Unschedulable:
    """One InstanceTypeFilterError of a pod's FailedScheduling event."""

    criterion: str  # 'resources', 'requirements' or 'offering'
    sentence: str
    requirements: str
    resources: str

    @property
    def reserved_only(self) -> bool:
        """The pool may launch only reserved capacity (`karpenter.sh/capacity-type In [reserved]`)."""
        return "karpenter.sh/capacity-type In [reserved]" in self.requirements


def unschedulable(message: str) -> Unschedulable | None:
    """The InstanceTypeFilterError in a Karpenter FailedScheduling message (several NodePools' errors
    are joined with '; '; the one about instance types is the one that says why no node comes)."""
    body = message.removeprefix("Failed to schedule pod, ")
    for clause in re.split(r"; (?=no instance type )", body):
        found = _CLAUSE.search(clause)
        if not found:
            continue
        sentence = found.group(1)
        if sentence.startswith(_OFFERING_ONLY):
            criterion = "offering"
        elif sentence.startswith(_RESOURCES):
            criterion = "resources"
        elif sentence.startswith(_REQUIREMENTS):
            criterion = "requirements"
        else:
            continue
        return Unschedulable(criterion, sentence, found.group(2), found.group(3).strip())
    return None
