"""The sweep's mechanics, called directly (seconds): which listed objects are the cluster's, the
order kinds are deleted in, the waits for what a kind comes after, the rescan of released kinds,
the retries of dependency errors up to the deadline, what counts as already gone, the errors
turned into one message with a fix, and the report.

The table is data (`sweep_kinds.TABLE`; its rows are tested against moto in test_sweep.py): here a
four-row table over an in-memory account replaces it, so each mechanism is pinned without AWS.
Errors are botocore's own exception classes with AWS's error codes."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ReadTimeoutError,
    WaiterError,
)

from llmctl.errors import BadInput, CloudError
from llmctl.infra.aws import sweep as sweep_module
from llmctl.infra.aws.sweep import (
    Leftover,
    Sweeper,
    SweepReport,
    cluster_to_sweep,
    leftovers,
    sweep,
    translate_aws_error,
)
from llmctl.infra.aws.sweep_kinds import Candidate, Kind, Scope

CLUSTER = "c1"
REGION = "eu-west-1"


def client_error(code: str, message: str = "says AWS") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Delete")


@dataclass
class Thing:
    kind: str
    id: str
    cluster: str = CLUSTER
    attached_to: str | None = None  # a node: listed as attached until that node is deleted
    arn: str | None = None


@dataclass
class Account:
    """AWS objects in memory; what a delete of an id raises next (codes, or exceptions)."""

    things: dict[str, Thing] = field(default_factory=dict)
    errors: dict[str, list[Any]] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    clients: list[tuple[str, str | None]] = field(default_factory=list)
    wait_error: Exception | None = None
    list_error: dict[str, Exception] = field(default_factory=dict)

    def add(self, *things: Thing) -> None:
        for thing in things:
            self.things[thing.id] = thing

    # the session and its clients
    def client(self, service: str, region_name: str | None = None) -> Any:
        self.clients.append((service, region_name))
        return Client(self, service)

    def listing(self, kind: str, scope: Scope) -> Iterator[Candidate]:
        if kind in self.list_error:
            raise self.list_error[kind]
        self.calls.append(("list", kind, scope.detached_only))
        for thing in list(self.things.values()):
            if thing.kind != kind:
                continue
            if scope.detached_only and thing.attached_to in self.things:
                continue
            yield Candidate(thing.id, f"name-{thing.id}", {"cluster": thing.cluster}, thing.arn)

    def delete(self, kind: str, id_: str) -> None:
        self.calls.append(("delete", kind, id_))
        pending = self.errors.get(id_)
        if pending:
            error = pending.pop(0)
            raise client_error(error) if isinstance(error, str) else error
        self.things.pop(id_, None)


@dataclass
class Client:
    account: Account
    service: str

    def get_waiter(self, name: str) -> Any:
        account = self.account

        class Waiter:
            def wait(self, **kwargs: Any) -> None:
                account.calls.append(("wait", name, kwargs))
                if account.wait_error is not None:
                    raise account.wait_error

        return Waiter()


def owned(scope: Scope, item: Candidate) -> str | None:
    return f"cluster={scope.cluster}" if item.tags.get("cluster") == scope.cluster else None


def kind(name: str, service: str = "ec2", **extra: Any) -> Kind:
    return Kind(
        name,
        service,
        lambda client, scope: client.account.listing(name, scope),
        owned,
        lambda client, id_: client.account.delete(name, id_),
        **extra,
    )


TABLE = (
    kind("node", waiter=("node_gone", "Ids")),
    kind("lb", "elbv2", waiter=("lb_gone", "Arns")),
    kind("eni", after=("node", "lb"), released=True),
    kind("group", after=("node", "lb", "eni")),
)


@pytest.fixture(autouse=True)
def table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_module, "TABLE", TABLE)
    monkeypatch.setattr(sweep_module, "BY_NAME", {k.name: k for k in TABLE})


class FakeTime:
    """The retry loop's clock and sleep: sleeping advances the clock."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def sweeper(account: Account, time: FakeTime | None = None) -> Sweeper:
    time = time or FakeTime()
    return Sweeper(CLUSTER, REGION, account, sleep=time.sleep, clock=time.clock)


def ids(items: list[Leftover]) -> list[str]:
    return [item.id for item in items]


def deletes(account: Account) -> list[str]:
    return [call[2] for call in account.calls if call[0] == "delete"]


