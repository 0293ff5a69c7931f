"""`llmctl stacks gc`'s decisions, called directly (seconds): which stacks are expired (the age
boundary, updates in progress, never-updated stacks, a platform while workloads stay, the prefix)
and what `gc` then destroys, with which environment, in which order, and what it reports. The
backend is in memory (saved_backend.py); AWS is the moto server, but for the sweep after a
platform (its own unit tests are test_sweep_units.py, against moto test_sweep.py): here it is
recorded, to pin which cluster in which region is swept and that what is left is reported."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from lifecycle_support import eks_cluster
from saved_backend import SavedBackend

from llmctl.errors import BadInput, CloudError, Declined, EngineError, PrerequisiteError
from llmctl.infra.aws.sweep import Leftover, SweepReport
from llmctl.infra.lifecycle import finalizers, stacks
from llmctl.infra.lifecycle.engine import StackInfo
from llmctl.infra.lifecycle.stacks import (
    GcResult,
    _endpoint_key,
    _matches,
    all_stack_rows,
    expired,
    gc,
    local_rows,
    parse_age,
    stack_rows,
)
from llmctl.infra.lifecycle.teardown import DELETE_UNREACHABLE
from llmctl.state import Endpoint, list_endpoints, save_endpoint, state_dir

PLATFORM = "llmctl-platform"
NOW = datetime(2026, 3, 10, 12, 0, 0)
DAY = timedelta(days=1)


def names(infos: list[StackInfo]) -> list[str]:
    return [f"{i.project}/{i.stack}" for i in infos]


# ---- ages -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("3d", timedelta(days=3)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("0h", timedelta(0)),
    ],
)
def test_parse_age_reads_a_number_and_a_unit(text: str, age: timedelta) -> None:
    assert parse_age(text) == age


@pytest.mark.parametrize("text", ["3", "d", "3w", "-3d", "3.5h", "", "h3", "3 d"])
def test_parse_age_refuses_anything_else(text: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_age(text)
    assert info.value.message == f"cannot read the age {text!r}"
    assert info.value.hint == "use a number and a unit: 3d, 12h or 90m"


# ---- names ----------------------------------------------------------------------------------------
def info(project: str, stack: str) -> StackInfo:
    return StackInfo(project, stack, NOW, 3, False)


def test_the_prefix_matches_the_workload_name_else_the_stack_name() -> None:
    assert _matches(info("llmctl-b", "ci.pr-42"), "pr-")
    assert not _matches(info(PLATFORM, "ci"), "pr-")
    assert _matches(info("llmctl-b", "pr-7"), "pr-")  # an environment per PR
    assert _matches(info(PLATFORM, "pr-7"), "pr-")
    assert not _matches(info("llmctl-b", "pr-7.x"), "pr-")  # the workload name decides
    assert _matches(info(PLATFORM, "ci"), "") and _matches(info("llmctl-b", "ci.x"), "")


def test_the_endpoint_key_is_environment_blueprint_and_workload() -> None:
    assert _endpoint_key(info("llmctl-tiny-cpu", "ci.pr-1")) == ("ci", "tiny-cpu", "pr-1")
    assert _endpoint_key(info("llmctl-tiny-cpu", "dev")) == ("dev", "tiny-cpu", None)


def test_stack_rows_list_each_environment_platform_first() -> None:
    backend = SavedBackend()
    backend.add("llmctl-b", "dev.w", last_update=None, resources=None, in_progress=True)
    backend.add("llmctl-a", "dev", resources=5)
    backend.add(PLATFORM, "dev", last_update=datetime(2026, 2, 1, 8, 30))
    backend.add(PLATFORM, "ci")
    rows = stack_rows(backend)  # type: ignore[arg-type]
    assert [(r["project"], r["stack"]) for r in rows] == [
        (PLATFORM, "ci"),
        (PLATFORM, "dev"),
        ("llmctl-a", "dev"),
        ("llmctl-b", "dev.w"),
    ]
    assert rows[1] == {
        "project": PLATFORM,
        "stack": "dev",
        "kind": "platform",
        "environment": "dev",
        "workload": None,
        "last_update": "2026-02-01T08:30:00",
        "resources": 3,
        "update_in_progress": False,
        "size": "3 resources",
    }
    assert rows[3] == {
        "project": "llmctl-b",
        "stack": "dev.w",
        "kind": "workload",
        "environment": "dev",
        "workload": "w",
        "last_update": None,
        "resources": None,
        "update_in_progress": True,
        "size": "0 resources",
    }
    assert rows[2]["kind"] == "workload" and rows[2]["resources"] == 5


# ---- what is expired ------------------------------------------------------------------------------
def test_only_stacks_older_than_the_age_expire_the_boundary_itself_does_not() -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "ci.old", last_update=NOW - 3 * DAY - timedelta(seconds=1))
    backend.add("llmctl-a", "ci.edge", last_update=NOW - 3 * DAY)
    backend.add("llmctl-a", "ci.new", last_update=NOW - DAY)
    backend.add(PLATFORM, "ci", last_update=NOW - 10 * DAY)
    found = expired(backend, 3 * DAY, now=NOW)  # type: ignore[arg-type]
    assert names(found) == ["llmctl-a/ci.old"]  # the platform stays while ci.edge and ci.new do


def test_a_timezone_aware_last_update_is_compared_in_utc() -> None:
    backend = SavedBackend()
    plus2 = timezone(timedelta(hours=2))
    # 13:00+02:00 is 11:00 UTC: 1 day and 1 hour before NOW (naive UTC)
    backend.add("llmctl-a", "dev.x", last_update=datetime(2026, 3, 9, 13, 0, tzinfo=plus2))
    assert names(expired(backend, DAY, now=NOW)) == ["llmctl-a/dev.x"]  # type: ignore[arg-type]
    assert expired(backend, DAY + 2 * timedelta(hours=1), now=NOW) == []  # type: ignore[arg-type]


def test_an_update_in_progress_never_expires_and_the_stacks_after_it_still_do() -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "dev.x", last_update=NOW - 30 * DAY, in_progress=True)
    backend.add("llmctl-a", "dev.y", last_update=None, resources=None, in_progress=True)
    backend.add("llmctl-a", "dev.z", last_update=NOW - 30 * DAY)
    assert names(expired(backend, DAY, now=NOW)) == ["llmctl-a/dev.z"]  # type: ignore[arg-type]


def test_a_never_updated_stack_expires_only_when_it_holds_no_resources() -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "dev.empty", last_update=None, resources=0)
    backend.add("llmctl-a", "dev.unknown", last_update=None, resources=None)
    backend.add("llmctl-a", "dev.holding", last_update=None, resources=4)
    backend.add("llmctl-a", "dev.fresh", last_update=NOW, resources=0)  # recent, even if empty
    assert names(expired(backend, DAY, now=NOW)) == ["llmctl-a/dev.empty", "llmctl-a/dev.unknown"]  # type: ignore[arg-type]


def test_a_platform_expires_after_its_workloads_only_when_none_stays() -> None:
    backend = SavedBackend()
    old = NOW - 5 * DAY
    backend.add(PLATFORM, "ci", last_update=old)
    backend.add("llmctl-b", "ci.pr-2", last_update=old)
    backend.add("llmctl-a", "ci", last_update=old)
    backend.add(PLATFORM, "dev", last_update=old)
    backend.add("llmctl-a", "dev.keep", last_update=NOW)  # keeps dev's platform
    backend.add("llmctl-a", "dev.pr-9", last_update=old)
    backend.add(PLATFORM, "alone", last_update=old)  # no workloads at all
    found = expired(backend, DAY, now=NOW)  # type: ignore[arg-type]
    assert names(found) == [
        "llmctl-platform/alone",
        "llmctl-a/ci",
        "llmctl-b/ci.pr-2",
        "llmctl-platform/ci",
        "llmctl-a/dev.pr-9",
    ]


def test_with_a_prefix_only_matching_stacks_expire_and_any_other_workload_keeps_the_platform() -> None:
    backend = SavedBackend()
    old = NOW - 5 * DAY
    backend.add(PLATFORM, "ci", last_update=old)
    backend.add("llmctl-a", "ci.pr-1", last_update=old)
    backend.add("llmctl-a", "ci.main", last_update=old)  # old too, but not a pr-
    backend.add(PLATFORM, "pr-7", last_update=old)  # an environment per PR
    backend.add("llmctl-a", "pr-7", last_update=old)
    found = expired(backend, DAY, prefix="pr-", now=NOW)  # type: ignore[arg-type]
    assert names(found) == ["llmctl-a/ci.pr-1", "llmctl-a/pr-7", "llmctl-platform/pr-7"]


def test_without_now_the_clock_is_utc_now() -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "dev.old", last_update=datetime.now(timezone.utc) - 2 * DAY)
    backend.add("llmctl-a", "dev.new", last_update=datetime.now(timezone.utc) - timedelta(hours=1))
    assert names(expired(backend, DAY)) == ["llmctl-a/dev.old"]  # type: ignore[arg-type]


# ---- gc ---------------------------------------------------------------------------------------------
OLD = datetime(2020, 1, 1)


@dataclass
class Swept:
    """The sweeps and leftover checks gc ran, and what the check is to find."""

    calls: list[tuple[str, str, str, float | None]] = field(default_factory=list)
    left: list[Leftover] = field(default_factory=list)


@pytest.fixture
def swept(monkeypatch: pytest.MonkeyPatch) -> Swept:
    record = Swept()

    def sweep(cluster: str, region: str, *, timeout_s: float = 600, **_: Any) -> SweepReport:
        record.calls.append(("sweep", cluster, region, timeout_s))
        return SweepReport(cluster, region, False)

    def leftovers(cluster: str, region: str, **_: Any) -> list[Leftover]:
        record.calls.append(("leftovers", cluster, region, None))
        return list(record.left)

    monkeypatch.setattr(stacks, "sweep", sweep)
    monkeypatch.setattr(stacks, "leftovers", leftovers)
    monkeypatch.setattr(finalizers, "sweep", sweep)  # the sweep before a failed platform's retry
    return record


def endpoint(stack: str, blueprint: str, workload: str | None) -> Endpoint:
    endpoint = Endpoint(stack, blueprint, "eks", "http://x", "m", workload=workload)
    save_endpoint(endpoint)
    return endpoint


def repository(region: str, stack: str, blueprint: str) -> None:
    boto3.client("ecr", region_name=region).create_repository(repositoryName=f"llmctl/{stack}/{blueprint}")


def repositories(region: str) -> set[str]:
    reply = boto3.client("ecr", region_name=region).describe_repositories()
    return {r["repositoryName"] for r in reply["repositories"]}


def live_platform(region: str) -> SavedBackend:
    """A backend holding environment ci's platform, recently updated, whose EKS cluster exists."""
    eks_cluster(region, "llmctl-ci")
    backend = SavedBackend()
    backend.add(
        PLATFORM,
        "ci",
        last_update=datetime.now(timezone.utc),
        outputs={"cluster_name": "llmctl-ci", "region": region},
    )
    return backend


