"""Find and delete what in-cluster controllers leave behind after a cluster is destroyed.

The AWS Load Balancer Controller, Karpenter, the VPC CNI, the EBS CSI driver, EKS and the
CloudWatch Observability add-on create AWS objects that no Pulumi stack tracks. Left behind, they
keep costing money and block VPC deletion. The sweep finds them *only* by tags (or, for log groups,
names) that name the cluster, and deletes them in an order that lets each deletion succeed. What
each kind is, how it is found and deleted and what it waits for is one row of `sweep_kinds.TABLE`.

`leftovers()` is the final check `llmctl down` runs: everything still tagged for the cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.errors import BadInput, CloudError
from llmctl.infra.aws.session import new_session
from llmctl.infra.aws.sweep_kinds import BY_NAME, KINDS, TABLE, Kind, Scope, cluster_tag_reason
from llmctl.state import check_name

__all__ = ["KINDS", "Leftover", "SweepReport", "Sweeper", "cluster_tag_reason", "leftovers", "sweep"]


@dataclass(frozen=True)
class Leftover:
    """One AWS object tagged for the cluster."""

    kind: str
    id: str
    name: str
    region: str
    reason: str
    arn: str | None = None

    def label(self) -> str:
        """'load-balancer k8s-llm-abc (arn...)' for messages."""
        extra = f" ({self.name})" if self.name and self.name != self.id else ""
        return f"{self.kind} {self.id}{extra}"


@dataclass
class SweepReport:
    """What a sweep found, deleted and failed to delete."""

    cluster: str
    region: str
    dry_run: bool
    found: list[Leftover] = field(default_factory=list)
    deleted: list[Leftover] = field(default_factory=list)
    failed: list[tuple[Leftover, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Deleting releases ENIs and volumes that the first scan saw attached: list them too.
        seen = set(self.found)
        self.found += [item for item in [*self.deleted, *(i for i, _ in self.failed)] if item not in seen]

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys: cluster, region, dry_run, found, deleted, failed."""
        return {
            "cluster": self.cluster,
            "region": self.region,
            "dry_run": self.dry_run,
            "found": [asdict(item) for item in self.found],
            "deleted": [asdict(item) for item in self.deleted],
            "failed": [{**asdict(item), "error": error} for item, error in self.failed],
        }


# AWS still holds the object for something being deleted (an LB's ENIs, a detaching volume, a
# profile whose role is being removed).
RETRYABLE = (
    "DependencyViolation",
    "ResourceInUse",
    "InvalidNetworkInterface.InUse",
    "VolumeInUse",
    "DeleteConflict",
)
# Already gone (a second run, or AWS cleaned it up): EC2/ELB codes end in NotFound, plus these.
GONE = ("NoSuchEntity", "ResourceNotFoundException")
WAIT_DELAY_S = 5
RETRY_FIRST_S = 2.0
RETRY_MAX_S = 30.0


