"""The one registry of targets: name -> target. The CLI looks a target up here and calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmctl.errors import BadInput, did_you_mean
from llmctl.infra.names import DEFAULT_TARGET, TARGET_NAMES
from llmctl.infra.targets.base import Connection, Target, UpRequest
from llmctl.infra.targets.eks import EksTarget
from llmctl.infra.targets.kubeconfig import KubeconfigTarget
from llmctl.infra.targets.local import LocalTarget
from llmctl.infra.targets.needs import check_needs
from llmctl.state import check_name, load_endpoint, recorded_targets
from llmctl.state import remember_up as save

if TYPE_CHECKING:
    from llmctl.infra.targets.needs import Need

# In the order of TARGET_NAMES (a test checks that every name has exactly one target).
TARGETS: dict[str, Target] = {
    target.name: target for target in (EksTarget(), KubeconfigTarget(), LocalTarget())
}


def names_phrase() -> str:
    """'eks, kubeconfig or local'."""
    return f"{', '.join(TARGET_NAMES[:-1])} or {TARGET_NAMES[-1]}"


def get_target(name: str, request: object | None = None) -> Target:
    """The target called `name`; with a request, also refuse the flags another target owns."""
    target = TARGETS.get(name)
    if target is None:
        close = did_you_mean(name, TARGET_NAMES)
        raise BadInput(f"unknown --target {name!r}", f"{close + ' ' if close else ''}use {names_phrase()}")
    if request is not None:
        for other in TARGETS.values():
            for flags in other.own_flags if other is not target else ():
                if flags.given(request):
                    raise BadInput(flags.message, flags.hint)
        if getattr(request, "workload", None) and not target.takes_workloads:
            raise BadInput(
                f"--workload does not apply to --target {name}",
                "named workloads are workload stacks on a cluster: use --target eks or kubeconfig",
            )
        if getattr(request, "accept_moved_tags", False) and not target.takes_workloads:
            raise BadInput(
                f"--accept-moved-tags does not apply to --target {name}",
                "image digests are pinned per workload stack on a cluster: use --target eks or kubeconfig",
            )
    return target


def resolve_target(given: str | None, stack: str, blueprint: str | None = None) -> str:
    """`--target` as given; else where the stack's blueprints are recorded as deployed (local
    servers included, a starting one too); else the default (eks)."""

    if given:
        return given
    check_name("stack", stack)
    found = recorded_targets(stack, blueprint)
    if len(found) > 1:
        raise BadInput(
            f"stack {stack!r} has blueprints deployed on {' and '.join(sorted(found))}",
            "pass --target to say which" + ("" if blueprint else " (or --blueprint NAME)"),
        )
    if found:
        return found.pop()
    from llmctl.serving.client.local import local_status  # lazy: off the CLI start-up path

    local = [row for row in local_status(stack) if blueprint is None or row["blueprint"] == blueprint]
    return "local" if any(row["running"] for row in local) else DEFAULT_TARGET


def up_command(request: UpRequest, target: str) -> str:
    """The `llmctl up` command line of a request (the flags given), for hints to repeat."""
    import shlex

    parts = ["llmctl up", f"--blueprint {shlex.quote(request.blueprint)}"]
    if target != DEFAULT_TARGET:
        parts.append(f"--target {target}")
    parts.append(f"--stack {request.stack}")
    given = (
        ("--workload", request.workload),
        ("--region", request.region),
        ("--kubeconfig", request.kubeconfig),
        ("--pools", request.pools),
        ("--model", request.model),
        ("--port", request.port),
    )
    parts.extend(f"{flag} {shlex.quote(str(value))}" for flag, value in given if value is not None)
    return " ".join(parts)


def remember_up(request: UpRequest, target: str) -> None:
    """Record the `up` command line (before it runs: an interrupted or failed `up` is repeated too)."""
    from llmctl.blueprints.catalog import load_blueprint  # lazy: pydantic and YAML, off the CLI start-up path

    save(request.stack, load_blueprint(request.blueprint).name, request.workload, up_command(request, target))


def default_target() -> Target:
    return TARGETS[DEFAULT_TARGET]


def connect_needs() -> frozenset[Need]:
    """What `connect` checks before it reads the record naming the target: what any target's
    connect needs."""
    return frozenset().union(*(t.needs.get("connect", frozenset()) for t in TARGETS.values()))


def connect(stack: str, blueprint: str, port: int, workload: str | None = None) -> Connection:
    """`llmctl connect`: find the recorded endpoint and let its target reach it."""

    check_needs(connect_needs())
    found = load_endpoint(stack, blueprint, workload)
    return get_target(found.target).connect(found, port)


def collect_status(
    stack: str, target: str, engine: Any = None, blueprint: str | None = None
) -> dict[str, Any]:
    """Everything `llmctl status --json` prints for the target called `target`; ``engine`` (an
    ``infra.lifecycle.engine.Engine``) is needed for the cluster targets only; with ``blueprint``,
    its serving pods' start timelines too."""
    return get_target(target).status_data(stack, engine, blueprint)