def waits(account: Account) -> list[tuple[str, dict[str, Any]]]:
    return [(call[1], call[2]) for call in account.calls if call[0] == "wait"]


# ---- finding ----------------------------------------------------------------------------------------
def test_scan_keeps_only_the_clusters_objects_with_their_reason_and_arn() -> None:
    account = Account()
    account.add(Thing("lb", "lb-1", arn="arn:lb-1"), Thing("lb", "lb-2", cluster="c10"), Thing("lb", "lb-3"))
    found = sweeper(account).scan(TABLE[1])
    assert found == [
        Leftover("lb", "lb-1", "name-lb-1", REGION, "cluster=c1", "arn:lb-1"),
        Leftover("lb", "lb-3", "name-lb-3", REGION, "cluster=c1", None),
    ]


def test_find_lists_kinds_in_table_order_detached_only_and_leftovers_all() -> None:
    account = Account()
    account.add(
        Thing("group", "g-1"),
        Thing("eni", "eni-attached", attached_to="n-1"),
        Thing("eni", "eni-free"),
        Thing("node", "n-1"),
        Thing("node", "n-other", cluster="other"),
    )
    assert ids(sweeper(account).find()) == ["n-1", "eni-free", "g-1"]
    assert ids(leftovers(CLUSTER, REGION, session=account)) == ["n-1", "eni-attached", "eni-free", "g-1"]
    assert {call[2] for call in account.calls if call[0] == "list"} == {True, False}


def test_one_client_per_service_in_the_sweepers_region() -> None:
    account = Account()
    account.add(Thing("node", "n-1"), Thing("lb", "lb-1"), Thing("eni", "e-1"))
    found = sweeper(account).find()
    assert len(found) == 3
    assert account.clients == [("ec2", REGION), ("elbv2", REGION)]


def test_a_refused_listing_is_one_cloud_error() -> None:
    account = Account(list_error={"lb": client_error("AccessDenied", "no elb")})
    with pytest.raises(CloudError) as info:
        sweeper(account).find()
    assert info.value.message == "AWS refused the call (AccessDenied): no elb"
    assert info.value.hint and "elasticloadbalancing:*" in info.value.hint


# ---- deleting ---------------------------------------------------------------------------------------
def test_kinds_are_deleted_in_table_order_whatever_the_order_found() -> None:
    account = Account()
    account.add(Thing("group", "g-1"), Thing("eni", "e-1"), Thing("lb", "lb-1"), Thing("node", "n-1"))
    found = [
        Leftover("group", "g-1", "", REGION, "r"),
        Leftover("eni", "e-1", "", REGION, "r"),
        Leftover("node", "n-1", "", REGION, "r"),
        Leftover("lb", "lb-1", "", REGION, "r"),
    ]
    seen: list[str] = []
    deleted, failed = sweeper(account).delete(found, on_deleted=lambda item: seen.append(item.id))
    assert deletes(account) == ["n-1", "lb-1", "e-1", "g-1"]
    assert ids(deleted) == seen == ["n-1", "lb-1", "e-1", "g-1"] and failed == []
    assert account.things == {}


