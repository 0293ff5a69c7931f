"""`llmctl doctor`: every check a deployment depends on, as data, each failure with its fix.

Checks here: AWS credentials and identity, the region, whether the blueprint's instance type is
offered in the platform's AZs (by AZ ID), the EC2 vCPU quota of that family against what the
blueprint needs at its autoscaling maximum, the pinned AMI alias and chart versions
(`pin_checks.py`), and the image digests the workload stack pinned at its first `up`
(`image_checks.check_stack_pins`: a tag that names another image now fails). The tools with their
versions and the Hugging Face token are the checks of `up`'s own preflight (infra/targets/needs.py),
added by infra/targets/doctor.py: one list for both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.blueprints import catalog  # catalog.load_blueprint is read at call time (tests swap it)
from llmctl.errors import LlmctlError
from llmctl.infra.aws.checks import Check, client_error
from llmctl.infra.aws.image_checks import check_stack_pins
from llmctl.infra.aws.pin_checks import pin_checks
from llmctl.infra.aws.preflight import require_local_credentials, resolve_region
from llmctl.infra.aws.quota import check_quota, platform_az_ids
from llmctl.infra.aws.reservations import check_reservations
from llmctl.infra.aws.session import new_session


@dataclass
class DoctorReport:
    """All checks; `ok` is False when any check failed."""

    region: str | None
    blueprint: str | None
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.ok is not False for check in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys: ok, region, blueprint, checks[name, ok, detail, fix]."""
        return {
            "ok": self.ok,
            "region": self.region,
            "blueprint": self.blueprint,
            "checks": [asdict(check) for check in self.checks],
        }


def check_identity(session: Any, region: str) -> tuple[Check, bool]:
    """STS identity; the bool says whether AWS calls can go on."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        ident = session.client("sts", region_name=region).get_caller_identity()
    except NoCredentialsError:
        return Check(
            "AWS credentials",
            False,
            "no AWS credentials found",
            "run `aws configure` or `aws sso login --profile NAME` (then export AWS_PROFILE=NAME)",
        ), False
    except (ClientError, BotoCoreError) as exc:
        return Check(
            "AWS credentials",
            False,
            f"STS refused the credentials ({client_error(exc)})",
            "refresh them (`aws sso login` or new keys)",
        ), False
    return Check("AWS credentials", True, f"account {ident['Account']} as {ident['Arn']}"), True


def check_region(session: Any, region: str) -> tuple[Check, dict[str, str]]:
    """The region answers and has AZs; returns AZ ID -> AZ name."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        zones = session.client("ec2", region_name=region).describe_availability_zones(
            Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
        )["AvailabilityZones"]
    except (ClientError, BotoCoreError) as exc:
        return Check(
            "region", False, f"{region}: {client_error(exc)}", "pass a valid --region, e.g. us-west-2"
        ), {}
    by_id = {
        zone["ZoneId"]: zone["ZoneName"] for zone in zones if zone.get("State", "available") == "available"
    }
    return Check("region", True, f"{region} ({len(by_id)} availability zones)"), by_id


def check_offerings(
    session: Any, region: str, instance_type: str, az_ids: list[str], zones: dict[str, str]
) -> Check:
    """Is the instance type offered in the chosen AZs (by AZ ID)?"""
    from botocore.exceptions import BotoCoreError, ClientError

    wanted = az_ids or sorted(zones)
    try:
        pages = (
            session.client("ec2", region_name=region)
            .get_paginator("describe_instance_type_offerings")
            .paginate(
                LocationType="availability-zone-id",
                Filters=[{"Name": "instance-type", "Values": [instance_type]}],
            )
        )
        offered = {row["Location"] for page in pages for row in page["InstanceTypeOfferings"]}
    except (ClientError, BotoCoreError) as exc:
        return Check(f"{instance_type} offered", None, f"cannot list offerings: {client_error(exc)}", None)
    present = [az for az in wanted if az in offered]
    missing = [az for az in wanted if az not in offered]
    name = f"{instance_type} in AZs"
    if not offered:
        return Check(
            name,
            False,
            f"{instance_type} is not offered in {region}",
            "choose another --region (inf2/trn1 are in us-east-1, us-east-2, us-west-2, ...)",
        )
    if len(present) < min(2, len(wanted)):
        elsewhere = sorted(offered - set(wanted))
        return Check(
            name,
            False,
            f"{instance_type} is offered in {', '.join(present) or 'none'} of the chosen AZs {', '.join(wanted)}",
            f"pick AZ IDs that offer it: {', '.join(elsewhere) or 'none in this region'} (platform setting az_ids)",
        )
    detail = f"offered in {', '.join(present)}" + (f" (not in {', '.join(missing)})" if missing else "")
    return Check(name, True, detail)