def test_gc_dry_run_and_nothing_expired_destroy_nothing() -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "ci.pr-1", last_update=OLD)
    backend.add("llmctl-a", "ci.new", last_update=datetime.now(timezone.utc))
    result = gc(backend, DAY, dry_run=True)  # type: ignore[arg-type]
    assert (result.expired, result.removed) == (["llmctl-a/ci.pr-1"], [])
    result = gc(backend, 365 * 100 * DAY)  # type: ignore[arg-type]
    assert (result.expired, result.removed) == ([], [])
    assert backend.destroyed == []


def test_gc_asks_with_the_labels_and_a_no_destroys_nothing() -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "ci.pr-1", last_update=OLD)
    asked: list[list[str]] = []

    def no(labels: list[str]) -> bool:
        asked.append(labels)
        return False

    with pytest.raises(Declined):
        gc(backend, DAY, confirm=no)  # type: ignore[arg-type]
    assert asked == [["llmctl-a/ci.pr-1"]] and backend.destroyed == []
    result = gc(backend, DAY, confirm=lambda labels: True)  # type: ignore[arg-type]
    assert result.removed == ["llmctl-a/ci.pr-1"]


def test_gc_of_workloads_on_a_live_cluster_drops_nothing_and_removes_their_endpoints_and_repositories(
    aws: str, swept: Swept
) -> None:
    backend = live_platform(aws)
    backend.add("llmctl-tiny-cpu", "ci.pr-1", last_update=OLD)
    backend.add("llmctl-tiny-cpu", "ci.keep", last_update=datetime.now(timezone.utc))
    endpoint("ci", "tiny-cpu", "pr-1")
    endpoint("ci", "tiny-cpu", "keep")
    repository(aws, "ci.pr-1", "tiny-cpu")
    repository(aws, "ci.keep", "tiny-cpu")

    result = gc(backend, DAY)  # type: ignore[arg-type]

    assert backend.destroyed == [("llmctl-tiny-cpu", "ci.pr-1", {})]
    assert result.removed == ["llmctl-tiny-cpu/ci.pr-1"]
    # destroyed and removed: the stack itself is gone from the backend
    assert [(i.project, i.stack) for i in backend.list_stacks()] == [
        (PLATFORM, "ci"),
        ("llmctl-tiny-cpu", "ci.keep"),
    ]
    assert [(e.blueprint, e.workload) for e in list_endpoints("ci")] == [("tiny-cpu", "keep")]
    assert repositories(aws) == {"llmctl/ci.keep/tiny-cpu"}
    assert result.notes == [
        "no kubeconfig for cluster llmctl-ci to check its Kubernetes API: the destroys run without "
        "dropping anything from state",
        "deleted image repository llmctl/ci.pr-1/tiny-cpu",
    ]
    assert result.sweeps == [] and result.leftovers == [] and swept.calls == []  # no platform went
    result.check()


