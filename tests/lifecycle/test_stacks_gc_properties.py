"""Properties of `llmctl stacks gc` (`infra/lifecycle/stacks.py`), for any set of stacks.

The rules, from `expired`'s and `gc`'s docstrings: a stack expires when its last update is older
than the age (a never-updated one only when it holds no resources); with a prefix, only stacks
whose workload name (else stack name) starts with it; never a stack with an update in progress,
nor a platform while any workload stack of its environment stays, whatever its name; workloads
are destroyed before their platform, and `gc --dry-run` destroys nothing. So for any stacks
(environments and workload names with and without the prefix, platforms and workloads of several
blueprints, updates in progress, missing timestamps and resource counts, naive and aware times):

- what expires is exactly the stacks the age, prefix and progress rules select, less the platforms
  whose environment keeps a workload stack;
- nothing expires while anything that depends on it stays (a platform outlives its workloads);
- each environment's workloads come before its platform;
- `gc` destroys exactly what expired, in that order, and a dry run destroys nothing.

The backend is saved_backend.py's (in memory), the sweep after a platform recorded.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from saved_backend import SavedBackend

from llmctl.infra.aws.sweep import SweepReport
from llmctl.infra.lifecycle import finalizers, stacks
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, StackInfo
from llmctl.infra.lifecycle.stacks import expired, gc
from llmctl.infra.names import split_stack

NOW = datetime(2026, 3, 10, 12, 0, 0)
AGE = timedelta(days=3)
ENVS = ("ci", "pr-7")
WORKLOADS = (None, "pr-1", "pr-22", "main")
PROJECTS = (PLATFORM_PROJECT, "llmctl-a", "llmctl-b")
PREFIXES = ("", "pr-", "pr-2", "ci", "main")

HOUR = timedelta(hours=1)
PLUS5 = timezone(timedelta(hours=5))
# around the age boundary (the boundary itself does not expire), naive UTC and aware, long ago, fresh
stamp_st = st.sampled_from(
    (
        None,
        NOW - AGE,
        NOW - AGE - HOUR,
        NOW - AGE + HOUR,
        NOW - 10 * AGE,
        NOW - HOUR,
        (NOW - AGE - HOUR).replace(tzinfo=timezone.utc).astimezone(PLUS5),
        (NOW - AGE + 4 * HOUR).replace(tzinfo=timezone.utc).astimezone(PLUS5),
    )
)
progress_st = st.sampled_from((False, False, False, True))


@st.composite
def backends(draw: st.DrawFn) -> SavedBackend:
    backend = SavedBackend()
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(PROJECTS), st.sampled_from(ENVS), st.sampled_from(WORKLOADS)),
            max_size=8,
            unique_by=lambda k: (k[0], k[1], k[2] if k[0] != PLATFORM_PROJECT else None),
        )
    )
    for project, env, workload in keys:
        stack = env if project == PLATFORM_PROJECT or workload is None else f"{env}.{workload}"
        if any((i.project, i.stack) == (project, stack) for i in backend.infos):
            continue
        backend.add(
            project,
            stack,
            last_update=draw(stamp_st),
            resources=draw(st.sampled_from((None, 0, 3))),
            in_progress=draw(progress_st),
        )
    return backend


def _selected(info: StackInfo, prefix: str) -> bool:
    """The age, prefix and progress rules of the docstring, one stack at a time."""
    name = split_stack(info.stack)[1] or info.stack
    if (prefix and not name.startswith(prefix)) or info.update_in_progress:
        return False
    if info.last_update is None:
        return not info.resource_count
    stamp = info.last_update
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(timezone.utc).replace(tzinfo=None)
    return NOW - stamp > AGE


def _backend(*stacks: tuple[str, str, datetime | None]) -> SavedBackend:
    backend = SavedBackend()
    for project, stack, stamp in stacks:
        backend.add(project, stack, last_update=stamp)
    return backend


@given(backends(), st.sampled_from(PREFIXES))
# each environment's workloads before its platform
@example(_backend((PLATFORM_PROJECT, "ci", NOW - 10 * AGE), ("llmctl-a", "ci.pr-1", NOW - 10 * AGE)), "")
# a platform whose name matches the prefix stays while a workload of another name does
@example(
    _backend((PLATFORM_PROJECT, "pr-7", NOW - 10 * AGE), ("llmctl-a", "pr-7.main", NOW - 10 * AGE)), "pr-"
)
def test_what_expires_is_what_the_rules_select_and_no_platform_outlived_by_a_workload(
    backend: SavedBackend, prefix: str
) -> None:
    found = expired(backend, AGE, prefix=prefix, now=NOW)  # type: ignore[arg-type]
    every = backend.list_stacks()
    staying = [i for i in every if i not in found]
    envs_kept = {split_stack(i.stack)[0] for i in staying if i.project != PLATFORM_PROJECT}
    expected = [
        i
        for i in every
        if _selected(i, prefix) and not (i.project == PLATFORM_PROJECT and i.stack in envs_kept)
    ]
    assert sorted(found, key=id) == sorted(expected, key=id)
    for platform in (i for i in found if i.project == PLATFORM_PROJECT):
        env = platform.stack
        assert all(split_stack(i.stack)[0] != env or i.project == PLATFORM_PROJECT for i in staying)
        assert all(
            found.index(w) < found.index(platform)
            for w in found
            if split_stack(w.stack)[0] == env and w is not platform
        )


@given(backends(), st.sampled_from(PREFIXES), st.booleans())
def test_gc_destroys_exactly_what_expired_in_order_and_a_dry_run_nothing(
    backend: SavedBackend, prefix: str, dry_run: bool
) -> None:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    # the same ages against gc's own clock, half an hour off every boundary (the stamps are whole
    # hours from NOW) so the milliseconds between this call and gc's cannot cross one
    shift = now - NOW + timedelta(minutes=30)
    for n, info in enumerate(backend.infos):
        if info.last_update is not None:
            backend.infos[n] = StackInfo(
                info.project,
                info.stack,
                info.last_update + shift,
                info.resource_count,
                info.update_in_progress,
            )
    labels = [f"{i.project}/{i.stack}" for i in expired(backend, AGE, prefix=prefix, now=now)]  # type: ignore[arg-type]

    def sweep(cluster: str, region: str, **_: Any) -> SweepReport:
        return SweepReport(cluster, region, False)

    with pytest.MonkeyPatch.context() as patch:
        for module in (stacks, finalizers):
            patch.setattr(module, "sweep", sweep)
        patch.setattr(stacks, "leftovers", lambda cluster, region, **_: [])
        result = gc(backend, AGE, prefix=prefix, dry_run=dry_run)  # type: ignore[arg-type]
    assert result.expired == labels
    destroyed = [f"{project}/{stack}" for project, stack, _ in backend.destroyed]
    assert destroyed == ([] if dry_run else labels) and result.removed == destroyed
