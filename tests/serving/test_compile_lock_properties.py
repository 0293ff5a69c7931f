"""Properties of the compile-cache lock (`serving/compile_lock.py`), for any sequence of callers.

The rules, from the module's docstring: S3 creates the lock for exactly one caller (`If-None-Match`);
a lock older than `stale_s` is taken over by exactly one (`If-Match` on its ETag); a release deletes
the lock only while it is still the caller's. So for any callers acquiring and releasing in any
order while the clock moves (below, at and past the stale age), against moto's S3:

- an acquire succeeds exactly when there is no lock or the stored one is stale, and then the stored
  lock is the caller's;
- a release never deletes a lock another caller took (after a takeover) and always deletes the
  caller's own;
- what is stored is always the last successful acquirer's lock, or nothing after its release.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compile_lock import BUCKET, KEY, lock, s3, stored  # noqa: F401 (s3: the fixture)

STALE = 100.0
step_st = st.one_of(
    st.tuples(st.just("acquire"), st.integers(0, 2)),
    st.tuples(st.just("release"), st.integers(0, 2)),
    st.tuples(st.just("wait"), st.sampled_from((0, 1, 99, 100, 250))),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(st.lists(step_st, max_size=10))
def test_one_holder_at_a_time_stale_locks_taken_over_and_releases_delete_only_their_own(
    s3: Any,  # noqa: F811 (the fixture)
    steps: list[tuple[str, int]],
) -> None:
    s3.delete_object(Bucket=BUCKET, Key=KEY)
    now = [1000.0]
    callers = [lock(s3, f"c{n}", 0.0, stale_s=STALE) for n in range(3)]
    for caller in callers:
        caller.clock = lambda: now[0]
    holder: tuple[int, float] | None = None  # (caller, since) of the stored lock
    for action, value in steps:
        if action == "wait":
            now[0] += value
            continue
        caller = callers[value]
        if action == "acquire":
            free = holder is None or now[0] - holder[1] >= STALE
            assert caller.acquire() is free
            if free:
                holder = (value, now[0])
        else:
            caller.release()
            if holder is not None and holder[0] == value and caller is callers[value]:
                holder = None
            assert not caller.held
        expected = None if holder is None else {"owner": f"c{holder[0]}", "since": holder[1]}
        assert stored(s3) == expected
