"""Properties of the join watch over any run of NodeClaims whose nodes never register
(karpenter_shapes.py, data/karpenter/registration_signals.yaml): Karpenter v1.14.1 deletes each 15
minutes after its creation (liveness.go) and launches the next for the same pods; some are deleted
earlier by something else (not counted). Whatever the launch delays, the deletion jitter, the time
the finalizer takes, when `up` starts watching and how often it polls:

- `up` stops exactly at the poll that first sees the second liveness deletion, never before, and
  never earlier than the TTL allows (two deadlines of two NodeClaims, one after the other);
- the stop names both nodes with what each cost: the catalog price times the time from the launch
  to the deletion (the deletionTimestamp when a poll saw it, else its Finalized event, else the poll
  that found it gone);
- fewer than two liveness deletions never stop `up`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from karpenter_shapes import finalized, nodeclaim, pending

from llmctl.blueprints.hardware import hardware
from llmctl.infra.lifecycle.launches import findings
from llmctl.infra.lifecycle.registrations import REGISTRATION_TTL, JoinWatch

SETTINGS = settings()  # the profile of tests/conftest.py
POOL, TYPE = "inferentia-inf2", "inf2.48xlarge"
START = datetime(2026, 11, 26, 20, 0, tzinfo=UTC)
PRICE = hardware().instance(TYPE).on_demand_usd


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Life:
    """One NodeClaim: created, launched, deleted (deletionTimestamp), gone (finalizer removed)."""

    name: str
    created: datetime
    launched: datetime
    deleted: datetime
    gone: datetime
    by_liveness: bool
    recorded: bool  # operatorpkg recorded its Finalized event (best effort)

    def at(self, t: datetime) -> dict[str, Any] | None:
        """The NodeClaim as `kubectl get` shows it at t (None: not there)."""
        if not self.created <= t < self.gone:
            return None
        return nodeclaim(
            self.name,
            created=_iso(self.created),
            launched=_iso(self.launched) if t >= self.launched else None,
            deleting=_iso(self.deleted) if t >= self.deleted else None,
            terminating_at=_iso(self.deleted) if t >= self.deleted else None,
            instance_type=TYPE,
            instance_id="i-0" + self.name.rsplit("-c", 1)[1].zfill(16),
        )


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[Life], list[datetime]]:
    """A chain of NodeClaims of one pool and the times `up` polls."""
    lives: list[Life] = []
    created = START
    for i in range(draw(st.integers(1, 4))):
        launched = created + timedelta(seconds=draw(st.integers(5, 120)))
        if draw(st.booleans()) or i == 0:  # the liveness check: at its deadline, after its requeue
            deleted = created + REGISTRATION_TTL + timedelta(seconds=draw(st.integers(0, 90)))
            gone = deleted + timedelta(seconds=draw(st.integers(0, 120)))
            by_liveness, recorded = True, draw(st.booleans())
        else:  # something else deletes it earlier, and it is gone before the deadline
            deleted = launched + timedelta(seconds=draw(st.integers(1, 600)))
            gone = min(deleted + timedelta(seconds=draw(st.integers(0, 120))), created + REGISTRATION_TTL)
            # without its Finalized event, one gone between a poll before its deadline and one after
            # cannot be told from the liveness check's (docs/up.md says so): it has the event here
            by_liveness, recorded = False, True
        lives.append(Life(f"{POOL}-c{i}", created, launched, deleted, gone, by_liveness, recorded))
        created = deleted + timedelta(seconds=draw(st.integers(1, 60)))  # the provisioner's next one
    # `up` starts watching while the first node runs unregistered, then polls every 1 s to 4 min
    t = lives[0].launched + timedelta(seconds=draw(st.integers(0, 600)))
    polls = []
    while t < lives[-1].gone + timedelta(minutes=5):
        polls.append(t)
        t += timedelta(seconds=draw(st.integers(1, 240)))
    return lives, polls


def _ended(life: Life, polls: list[datetime]) -> datetime:
    """When the watch can know it ended: the deletionTimestamp if a poll saw it, else the poll that
    first found it gone."""
    if any(life.deleted <= t < life.gone for t in polls):
        return life.deleted
    return life.gone if life.recorded else next(t for t in polls if t >= life.gone)


@SETTINGS
@given(runs())
def test_up_stops_at_the_second_liveness_deletion_with_the_cost_and_never_earlier(
    run: tuple[list[Life], list[datetime]],
) -> None:
    lives, polls = run
    clock = {"now": polls[0]}
    watch = JoinWatch(cluster="llmctl-dev", region="us-west-2", clock=lambda: clock["now"])
    pod = pending(TYPE, "68Gi", "171600m", pool=POOL)
    stop: tuple[datetime, Any] | None = None
    for t in polls:
        clock["now"] = t
        claims = [obj for life in lives if (obj := life.at(t)) is not None]
        events = [finalized(life.name, _iso(life.gone)) for life in lives if life.recorded and t >= life.gone]
        found = findings(claims, events, [pod], region="us-west-2", instance_type=TYPE, joins=watch)
        final = [f for f in found if f.final]
        if final and stop is None:
            stop = (t, final[0])

    counted = [life for life in lives if life.by_liveness]
    if len(counted) < 2:
        assert stop is None
        return
    first, second = counted[:2]
    assert stop is not None
    at, finding = stop
    # the first poll that sees the second one being deleted or gone
    assert at == next(t for t in polls if t >= second.deleted)
    assert at >= second.deleted >= first.created + 2 * REGISTRATION_TTL  # never before two TTLs
    costs = [PRICE * (_ended(life, polls) - life.launched).total_seconds() / 3600 for life in (first, second)]
    for life, cost in zip((first, second), costs, strict=True):
        assert f"{life.name} (" in finding.text and f"about ${cost:.2f}" in finding.text
    assert f"(together about ${sum(costs):.2f})" in finding.text
    assert "rather than pay for a third" in finding.text