def test_gc_without_a_platform_makes_no_aws_call_for_repositories(aws: str) -> None:
    backend = SavedBackend()
    backend.add("llmctl-tiny-cpu", "ci.pr-1", last_update=OLD)
    repository(aws, "ci.pr-1", "tiny-cpu")
    result = gc(backend, DAY)  # type: ignore[arg-type]
    assert result.removed == ["llmctl-tiny-cpu/ci.pr-1"] and result.notes == []
    assert backend.destroyed == [("llmctl-tiny-cpu", "ci.pr-1", {})]
    assert repositories(aws) == {"llmctl/ci.pr-1/tiny-cpu"}  # no platform: not this account's to clean


def test_gc_of_a_whole_environment_whose_cluster_is_gone_drops_destroys_workloads_first_and_sweeps(
    aws: str, swept: Swept
) -> None:
    backend = SavedBackend()
    backend.add(PLATFORM, "pr-7", last_update=OLD, outputs={"region": aws})  # no cluster_name: llmctl-pr-7
    backend.add("llmctl-tiny-cpu", "pr-7", last_update=OLD)
    endpoint("pr-7", "tiny-cpu", None)

    result = gc(backend, DAY, sweep_timeout_s=5)  # type: ignore[arg-type]

    drop = {DELETE_UNREACHABLE: "true"}
    assert backend.destroyed == [("llmctl-tiny-cpu", "pr-7", drop), (PLATFORM, "pr-7", drop)]
    assert result.removed == ["llmctl-tiny-cpu/pr-7", "llmctl-platform/pr-7"]
    assert list_endpoints("pr-7") == []
    assert len(result.notes) == 1 and result.notes[0].startswith(
        f"cluster llmctl-pr-7 is gone (eks:DescribeCluster in {aws}: ResourceNotFoundException)"
    )
    assert swept.calls == [("sweep", "llmctl-pr-7", aws, 5), ("leftovers", "llmctl-pr-7", aws, None)]
    assert [(s.cluster, s.region) for s in result.sweeps] == [("llmctl-pr-7", aws)]
    assert result.leftovers == []
    result.check()


