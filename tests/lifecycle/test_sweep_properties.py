"""Properties of the sweep's mechanics (`infra/aws/sweep.py`), for any account and any errors.

The rules, from the module's docstrings: the sweep finds objects *only* by what ties them to the
cluster and deletes them kind by kind in table order; dependency errors (RETRYABLE) are retried
with a backoff of 2, 4, ... at most 30 s while the deadline allows, and a retry never sleeps past
it; an object already gone counts as deleted; every object found ends exactly once, deleted or
failed with its error, and the report lists everything it touched. So, for any account holding
this cluster's and other clusters' objects (names that share a prefix: c1, c10, c1-x), any
attachments and any sequence of AWS error codes:

- nothing of another cluster is ever deleted (nor listed);
- the deletes follow the table's kind order, and an ENI still attached to a node that stays is not
  deleted;
- deleted and failed are disjoint, every found object is in one of them, and the report's `found`
  holds both;
- the fake clock never runs past the deadline by a retry's sleep, and no sleep passes 30 s;
- an object whose errors are only retryable or "gone" and fit in the time is deleted.

The account double and the four-row table are test_sweep_units.py's (in memory, botocore's errors).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from test_sweep_units import CLUSTER, REGION, TABLE, Account, FakeTime, Thing

from llmctl.infra.aws import sweep as sweep_module
from llmctl.infra.aws.sweep import GONE, RETRY_FIRST_S, RETRY_MAX_S, RETRYABLE, Sweeper, SweepReport

KINDS = [k.name for k in TABLE]
CLUSTERS = (CLUSTER, "c10", "c1-x", "other")
CODES = (
    *RETRYABLE,
    *GONE,
    "InvalidVolume.NotFound",
    "LoadBalancerNotFound",
    "UnauthorizedOperation",
    "Throttling",
)


@st.composite
def accounts(draw: st.DrawFn) -> tuple[Account, float]:
    things = []
    for n in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(KINDS))
        nodes = [t.id for t in things if t.kind == "node"]
        attached = draw(st.sampled_from([None, *nodes])) if kind == "eni" else None
        cluster = draw(st.sampled_from((CLUSTER, CLUSTER, *CLUSTERS[1:])))
        things.append(Thing(kind, f"{kind}-{n}", cluster, attached))
    errors = {}
    for thing in things:
        code, times = draw(st.sampled_from(CODES)), draw(st.integers(0, 6))
        if times:
            errors[thing.id] = [code] * times
    return _account(things, errors), draw(st.sampled_from([0.0, 31.0, 600.0]))


def _account(things: list[Thing], errors: dict[str, list[str]]) -> Account:
    account = Account(errors={k: list(v) for k, v in errors.items()})
    account.add(*things)
    return account


def _run(account: Account, timeout: float) -> tuple[SweepReport, FakeTime, dict[str, list[str]]]:
    planned = {k: list(v) for k, v in account.errors.items()}
    time = FakeTime()
    sweeper = Sweeper(CLUSTER, REGION, account, sleep=time.sleep, clock=time.clock)
    found = sweeper.find()
    deleted, failed = sweeper.delete(found, timeout_s=timeout)
    return SweepReport(CLUSTER, REGION, False, found, deleted, failed), time, planned


@pytest.fixture(autouse=True)
def table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_module, "TABLE", TABLE)
    monkeypatch.setattr(sweep_module, "BY_NAME", {k.name: k for k in TABLE})


@given(accounts())
# an ENI attached to a node that could not be deleted stays (the rescan takes only detached ones)
@example(
    (
        _account([Thing("node", "n"), Thing("eni", "e", attached_to="n")], {"n": ["UnauthorizedOperation"]}),
        600.0,
    )
)
def test_nothing_outside_the_cluster_is_touched_and_kinds_go_in_table_order(
    case: tuple[Account, float],
) -> None:
    account, timeout = case
    clusters = {t.id: t.cluster for t in account.things.values()}
    attached = {t.id: t.attached_to for t in account.things.values()}
    report, _, _ = _run(account, timeout)
    deleted = [call for call in account.calls if call[0] == "delete"]
    assert all(clusters[id_] == CLUSTER for _, _, id_ in deleted)
    assert all(clusters[item.id] == CLUSTER for item in report.found)
    order = [KINDS.index(kind) for _, kind, _ in deleted]
    assert order == sorted(order)
    # a released kind is taken only once detached: an ENI whose node was not deleted stays
    for item in report.deleted:
        assert attached.get(item.id) is None or attached[item.id] not in account.things


@given(accounts())
def test_every_object_found_ends_once_deleted_or_failed_and_the_report_holds_them(
    case: tuple[Account, float],
) -> None:
    account, timeout = case
    report, _, planned = _run(account, timeout)
    deleted = [i.id for i in report.deleted]
    failed = [i.id for i, _ in report.failed]
    assert len(set(deleted)) == len(deleted) and len(set(failed)) == len(failed)
    assert not set(deleted) & set(failed)
    found = {i.id for i in report.found}
    assert set(deleted) | set(failed) <= found
    first_scan = {i.id for i in report.found if i.kind != "eni"}  # ENIs are rescanned when released
    assert first_scan <= set(deleted) | set(failed)
    for _item, error in report.failed:
        assert error.split(":")[0] in CODES and error.split(":")[0] in planned[_item.id]


@given(accounts())
@example((_account([Thing("lb", "l")], {"l": ["DependencyViolation"] * 6}), 600.0))  # the 30 s cap
@example((_account([Thing("group", "g")], {"g": ["InvalidGroup.NotFound"]}), 0.0))  # gone is deleted
def test_retries_back_off_and_never_sleep_past_the_deadline(case: tuple[Account, float]) -> None:
    account, timeout = case
    report, time, planned = _run(account, timeout)
    assert time.now - 1000.0 <= timeout
    assert all(RETRY_FIRST_S <= s <= RETRY_MAX_S for s in time.slept)
    failed = {item.id: error.split(":")[0] for item, error in report.failed}
    for item in report.found:
        codes = planned.get(item.id, [])
        first = codes[0] if codes else None
        if first is None or _gone(first):  # deleted, or AWS says it already is
            assert item in report.deleted
        elif first not in RETRYABLE:  # refused: failed at once with AWS's code
            assert failed.get(item.id) == first
        else:  # retried while the deadline allows, then failed with the retryable code
            assert item in report.deleted or failed.get(item.id) in RETRYABLE


def _gone(code: str) -> bool:
    """AWS's codes for an object that no longer exists (EC2's and ELB's end in NotFound)."""
    return code.endswith("NotFound") or code in GONE
