"""`llmctl stacks list` and `llmctl stacks gc`: preview stacks expire without a hosted service.

A PR's preview is a named workload (`up --stack ci --workload pr-42`: stack `ci.pr-42`) on a
long-lived environment; `gc --prefix pr-` matches the workload name (or, for a whole environment
per PR, the stack name) and removes expired workload stacks, and a platform only when no workload
of its environment is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from llmctl.errors import BadInput, Declined, EngineError, PrerequisiteError
from llmctl.infra.aws.images import delete_workload_repository
from llmctl.infra.aws.preflight import require_pulumi
from llmctl.infra.aws.sweep import leftovers, sweep
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackInfo, StackSpec
from llmctl.infra.lifecycle.finalizers import retry_platform_destroy
from llmctl.infra.lifecycle.reports import DownResult, check_leftovers
from llmctl.infra.lifecycle.teardown import decide
from llmctl.infra.names import split_stack
from llmctl.state import remove_endpoint, state_dir

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.teardown import Teardown


def parse_age(text: str) -> timedelta:
    """'3d', '12h', '90m' -> timedelta."""

    units = {"d": "days", "h": "hours", "m": "minutes"}
    value, unit = text[:-1], text[-1:]
    if unit not in units or not value.isdigit():
        raise BadInput(f"cannot read the age {text!r}", "use a number and a unit: 3d, 12h or 90m")
    return timedelta(**{units[unit]: int(value)})


def stack_rows(engine: Engine) -> list[dict[str, Any]]:
    """Every llmctl stack with its last update (stable keys for --json)."""
    return [
        {
            "project": info.project,
            "stack": info.stack,
            "kind": "platform" if info.project == PLATFORM_PROJECT else "workload",
            "environment": split_stack(info.stack)[0],
            "workload": split_stack(info.stack)[1],
            "last_update": info.last_update.isoformat() if info.last_update else None,
            "resources": info.resource_count,
            "update_in_progress": info.update_in_progress,
            "size": f"{info.resource_count or 0} resources",  # what `stacks list` shows for it
        }
        for info in sorted(
            engine.list_stacks(),
            key=lambda i: (split_stack(i.stack)[0], i.project != PLATFORM_PROJECT, i.stack, i.project),
        )
    ]


def local_rows() -> list[dict[str, Any]]:
    """Every local server llmctl started (any stack), in the shape of `stack_rows` (kind local)."""
    import datetime

    from llmctl.serving.client.local import local_status  # lazy: off the CLI start-up path

    root = state_dir() / "local"
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []:
        for server in local_status(folder.name):
            started = server.get("started")
            rows.append(
                {
                    "project": f"local/{server['blueprint']}",
                    "stack": folder.name,
                    "kind": "local",
                    "environment": folder.name,
                    "workload": None,
                    "last_update": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat()
                    if started
                    else None,
                    "resources": None,  # a local server has no cloud resources
                    "update_in_progress": False,
                    "size": "local server",
                }
            )
    return rows


def all_stack_rows(backend: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """`llmctl stacks list`: the Pulumi stacks and the local servers, and notes. Without the pulumi
    CLI the local servers are still listed (the Pulumi stacks are said to be unread)."""
    local = local_rows()
    try:
        require_pulumi()
    except PrerequisiteError as exc:
        if not local:
            raise
        return local, [f"Pulumi stacks not listed: {exc.message} ({exc.hint})"]
    return [*stack_rows(Engine(resolve_backend(backend))), *local], []


@dataclass
class GcResult:
    expired: list[str]
    removed: list[str]
    notes: list[str] = field(default_factory=list)  # why Kubernetes objects were dropped from state
    # After a platform stack went: the sweep of its cluster and what the leftover check still found
    # (as `llmctl down`: never a clean exit while anything is left).
    sweeps: list[Any] = field(default_factory=list)
    leftovers: list[Any] = field(default_factory=list)

    def check(self) -> None:
        """The leftover verdict of `llmctl down` (a CloudError naming what is left)."""

        if self.leftovers:
            sweep = self.sweeps[0] if self.sweeps else None
            check_leftovers(DownResult(stack="", sweep=sweep, leftovers=self.leftovers))


def expired(
    engine: Engine, older_than: timedelta, *, prefix: str = "", now: datetime | None = None
) -> list[StackInfo]:
    """Stacks whose last update is older than `older_than`; with a prefix, only those whose
    workload name (`ci.pr-42`: `pr-42`) or else stack name starts with it.

    Never a stack with an update in progress (the CLI then reports no last update), nor a platform
    while any workload stack of its environment stays (whatever its name); a stack that never ran
    an update counts as expired only when it holds no resources.
    """
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    every = engine.list_stacks()
    stacks = [info for info in every if _matches(info, prefix)]
    found = []
    for info in stacks:
        stamp = info.last_update
        if stamp is not None and stamp.tzinfo is not None:
            stamp = stamp.astimezone(timezone.utc).replace(tzinfo=None)
        if info.update_in_progress:
            continue
        if (stamp is None and not info.resource_count) or (stamp is not None and now - stamp > older_than):
            found.append(info)
    kept = {split_stack(i.stack)[0] for i in every if i not in found and i.project != PLATFORM_PROJECT}
    found = [i for i in found if not (i.project == PLATFORM_PROJECT and i.stack in kept)]
    # workloads before their platform
    return sorted(found, key=lambda i: (split_stack(i.stack)[0], i.project == PLATFORM_PROJECT, i.stack))


def _matches(info: StackInfo, prefix: str) -> bool:
    workload = split_stack(info.stack)[1]
    return not prefix or (workload or info.stack).startswith(prefix)


def _endpoint_key(info: StackInfo) -> tuple[str, str, str | None]:
    env, workload = split_stack(info.stack)
    return env, info.project.removeprefix("llmctl-"), workload


def gc(
    engine: Engine,
    older_than: timedelta,
    *,
    prefix: str = "",
    dry_run: bool = False,
    confirm: Callable[[list[str]], bool] | None = None,
    sweep_timeout_s: float = 600,
) -> GcResult:
    """Destroy and remove expired stacks (workloads before platforms); after a platform, sweep its
    cluster's leftovers and run the leftover check (see :meth:`GcResult.check`)."""
    old = expired(engine, older_than, prefix=prefix)
    labels = [f"{i.project}/{i.stack}" for i in old]
    if dry_run or not old:
        return GcResult(labels, [])
    if confirm is not None and not confirm(labels):
        raise Declined("nothing was deleted", None)

    # The rule of `down`: every environment's cluster is checked before anything is destroyed.
    envs = {split_stack(i.stack)[0] for i in old}
    outputs_of = {env: engine.outputs(StackSpec(PLATFORM_PROJECT, env)) for env in envs}
    plans = {
        env: _teardown(engine, env, [i for i in old if split_stack(i.stack)[0] == env], outputs_of[env])
        for env in envs
    }
    eks = {env for env, outputs in outputs_of.items() if outputs}  # the platform's account and region
    removed = []
    retried: list[str] = []
    repositories: list[Any] = []  # image repositories ECR refused to delete
    for info in old:
        plan = plans[split_stack(info.stack)[0]]
        spec = StackSpec(info.project, info.stack, env=plan.env)
        with plan.guard():
            try:
                engine.destroy(spec, remove=True)
            except EngineError as exc:
                if info.project != PLATFORM_PROJECT:
                    raise
                # as `down`: sweep, release finalizers still stuck after it, retry once
                retry_platform_destroy(
                    engine,
                    spec,
                    exc,
                    cluster=plan.cluster,
                    region=plan.region,
                    kubeconfig=plan.kubeconfig,
                    note=retried.append,
                    sweep_timeout_s=sweep_timeout_s,
                )
        removed.append(f"{info.project}/{info.stack}")
        if info.project != PLATFORM_PROJECT:
            remove_endpoint(*_endpoint_key(info))
            if split_stack(info.stack)[0] in eks:  # the workload's own repository, as `down` does
                note, left = delete_workload_repository(plan.region, info.stack, _endpoint_key(info)[1])
                retried += [note] if note else []
                repositories += [left] if left is not None else []
    notes = [note for env in sorted(plans) for note in plans[env].notes] + retried
    result = GcResult(labels, removed, notes, leftovers=repositories)
    platforms = sorted({split_stack(i.stack)[0] for i in old if i.project == PLATFORM_PROJECT})
    if platforms:
        for env in platforms:  # what the cluster's controllers left, as after `llmctl down`
            plan = plans[env]
            result.sweeps.append(sweep(plan.cluster, plan.region, timeout_s=sweep_timeout_s))
            result.leftovers += leftovers(plan.cluster, plan.region)
    return result


def _teardown(engine: Engine, env: str, infos: list[StackInfo], outputs: dict[str, Any] | None) -> Teardown:
    """How one environment's expired stacks are destroyed (see :mod:`teardown`)."""

    values = outputs or {}
    return decide(
        engine,
        [StackSpec(i.project, i.stack) for i in infos],
        stack=env,
        outputs=outputs,
        cluster=str(values.get("cluster_name") or f"llmctl-{env}"),
        region=str(values["region"]) if values.get("region") else None,
    )
