"""The capacity reservations a blueprint names, as EC2 reports them (`DescribeCapacityReservations`):
is each active, in which AZ, for which instance type, and how many instances remain. `llmctl doctor`
lists them; `up`'s preflight refuses a blueprint whose reservations cannot hold it.

A blueprint's reservations can hold it when the matching, active reservations of its instance type
have room for the nodes it starts with. With `fallback: on-demand` a shortfall is only a warning
(Karpenter launches on-demand nodes for the rest); with `fallback: none` it is a failure.

A blueprint whose pool launches into a cluster placement group (a replica over several nodes,
`pools.pool_for_blueprint`) is warned of usable reservations not made in a placement group
(`PlacementGroupArn` unset): EC2's placement group rules say a matching On-Demand Capacity
Reservation is used by an instance launched into a placement group too, and recommend reserving in
the cluster placement group itself (EC2 User Guide, "Placement group rules and limitations").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import pool_for_blueprint
from llmctl.blueprints.pricing import node_plan
from llmctl.infra.aws.checks import Check, client_error


@dataclass(frozen=True)
class Reservation:
    """One capacity reservation, the fields llmctl reads."""

    id: str
    state: str
    instance_type: str
    zone: str
    zone_id: str
    available: int
    total: int
    kind: str  # "default" (an On-Demand Capacity Reservation) or "capacity-block"
    end: str | None
    placement_group: str | None = None  # the cluster placement group it was made in (its name)

    @classmethod
    def from_ec2(cls, item: dict[str, Any]) -> Reservation:
        end: Any = item.get("EndDate")
        if end is not None and hasattr(end, "isoformat"):
            end = end.isoformat()
        return cls(
            id=str(item["CapacityReservationId"]),
            state=str(item.get("State", "unknown")),
            instance_type=str(item.get("InstanceType", "")),
            zone=str(item.get("AvailabilityZone", "")),
            zone_id=str(item.get("AvailabilityZoneId", "")),
            available=int(item.get("AvailableInstanceCount", 0)),
            total=int(item.get("TotalInstanceCount", 0)),
            kind=str(item.get("ReservationType", "default")),
            end=str(end) if end else None,
            placement_group=str(item["PlacementGroupArn"]).rsplit("/", 1)[-1]
            if item.get("PlacementGroupArn")
            else None,
        )

    def describe(self) -> str:
        """'cr-0123 active in us-west-2a (usw2-az1), p4de.24xlarge, 1 of 2 free'."""
        kind = "capacity block" if self.kind == "capacity-block" else "ODCR"
        until = f", ends {self.end}" if self.end else ""
        group = f", in placement group {self.placement_group}" if self.placement_group else ""
        return (
            f"{self.id} {self.state} in {self.zone} ({self.zone_id}), {self.instance_type}, "
            f"{self.available} of {self.total} free ({kind}{until}{group})"
        )


def _term_text(term: str | dict[str, str]) -> str:
    return term if isinstance(term, str) else "tags " + ", ".join(f"{k}={v}" for k, v in term.items())


def describe_term(ec2: Any, term: str | dict[str, str]) -> list[Reservation]:
    """The reservations one selector term matches (an ID, or tags with '*' for any value)."""
    if isinstance(term, str):
        reply = ec2.describe_capacity_reservations(CapacityReservationIds=[term])
    else:
        filters = [
            {"Name": "tag-key", "Values": [key]}
            if value == "*"
            else {"Name": f"tag:{key}", "Values": [value]}
            for key, value in term.items()
        ]
        reply = ec2.describe_capacity_reservations(Filters=filters)
    return [Reservation.from_ec2(item) for item in reply.get("CapacityReservations", [])]


def check_reservations(
    session: Any, region: str, blueprint: Any, az_ids: list[str] | None = None
) -> list[Check]:
    """One check per selector term, then whether the usable reservations hold the starting nodes."""
    from botocore.exceptions import BotoCoreError, ClientError

    capacity = blueprint.capacity
    if capacity is None:
        return []
    ec2 = session.client("ec2", region_name=region)
    wanted = blueprint.compute.instance_type
    checks: list[Check] = []
    usable: dict[str, Reservation] = {}
    for term in capacity.reservations:
        name = f"capacity reservation {_term_text(term)}"
        try:
            found = describe_term(ec2, term)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code.startswith("InvalidCapacityReservationId"):
                checks.append(Check(name, False, f"EC2 has no such reservation ({code})", _fix_term()))
            else:
                checks.append(Check(name, None, f"could not check: {client_error(exc)}", None))
            continue
        except BotoCoreError as exc:
            checks.append(Check(name, None, f"could not check: {exc}", None))
            continue
        if not found:
            checks.append(Check(name, False, "no capacity reservation matches it in " + region, _fix_term()))
            continue
        problems = []
        for item in found:
            if item.state != "active":
                problems.append(f"{item.id} is {item.state}, not active")
            elif item.instance_type != wanted:
                problems.append(f"{item.id} reserves {item.instance_type}, not {wanted}")
            elif az_ids and item.zone_id and item.zone_id not in az_ids:
                problems.append(
                    f"{item.id} is in {item.zone_id}, outside the platform's AZs ({', '.join(az_ids)})"
                )
            else:
                usable[item.id] = item
        detail = "; ".join(item.describe() for item in found)
        ok = len(problems) < len(found)
        checks.append(
            Check(
                name,
                ok,
                detail + (f" ({'; '.join(problems)})" if problems else ""),
                None
                if ok
                else f"reserve {wanted} in one of the platform's AZs, or name a reservation that is active",
            )
        )
    if all(check.ok is None for check in checks):
        return checks
    checks.extend(_placement_group_check(blueprint, usable))
    plan = node_plan(blueprint, hardware())
    free = sum(item.available for item in usable.values())
    detail = f"{free} free {wanted} in {len(usable)} usable reservation(s); the blueprint starts {plan.nodes} node(s)"
    if free >= plan.nodes:
        checks.append(Check("capacity reservations hold the blueprint", True, detail))
    elif capacity.fallback == "on-demand":
        checks.append(
            Check(
                "capacity reservations hold the blueprint",
                None,
                detail + "; the rest launch on-demand (fallback: on-demand)",
                None,
            )
        )
    else:
        checks.append(
            Check(
                "capacity reservations hold the blueprint",
                False,
                detail + " and fallback is none, so the rest would never launch",
                f"reserve {plan.nodes - free} more {wanted}, lower scaling.replicas, or set capacity.fallback: on-demand",
            )
        )
    return checks


def _placement_group_check(blueprint: Any, usable: dict[str, Reservation]) -> list[Check]:
    """A warning for the usable reservations outside any placement group, where the blueprint's pool
    launches into one (none otherwise)."""
    pool = pool_for_blueprint(blueprint, hardware())
    outside = sorted(item.id for item in usable.values() if item.placement_group is None)
    if pool.placement is None or not outside:
        return []
    return [
        Check(
            "capacity reservations in the cluster placement group",
            None,
            f"{', '.join(outside)} not made in a placement group: EC2 uses a matching reservation for "
            f"a launch into the {pool.name} pool's cluster placement group too, but recommends "
            "reserving in the group itself",
            f"reserve in the platform's group <cluster>-{pool.name} (create-capacity-reservation "
            "--placement-group-arn), made by `up`",
        )
    ]


def _fix_term() -> str:
    return (
        "check the ID or tags and the region (`aws ec2 describe-capacity-reservations`), or drop the term from "
        "capacity.reservations"
    )