def test_gc_sweeps_each_platform_once_and_reports_what_is_left(aws: str, swept: Swept) -> None:
    left = Leftover("volume", "vol-1", "", aws, "r")
    swept.left = [left]
    backend = SavedBackend()
    for env in ("pr-1", "pr-2"):
        backend.add(PLATFORM, env, last_update=OLD, outputs={"region": aws})
        backend.add("llmctl-a", f"{env}.w", last_update=OLD)
        backend.add("llmctl-b", f"{env}.w", last_update=OLD)
    result = gc(backend, DAY, sweep_timeout_s=7)  # type: ignore[arg-type]
    assert [c[:2] for c in swept.calls] == [
        ("sweep", "llmctl-pr-1"),
        ("leftovers", "llmctl-pr-1"),
        ("sweep", "llmctl-pr-2"),
        ("leftovers", "llmctl-pr-2"),
    ]
    assert result.leftovers == [left, left]
    assert [d[:2] for d in backend.destroyed] == [
        ("llmctl-a", "pr-1.w"),
        ("llmctl-b", "pr-1.w"),
        (PLATFORM, "pr-1"),
        ("llmctl-a", "pr-2.w"),
        ("llmctl-b", "pr-2.w"),
        (PLATFORM, "pr-2"),
    ]
    with pytest.raises(CloudError, match="2 object\\(s\\) left") as info:
        result.check()
    assert info.value.hint and "`llmctl sweep --cluster llmctl-pr-1 --region" in info.value.hint  # the first


def test_gc_of_a_platform_recording_no_region_uses_the_aws_default(aws: str, swept: Swept) -> None:
    backend = SavedBackend()
    backend.add(PLATFORM, "pr-8", last_update=OLD, outputs={"cluster_name": "other-name"})
    result = gc(backend, DAY)  # type: ignore[arg-type]
    # the sweep's default time limit is `llmctl down`'s: 600 s
    assert swept.calls == [("sweep", "other-name", aws, 600), ("leftovers", "other-name", aws, None)]
    assert result.notes[0].startswith(f"cluster other-name is gone (eks:DescribeCluster in {aws}:")