def test_each_kind_waits_once_for_the_deleted_objects_of_what_it_comes_after() -> None:
    account = Account(errors={"n-2": ["UnauthorizedOperation"]})
    account.add(Thing("node", "n-1"), Thing("node", "n-2"), Thing("node", "n-3"), Thing("group", "g-1"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find(), timeout_s=600)
    assert ids(deleted) == ["n-1", "n-3", "g-1"] and [(i.id, e) for i, e in failed] == [
        ("n-2", "UnauthorizedOperation: says AWS")
    ]
    # only the nodes deleted are waited for, once, with attempts for the time left (600 s / 5 s);
    # no load balancer was deleted, so none is waited for, and an ENI has no waiter
    assert waits(account) == [
        ("node_gone", {"Ids": ["n-1", "n-3"], "WaiterConfig": {"Delay": 5, "MaxAttempts": 120}})
    ]
    assert [c[0] for c in account.calls].index("wait") < account.calls.index(("delete", "group", "g-1"))


def test_the_waits_attempts_fit_the_time_left_at_least_one() -> None:
    for timeout, attempts in [(12.5, 2), (9.9, 1), (3, 1)]:
        account = Account()
        account.add(Thing("node", "n-1"), Thing("eni", "e-1"))
        s = sweeper(account)
        s.delete(s.find(), timeout_s=timeout)
        assert waits(account) == [
            ("node_gone", {"Ids": ["n-1"], "WaiterConfig": {"Delay": 5, "MaxAttempts": attempts}})
        ]


def test_no_wait_once_the_deadline_has_passed_exactly() -> None:
    account = Account(errors={"n-1": ["DependencyViolation", "DependencyViolation"]})
    account.add(Thing("node", "n-1"), Thing("eni", "e-1"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find(), timeout_s=6)  # sleeps 2 s then 4 s: at the deadline exactly
    assert time.slept == [2.0, 4.0] and ids(deleted) == ["n-1", "e-1"] and failed == []
    assert waits(account) == []


def test_a_wait_with_less_than_a_second_left_still_asks_once() -> None:
    account = Account(errors={"n-1": ["DependencyViolation", "DependencyViolation"]})
    account.add(Thing("node", "n-1"), Thing("eni", "e-1"))
    s = sweeper(account)
    s.delete(s.find(), timeout_s=6.5)  # 6 s of retries: 0.5 s left
    assert waits(account) == [("node_gone", {"Ids": ["n-1"], "WaiterConfig": {"Delay": 5, "MaxAttempts": 1}})]


def test_without_a_timeout_the_sweep_has_600_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """`sweep` and `Sweeper.delete` default to `llmctl down`'s 600 s: the waits' attempts after 6 s
    of retries (594 s left: 118 of 5 s), and the retries of an object that stays blocked (2 + 4 + 8
    + 16 s, then 30 s while the next still ends by the deadline: 19 times, 600 s in all)."""
    time = FakeTime()
    monkeypatch.setattr(
        sweep_module, "Sweeper", functools.partial(Sweeper, sleep=time.sleep, clock=time.clock)
    )
    account = Account(errors={"n-1": ["DependencyViolation", "DependencyViolation"]})
    account.add(Thing("node", "n-1"), Thing("eni", "e-1"))
    sweep(CLUSTER, REGION, session=account)
    assert waits(account) == [
        ("node_gone", {"Ids": ["n-1"], "WaiterConfig": {"Delay": 5, "MaxAttempts": 118}})
    ]

    account = Account(errors={"g-1": ["DependencyViolation"] * 50})
    account.add(Thing("group", "g-1"))
    time.slept.clear()
    report = sweep(CLUSTER, REGION, session=account)
    assert time.slept == [2.0, 4.0, 8.0, 16.0] + [30.0] * 19 and len(report.failed) == 1

    # the same default on Sweeper.delete
    account = Account(errors={"n-1": ["DependencyViolation", "DependencyViolation"]})
    account.add(Thing("node", "n-1"), Thing("eni", "e-1"))
    s = sweeper(account)
    s.delete(s.find())
    assert waits(account)[0][1]["WaiterConfig"]["MaxAttempts"] == 118
    account = Account(errors={"g-1": ["DependencyViolation"] * 50})
    account.add(Thing("group", "g-1"))
    slow = FakeTime()
    s = sweeper(account, slow)
    s.delete(s.find())
    assert slow.slept == [2.0, 4.0, 8.0, 16.0] + [30.0] * 19


def test_a_failing_waiter_does_not_stop_the_sweep() -> None:
    account = Account(wait_error=WaiterError("node_gone", "timed out", {}))
    account.add(Thing("node", "n-1"), Thing("group", "g-1"))
    s = sweeper(account)
    deleted, failed = s.delete(s.find())
    assert ids(deleted) == ["n-1", "g-1"] and failed == [] and len(waits(account)) == 1


def test_a_released_kind_is_rescanned_for_what_the_deletes_before_it_detached() -> None:
    account = Account()
    account.add(
        Thing("node", "n-1"),
        Thing("eni", "e-held", attached_to="n-1"),
        Thing("eni", "e-free"),
        Thing("eni", "e-other-node", attached_to="n-keep"),
        Thing("node", "n-keep", cluster="other"),
    )
    s = sweeper(account)
    found = s.find()
    assert ids(found) == ["n-1", "e-free"]
    deleted, failed = s.delete(found)
    # e-free once (it was found before), e-held now that its node is gone, never the other node's
    assert ids(deleted) == ["n-1", "e-free", "e-held"] and failed == []
    assert deletes(account) == ["n-1", "e-free", "e-held"]
    report = SweepReport(CLUSTER, REGION, False, found, deleted, failed)
    assert ids(report.found) == ["n-1", "e-free", "e-held"]


def test_a_refused_rescan_is_one_cloud_error() -> None:
    account = Account()
    account.add(Thing("node", "n-1"))
    s = sweeper(account)
    found = s.find()
    account.list_error["eni"] = client_error("ExpiredToken", "expired")
    with pytest.raises(CloudError) as info:
        s.delete(found)
    assert info.value.hint and "refresh your credentials" in info.value.hint


@pytest.mark.parametrize(
    "code", ["InvalidGroup.NotFound", "LoadBalancerNotFound", "NoSuchEntity", "ResourceNotFoundException"]
)
def test_already_gone_counts_as_deleted(code: str) -> None:
    account = Account(errors={"g-1": [code]})
    account.add(Thing("group", "g-1"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find())
    assert ids(deleted) == ["g-1"] and failed == [] and time.slept == []


@pytest.mark.parametrize(
    "code",
    [
        "DependencyViolation",
        "ResourceInUse",
        "InvalidNetworkInterface.InUse",
        "VolumeInUse",
        "DeleteConflict",
    ],
)
def test_a_dependency_error_is_retried_with_doubling_waits(code: str) -> None:
    account = Account(errors={"g-1": [code, code, code]})
    account.add(Thing("group", "g-1"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find(), timeout_s=600)
    assert ids(deleted) == ["g-1"] and failed == []
    assert time.slept == [2.0, 4.0, 8.0] and deletes(account) == ["g-1"] * 4


@pytest.mark.parametrize(
    "code", ["UnauthorizedOperation", "InvalidParameterValue", "Throttling", "NotFoundYet"]
)
def test_any_other_error_fails_the_object_at_once_with_its_code_and_message(code: str) -> None:
    account = Account(errors={"g-1": [code]})
    account.add(Thing("group", "g-1"), Thing("group", "g-2"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find())
    assert ids(deleted) == ["g-2"] and [(i.id, e) for i, e in failed] == [("g-1", f"{code}: says AWS")]
    assert time.slept == []


def test_an_error_without_a_message_is_just_its_code() -> None:
    account = Account(errors={"g-1": [ClientError({"Error": {"Code": "Boom"}}, "Delete")]})
    account.add(Thing("group", "g-1"))
    s = sweeper(account)
    _deleted, failed = s.delete(s.find())
    assert [e for _, e in failed] == ["Boom:"]


def test_a_transport_error_fails_the_object_with_its_text() -> None:
    error = ReadTimeoutError(endpoint_url="https://ec2.eu-west-1.amazonaws.com")
    account = Account(errors={"g-1": [error]})
    account.add(Thing("group", "g-1"))
    s = sweeper(account)
    deleted, failed = s.delete(s.find())
    assert deleted == [] and [e for _, e in failed] == [str(error)]


def test_retries_back_off_to_30s_and_stop_when_the_next_wait_would_pass_the_deadline() -> None:
    account = Account(errors={"g-1": ["DependencyViolation"] * 50})
    account.add(Thing("group", "g-1"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find(), timeout_s=200)
    assert deleted == [] and [e.split(":")[0] for _, e in failed] == ["DependencyViolation"]
    assert time.slept == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0, 30.0]  # 180 s; 30 more would pass 200


def test_a_wait_ending_exactly_at_the_deadline_is_still_taken() -> None:
    account = Account(errors={"g-1": ["DependencyViolation"] * 3})
    account.add(Thing("group", "g-1"))
    time = FakeTime()
    s = sweeper(account, time)
    deleted, failed = s.delete(s.find(), timeout_s=6)
    assert time.slept == [2.0, 4.0] and deleted == [] and len(failed) == 1  # the next (8 s) would pass


# ---- the whole sweep and its report -----------------------------------------------------------------
def test_sweep_deletes_what_it_found_and_a_dry_run_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    account = Account()
    account.add(Thing("node", "n-1"), Thing("group", "g-1"), Thing("group", "g-other", cluster="c2"))
    dry = sweep(CLUSTER, REGION, dry_run=True, session=account)
    assert (dry.cluster, dry.region, dry.dry_run) == (CLUSTER, REGION, True)
    assert ids(dry.found) == ["n-1", "g-1"] and dry.deleted == [] and dry.failed == []
    assert deletes(account) == [] and waits(account) == []
    seen: list[str] = []
    report = sweep(CLUSTER, REGION, session=account, timeout_s=32, on_deleted=lambda i: seen.append(i.id))
    assert ids(report.deleted) == seen == ["n-1", "g-1"] and not report.dry_run
    assert set(account.things) == {"g-other"}
    assert (
        waits(account)[0][1]["WaiterConfig"]["MaxAttempts"] == 6
    )  # the timeout given: 32 s / 5 s, whole attempts


def test_the_report_lists_deleted_and_failed_objects_the_first_scan_missed_once() -> None:
    a, b, c = (Leftover("eni", i, i, REGION, "r") for i in ("e-a", "e-b", "e-c"))
    report = SweepReport(CLUSTER, REGION, False, [a], [a, b], [(c, "VolumeInUse: x")])
    assert report.found == [a, b, c]
    data = report.to_dict()
    assert list(data) == ["cluster", "region", "dry_run", "found", "deleted", "failed"]
    assert data["failed"] == [
        {
            "kind": "eni",
            "id": "e-c",
            "name": "e-c",
            "region": REGION,
            "reason": "r",
            "arn": None,
            "error": "VolumeInUse: x",
        }
    ]
    assert [i["id"] for i in data["found"]] == ["e-a", "e-b", "e-c"] and data["dry_run"] is False


def test_a_leftovers_label_adds_its_name_only_when_it_says_more() -> None:
    assert Leftover("load-balancer", "arn:1", "k8s-lb", REGION, "r").label() == "load-balancer arn:1 (k8s-lb)"
    assert Leftover("log-group", "/aws/x", "/aws/x", REGION, "r").label() == "log-group /aws/x"
    assert Leftover("volume", "vol-1", "", REGION, "r").label() == "volume vol-1"


# ---- errors and the command's input -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("code", "hint"),
    [
        ("UnauthorizedOperation", "the identity needs ec2:Describe*/Delete*"),
        ("AccessDenied", "the identity needs ec2:Describe*/Delete*"),
        ("AccessDeniedException", "the identity needs ec2:Describe*/Delete*"),
        ("AuthFailure", "refresh your credentials (`aws sso login` or new keys)"),
        ("InvalidClientTokenId", "refresh your credentials (`aws sso login` or new keys)"),
        ("ExpiredToken", "refresh your credentials (`aws sso login` or new keys)"),
        ("RequestExpired", "refresh your credentials (`aws sso login` or new keys)"),
        ("Throttling", "re-run with --debug for details"),
    ],
)
def test_a_refused_call_becomes_a_cloud_error_with_the_fix(code: str, hint: str) -> None:
    error = translate_aws_error(client_error(code, "nope"), REGION)
    assert isinstance(error, CloudError)
    assert error.message == f"AWS refused the call ({code}): nope"
    assert error.hint is not None and error.hint.startswith(hint)


def test_missing_credentials_region_or_network_become_cloud_errors() -> None:
    creds = translate_aws_error(NoCredentialsError(), REGION)
    assert isinstance(creds, CloudError) and creds.message == "no AWS credentials found"
    assert creds.hint and "aws configure" in creds.hint
    region = translate_aws_error(NoRegionError(), REGION)
    assert isinstance(region, CloudError) and region.message == "no AWS region set"
    assert region.hint == "pass --region or set AWS_REGION"
    offline = translate_aws_error(EndpointConnectionError(endpoint_url="https://ec2.x"), "xx-1")
    assert isinstance(offline, CloudError) and offline.message.startswith("cannot reach AWS in xx-1: ")
    other = ValueError("not AWS")
    assert translate_aws_error(other, REGION) is other


def test_the_cluster_to_sweep_is_the_stacks_or_the_one_named() -> None:
    assert cluster_to_sweep(None, "ci") == "llmctl-ci"
    assert cluster_to_sweep("my-eks", None) == "my-eks"
    with pytest.raises(BadInput, match="--cluster and --stack exclude each other"):
        cluster_to_sweep("my-eks", "ci")
    with pytest.raises(BadInput, match="which cluster"):
        cluster_to_sweep(None, None)
    with pytest.raises(BadInput, match="invalid stack name"):
        cluster_to_sweep(None, "../x")
