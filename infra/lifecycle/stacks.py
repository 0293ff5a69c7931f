"""`llmctl stacks list` and `llmctl stacks gc`: preview stacks expire without a hosted service."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from llmctl.errors import UserAbort
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackInfo, StackSpec

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.teardown import Teardown


def parse_age(text: str) -> timedelta:
    """'3d', '12h', '90m' -> timedelta."""
    from llmctl.errors import LlmctlError

    units = {"d": "days", "h": "hours", "m": "minutes"}
    value, unit = text[:-1], text[-1:]
    if unit not in units or not value.isdigit():
        raise LlmctlError(f"cannot read the age {text!r}", "use a number and a unit: 3d, 12h or 90m")
    return timedelta(**{units[unit]: int(value)})


def stack_rows(engine: Engine) -> list[dict[str, Any]]:
    """Every llmctl stack with its last update (stable keys for --json)."""
    return [
        {
            "project": info.project,
            "stack": info.stack,
            "kind": "platform" if info.project == PLATFORM_PROJECT else "workload",
            "last_update": info.last_update.isoformat() if info.last_update else None,
            "resources": info.resource_count,
            "update_in_progress": info.update_in_progress,
        }
        for info in sorted(
            engine.list_stacks(), key=lambda i: (i.stack, i.project != PLATFORM_PROJECT, i.project)
        )
    ]


@dataclass
class GcResult:
    expired: list[str]
    removed: list[str]
    notes: list[str] = field(default_factory=list)  # why Kubernetes objects were dropped from state


def expired(
    engine: Engine, older_than: timedelta, *, prefix: str = "", now: datetime | None = None
) -> list[StackInfo]:
    """Stacks whose last update is older than `older_than` (optionally only names starting with prefix).

    Never a stack with an update in progress (the CLI then reports no last update), nor a platform
    while a workload of the same environment stays; a stack that never ran an update counts as
    expired only when it holds no resources.
    """
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    stacks = [info for info in engine.list_stacks() if not prefix or info.stack.startswith(prefix)]
    found = []
    for info in stacks:
        stamp = info.last_update
        if stamp is not None and stamp.tzinfo is not None:
            stamp = stamp.astimezone(timezone.utc).replace(tzinfo=None)
        if info.update_in_progress:
            continue
        if (stamp is None and not info.resource_count) or (stamp is not None and now - stamp > older_than):
            found.append(info)
    kept = {info.stack for info in stacks if info not in found and info.project != PLATFORM_PROJECT}
    found = [i for i in found if not (i.project == PLATFORM_PROJECT and i.stack in kept)]
    # workloads before their platform
    return sorted(found, key=lambda i: (i.stack, i.project == PLATFORM_PROJECT))


def gc(
    engine: Engine,
    older_than: timedelta,
    *,
    prefix: str = "",
    dry_run: bool = False,
    confirm: Callable[[list[str]], bool] | None = None,
) -> GcResult:
    """Destroy and remove expired stacks (workloads before platforms)."""
    old = expired(engine, older_than, prefix=prefix)
    labels = [f"{i.project}/{i.stack}" for i in old]
    if dry_run or not old:
        return GcResult(labels, [])
    if confirm is not None and not confirm(labels):
        raise UserAbort("nothing was deleted", None)
    # The rule of `down`: every environment's cluster is checked before anything is destroyed.
    plans = {
        env: _teardown(engine, env, [i for i in old if i.stack == env]) for env in {i.stack for i in old}
    }
    removed = []
    for info in old:
        spec = StackSpec(info.project, info.stack, env=plans[info.stack].env)
        with plans[info.stack].guard():
            engine.destroy(spec, remove=True)
        removed.append(f"{info.project}/{info.stack}")
    notes = [note for env in sorted(plans) for note in plans[env].notes]
    return GcResult(labels, removed, notes)


def _teardown(engine: Engine, env: str, infos: list[StackInfo]) -> Teardown:
    """How one environment's expired stacks are destroyed (see :mod:`teardown`)."""
    from llmctl.infra.lifecycle.teardown import decide

    outputs = engine.outputs(StackSpec(PLATFORM_PROJECT, env))
    values = outputs or {}
    return decide(
        engine,
        [StackSpec(i.project, i.stack) for i in infos],
        stack=env,
        outputs=outputs,
        cluster=str(values.get("cluster_name") or f"llmctl-{env}"),
        region=str(values["region"]) if values.get("region") else None,
    )