def _pins(bp: Any, stack: str, region: str, session: Any, chart_client: Any) -> list[Check]:
    """AMI alias and chart version checks; a platform config the blueprint cannot build is reported."""

    try:
        return pin_checks(bp, stack=stack, region=region, session=session, client=chart_client)
    except LlmctlError as exc:
        return [Check("pinned versions", None, f"could not check: {exc.message}", exc.hint)]


# The checks that need a region and working credentials, in the order doctor runs them.
ACCOUNT_CHECKS = ("region", "instance offerings", "vCPU quota", "capacity reservations", "AMI alias")


def skipped_checks(names: Iterable[str], because: str, fix: str | None) -> list[Check]:
    """Checks that could not run, listed as skipped with the reason (a warning, not a pass)."""
    return [Check(name, None, f"not run: {because}", fix, skipped=True) for name in names]


def account_checks(
    blueprint: str | None = None,
    *,
    region: str | None = None,
    stack: str = "dev",
    session: Any = None,
    chart_client: Any = None,
) -> DoctorReport:
    """The checks of the account and the region (`llmctl doctor` adds the tool and token checks `up`
    runs: infra/targets/doctor.py); the AWS checks after a failed credentials (or region) check are
    listed as skipped, with the reason.

    `chart_client`: the httpx client for chart repositories (default: a new one)."""

    bp = catalog.load_blueprint(blueprint) if blueprint else None
    try:
        resolved: str | None = resolve_region(region)
    except LlmctlError as exc:
        resolved = None
        report = DoctorReport(region=None, blueprint=bp.name if bp else None)
        report.checks.append(Check("region", False, exc.message, exc.hint))
    else:
        report = DoctorReport(region=resolved, blueprint=bp.name if bp else None)
    if resolved:
        session = session or new_session(resolved)
        identity, can_go_on = check_identity(session, resolved)
        report.checks.append(identity)
        if can_go_on:
            region_check, zones = check_region(session, resolved)
            report.checks.append(region_check)
            if bp is not None and zones:
                az_ids = platform_az_ids(bp, stack, resolved)
                report.checks.append(
                    check_offerings(session, resolved, bp.compute.instance_type, az_ids, zones)
                )
                report.checks.append(check_quota(session, resolved, bp))

                report.checks.extend(check_reservations(session, resolved, bp, az_ids))
        if not can_go_on:
            report.checks.extend(
                skipped_checks(
                    ACCOUNT_CHECKS if bp is not None else ACCOUNT_CHECKS[:1],
                    "needs working AWS credentials",
                    "fix the credentials check above",
                )
            )
        report.checks.extend(_pins(bp, stack, resolved, session if can_go_on else None, chart_client))
    else:
        report.checks.append(check_local_credentials())
        if bp is not None:
            report.checks.extend(
                skipped_checks(
                    (*ACCOUNT_CHECKS[1:], "pinned versions"),
                    "needs an AWS region",
                    "fix the region check above",
                )
            )
    if bp is not None:
        # the digests the workload stack pinned at its first `up`: does each tag still name its image?
        report.checks.extend(check_stack_pins(stack, bp.name, chart_client))
    return report


def check_local_credentials() -> Check:
    """Without a region no call to AWS can be made; whether credentials are configured is still told
    (boto's chain, no call)."""
    try:
        require_local_credentials()
    except LlmctlError as exc:
        return Check("AWS credentials", False, exc.message, exc.hint)
    return Check("AWS credentials", None, "configured (not checked with AWS: no region)", None)