class Sweeper:
    """Finds and deletes one cluster's leftovers in one region (boto3 clients from a session).

    `sleep` and `clock` are the retry loop's; tests pass their own to take no real time.
    """

    def __init__(
        self,
        cluster: str,
        region: str,
        session: Any = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:

        self.cluster = cluster
        self.region = region
        self.session: Any = session or new_session(region)
        self.sleep = sleep
        self.clock = clock
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        """One boto3 client per service, made on first use."""
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region)
        return self._clients[service]

    # ---- finding -------------------------------------------------------------------------
    def scan(self, kind: Kind, *, detached_only: bool = True) -> list[Leftover]:
        """The objects of one kind that are this cluster's."""
        scope = Scope(self.cluster, self.region, detached_only)
        found = []
        for item in kind.list(self.client(kind.service), scope):
            reason = kind.owned(scope, item)
            if reason:
                found.append(Leftover(kind.name, item.id, item.name, self.region, reason, item.arn))
        return found

    def find(self, *, detached_only: bool = True) -> list[Leftover]:
        """Everything tagged for the cluster, in deletion order."""
        try:
            return [item for kind in TABLE for item in self.scan(kind, detached_only=detached_only)]
        except Exception as exc:
            raise translate_aws_error(exc, self.region) from None

    # ---- deleting ------------------------------------------------------------------------
    def delete(
        self,
        items: list[Leftover],
        *,
        timeout_s: float = 600,
        on_deleted: Callable[[Leftover], None] | None = None,
    ) -> tuple[list[Leftover], list[tuple[Leftover, str]]]:
        """Delete kind by kind in table order; dependency errors are retried until `timeout_s` runs out.

        Before a kind, wait until what it comes `after` is gone (terminated instances, deleted load
        balancers: their deletion is asynchronous); a `released` kind (ENIs, volumes) is rescanned
        then for the objects that are detached *now*, so the result may hold objects `items` did not.
        """
        deadline = self.clock() + timeout_s
        deleted: list[Leftover] = []
        failed: list[tuple[Leftover, str]] = []
        waited: set[str] = set()
        known = {item.id for item in items}
        for kind in TABLE:
            for name in [name for name in kind.after if name not in waited]:
                waited.add(name)
                self._wait_gone(BY_NAME[name], [i.id for i in deleted if i.kind == name], deadline)
            batch = [item for item in items if item.kind == kind.name]
            if kind.released:
                try:
                    batch += [item for item in self.scan(kind) if item.id not in known]
                except Exception as exc:
                    raise translate_aws_error(exc, self.region) from None
            for item in batch:
                error = self._delete_with_retry(kind, item, deadline)
                if error is None:
                    deleted.append(item)
                    if on_deleted:
                        on_deleted(item)
                else:
                    failed.append((item, error))
        return deleted, failed

    def _wait_gone(self, kind: Kind, ids: list[str], deadline: float) -> None:
        """Wait with the kind's waiter until the deleted objects are gone (what still depends on
        them is retried until the deadline anyway)."""
        from botocore.exceptions import BotoCoreError, ClientError, WaiterError

        remaining = deadline - self.clock()
        if kind.waiter is None or not ids or remaining <= 0:
            return
        waiter, arg = kind.waiter
        config = {"Delay": WAIT_DELAY_S, "MaxAttempts": max(1, int(remaining // WAIT_DELAY_S))}
        with contextlib.suppress(WaiterError, ClientError, BotoCoreError):
            self.client(kind.service).get_waiter(waiter).wait(**{arg: ids}, WaiterConfig=config)

    def _delete_with_retry(self, kind: Kind, item: Leftover, deadline: float) -> str | None:
        """None when deleted (or already gone), else the error; retries RETRYABLE codes with
        exponential backoff (2 s, 4 s, ... at most 30 s) while the deadline allows."""
        from botocore.exceptions import BotoCoreError, ClientError

        delay = RETRY_FIRST_S
        while True:
            try:
                kind.delete(self.client(kind.service), item.id)
                return None
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code.endswith("NotFound") or code in GONE:
                    return None
                if code not in RETRYABLE or self.clock() + delay > deadline:
                    return f"{code}: {exc.response.get('Error', {}).get('Message', '')}".strip()
            except BotoCoreError as exc:
                return str(exc)
            self.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)


def translate_aws_error(exc: Exception, region: str) -> Exception:
    """Turn botocore errors into a CloudError with a hint; anything else is returned unchanged."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, NoRegionError

    if isinstance(exc, NoCredentialsError):
        return CloudError(
            "no AWS credentials found",
            "configure credentials (`aws configure`, `aws sso login`, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)",
        )
    if isinstance(exc, NoRegionError):
        return CloudError("no AWS region set", "pass --region or set AWS_REGION")
    if isinstance(exc, EndpointConnectionError):
        return CloudError(f"cannot reach AWS in {region}: {exc}", "check the region name and your network")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        message = f"AWS refused the call ({code}): {error.get('Message', '')}"
        if code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException"):
            return CloudError(
                message,
                "the identity needs ec2:Describe*/Delete*, elasticloadbalancing:*, iam:*InstanceProfile* "
                "and logs:DescribeLogGroups/DeleteLogGroup permissions",
            )
        if code in ("AuthFailure", "InvalidClientTokenId", "ExpiredToken", "RequestExpired"):
            return CloudError(message, "refresh your credentials (`aws sso login` or new keys)")
        return CloudError(message, "re-run with --debug for details")
    return exc


def sweep(
    cluster: str,
    region: str,
    *,
    dry_run: bool = False,
    session: Any = None,
    timeout_s: float = 600,
    on_deleted: Callable[[Leftover], None] | None = None,
) -> SweepReport:
    """Find the cluster's leftovers and (unless `dry_run`) delete them."""
    sweeper = Sweeper(cluster, region, session)
    found = sweeper.find()
    deleted: list[Leftover] = []
    failed: list[tuple[Leftover, str]] = []
    if not dry_run and found:
        deleted, failed = sweeper.delete(found, timeout_s=timeout_s, on_deleted=on_deleted)
    return SweepReport(cluster, region, dry_run, found, deleted, failed)


def leftovers(cluster: str, region: str, *, session: Any = None) -> list[Leftover]:
    """Everything still tagged for the cluster, attached or not: `llmctl down`'s final check."""
    return Sweeper(cluster, region, session).find(detached_only=False)


def cluster_to_sweep(cluster: str | None, stack: str | None) -> str:
    """`sweep --stack ENV` (the cluster llmctl-ENV, like every other command's --stack) or
    `--cluster NAME` (a cluster of another name); exactly one of them."""
    if cluster and stack:
        raise BadInput(
            "--cluster and --stack exclude each other", f"pass --stack {stack} or --cluster {cluster}"
        )
    if not cluster and not stack:
        raise BadInput("which cluster? pass --stack ENV (its cluster llmctl-ENV) or --cluster NAME", None)
    return cluster or f"llmctl-{check_name('stack', stack or '')}"
