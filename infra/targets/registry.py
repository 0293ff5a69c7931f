"""The one registry of targets: name -> target. The CLI looks a target up here and calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmctl.errors import BadInput, LlmctlError, did_you_mean
from llmctl.infra.names import DEFAULT_TARGET, TARGET_NAMES
from llmctl.infra.targets.base import Connection, Target, UpRequest, nothing_deployed
from llmctl.infra.targets.eks import EksTarget
from llmctl.infra.targets.kubeconfig import KubeconfigTarget
from llmctl.infra.targets.local import LocalTarget
from llmctl.infra.targets.needs import check_needs
from llmctl.state import check_name, last_up_commands, recorded_targets
from llmctl.state import remember_up as save

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.drift_notes import DriftReader
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.lifecycle.reports import UpResult
    from llmctl.infra.targets.base import Confirm
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
        if getattr(request, "replace", False) and not target.takes_workloads:
            raise BadInput(
                f"--replace does not apply to --target {name}",
                "it replaces a deployed workload's serving pods on a cluster: use --target eks or kubeconfig",
            )
        if getattr(request, "accept_moved_tags", False) and not target.takes_workloads:
            raise BadInput(
                f"--accept-moved-tags does not apply to --target {name}",
                "image digests are pinned per workload stack on a cluster: use --target eks or kubeconfig",
            )
    return target


def resolve_target(
    given: str | None, stack: str, blueprint: str | None = None, backend: str | None = None
) -> str:
    """`--target` as given; else where the stack's blueprints are recorded as deployed (local
    servers included, a starting one too); else eks where the stack has Pulumi stacks (or the backend
    is one only the pulumi CLI can read). With nothing of the stack anywhere: NotDeployed, before any
    tool or credential is asked for. A misspelled --blueprint is named as such first."""
    from llmctl.serving.client.deployed import check_blueprint_name  # lazy: off the CLI start-up path

    check_name("stack", stack)
    check_blueprint_name(blueprint)
    if given:
        return given
    found = recorded_targets(stack, blueprint)
    if len(found) > 1:
        raise BadInput(
            f"stack {stack!r} has blueprints deployed on {' and '.join(sorted(found))}",
            "pass --target to say which" + ("" if blueprint else " (or --blueprint NAME)"),
        )
    if found:
        return found.pop()
    from llmctl.infra.lifecycle.backend import recorded_stacks  # lazy: off the CLI start-up path
    from llmctl.serving.client.local import local_status  # lazy: off the CLI start-up path

    local = [row for row in local_status(stack) if blueprint is None or row["blueprint"] == blueprint]
    if any(row["running"] for row in local):
        return "local"
    stacks = recorded_stacks(backend, stack)
    if stacks is None or stacks or cluster_ups(stack):
        # Pulumi stacks, or an `up` on a cluster that ran here (a `down` after it, or after a failed
        # up, still sweeps and checks for leftovers, and says what is still there)
        return DEFAULT_TARGET
    if local:  # a local server that stopped by itself: its record is what is left to show or clean
        return "local"
    raise nothing_deployed(stack, blueprint)


def cluster_ups(stack: str) -> list[str]:
    """The recorded `llmctl up` command lines of the stack that ran on a cluster target (the
    recorded line names `--target` unless it is the default)."""
    import shlex

    found = []
    for command in last_up_commands(stack):
        words = shlex.split(command)
        target = words[words.index("--target") + 1] if "--target" in words[:-1] else DEFAULT_TARGET
        if target != "local":
            found.append(command)
    return found


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
    """Record the `up` command line, for the hints of later commands to repeat."""
    from llmctl.blueprints.catalog import load_blueprint  # lazy: pydantic and YAML, off the CLI start-up path

    save(request.stack, load_blueprint(request.blueprint).name, request.workload, up_command(request, target))


# The phases of `up` that change nothing (a preview, a look at an existing cluster).
READ_ONLY_PHASES = frozenset({"plan", "cluster check"})


def run_up(
    target: Target,
    request: UpRequest,
    progress: Progress,
    confirm: Confirm,
    *,
    drift: DriftReader | None = None,
) -> UpResult:
    """`llmctl up` on a target. Its command line is recorded once the up ran, so that an interrupted
    or failed one is repeated by the hints too: the confirmation said yes, or a phase that changes
    something began. A refused `up` (a misspelled region, a missing prerequisite, a failed check, a
    declined confirmation, a port in use) is not recorded: hints never repeat a command line that
    was refused."""
    went_ahead = False

    def confirm_and_note(question: str, items: list[str]) -> bool:
        nonlocal went_ahead
        went_ahead = confirm(question, items)
        return went_ahead

    def ran() -> bool:
        return went_ahead or any(name not in READ_ONLY_PHASES for name, _ in progress.timeline.phases)

    try:
        result = target.up(request, progress, confirm_and_note, drift=drift)
    except LlmctlError as error:
        if error.exit_code not in REFUSED and ran():  # refused (bad input, missing prerequisite): not kept
            remember_up(request, target.name)
        raise
    except BaseException:  # interrupted (Ctrl-C) or failed in between: repeated by the hints
        if ran():
            remember_up(request, target.name)
        raise
    remember_up(request, target.name)
    return result


# The exit codes of an `up` that was refused rather than run: a declined confirmation, bad input, a
# missing prerequisite (the CLI reference's exit codes).
REFUSED = frozenset({0, 2, 3})


def default_target() -> Target:
    return TARGETS[DEFAULT_TARGET]


def connect_needs() -> frozenset[Need]:
    """What `connect` checks before it reads the record naming the target: what any target's
    connect needs."""
    return frozenset().union(*(t.needs.get("connect", frozenset()) for t in TARGETS.values()))


def connect(stack: str, blueprint: str, port: int, workload: str | None = None) -> Connection:
    """`llmctl connect`: find the recorded endpoint and let its target reach it."""

    from llmctl.serving.client.deployed import find_endpoint  # lazy: off the CLI start-up path

    check_needs(connect_needs())
    found = find_endpoint(stack, blueprint, workload)
    return get_target(found.target).connect(found, port)


def collect_status(
    stack: str, target: str, engine: Any = None, blueprint: str | None = None
) -> dict[str, Any]:
    """Everything `llmctl status --json` prints for the target called `target`; ``engine`` (an
    ``infra.lifecycle.engine.Engine``) is needed for the cluster targets only; with ``blueprint``,
    its serving pods' start timelines too."""
    return get_target(target).status_data(stack, engine, blueprint)