def test_gc_lets_a_failed_workload_destroy_through(aws: str) -> None:
    backend = SavedBackend()
    backend.add("llmctl-a", "ci.pr-1", last_update=OLD)
    backend.add("llmctl-a", "ci.pr-2", last_update=OLD)
    backend.fail_destroy[("llmctl-a", "ci.pr-1")] = ["resource busy"]
    with pytest.raises(EngineError, match="resource busy"):
        gc(backend, DAY)  # type: ignore[arg-type]
    assert backend.destroyed == []  # stopped at the first failure


def test_gc_turns_an_unreachable_cluster_found_by_a_destroy_into_the_refusal(aws: str) -> None:
    backend = live_platform(aws)
    backend.add("llmctl-a", "ci.pr-1", last_update=OLD)
    backend.fail_destroy[("llmctl-a", "ci.pr-1")] = ["error: Kubernetes cluster is unreachable"]
    with pytest.raises(PrerequisiteError, match="a destroy found its Kubernetes API unreachable"):
        gc(backend, DAY)  # type: ignore[arg-type]


def test_gc_retries_a_failed_platform_destroy_once_after_a_sweep(aws: str, swept: Swept) -> None:
    backend = SavedBackend()
    backend.add(PLATFORM, "pr-7", last_update=OLD, outputs={"region": aws})
    backend.fail_destroy[(PLATFORM, "pr-7")] = ["DependencyViolation: the VPC has dependencies"]
    result = gc(backend, DAY, sweep_timeout_s=5)  # type: ignore[arg-type]
    assert backend.destroyed == [(PLATFORM, "pr-7", {DELETE_UNREACHABLE: "true"})]
    assert result.removed == ["llmctl-platform/pr-7"]
    assert any(n.startswith("platform destroy failed (DependencyViolation") for n in result.notes)
    assert [c[0] for c in swept.calls] == ["sweep", "sweep", "leftovers"]  # before the retry, then after


# ---- the leftover verdict ---------------------------------------------------------------------------
def test_the_gc_verdict_fails_only_while_something_is_left() -> None:
    GcResult([], []).check()
    left = Leftover(
        "log-group", "/aws/eks/llmctl-ci/cluster", "/aws/eks/llmctl-ci/cluster", "us-west-2", "name"
    )
    report = SweepReport("llmctl-ci", "us-west-2", False)
    with pytest.raises(CloudError) as info:
        GcResult(["x"], ["x"], sweeps=[report], leftovers=[left]).check()
    assert "1 object(s) left for the cluster" in info.value.message
    assert info.value.hint and "--cluster llmctl-ci --region us-west-2" in info.value.hint
    with pytest.raises(CloudError) as info:
        GcResult(["x"], ["x"], leftovers=[left]).check()  # an ECR repository ECR refused: no sweep
    assert info.value.hint and "--cluster ... --region us-west-2" in info.value.hint


# ---- `stacks list` with local servers -----------------------------------------------------------------
def local_server(stack: str, blueprint: str, started: float | None) -> None:
    folder = state_dir() / "local" / stack
    folder.mkdir(parents=True, exist_ok=True)
    record = {"blueprint": blueprint, "pid": 0, "base_url": "http://127.0.0.1:1", "started": started}
    (folder / f"{blueprint}.json").write_text(json.dumps(record))


def test_local_rows_list_every_local_server_of_every_stack() -> None:
    assert local_rows() == []  # nothing started yet
    local_server("dev", "tiny-cpu", 1767225600.0)  # 2026-01-01T00:00:00Z
    local_server("ci", "tiny-cpu", None)
    (state_dir() / "local" / "stray.json").write_text("{}")  # a file beside the stacks' folders
    assert local_rows() == [
        {
            "project": "local/tiny-cpu",
            "stack": "ci",
            "kind": "local",
            "environment": "ci",
            "workload": None,
            "last_update": None,
            "resources": None,
            "update_in_progress": False,
            "size": "local server",
        },
        {
            "project": "local/tiny-cpu",
            "stack": "dev",
            "kind": "local",
            "environment": "dev",
            "workload": None,
            "last_update": "2026-01-01T00:00:00+00:00",
            "resources": None,
            "update_in_progress": False,
            "size": "local server",
        },
    ]


def test_without_pulumi_stacks_list_shows_the_local_servers_or_says_what_is_missing(no_pulumi: None) -> None:
    with pytest.raises(PrerequisiteError):
        all_stack_rows(None)  # nothing to list at all
    local_server("dev", "tiny-cpu", None)
    rows, notes = all_stack_rows(None)
    assert [(r["kind"], r["stack"]) for r in rows] == [("local", "dev")]
    assert len(notes) == 1 and notes[0].startswith("Pulumi stacks not listed: ")
