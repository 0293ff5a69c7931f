"""The one registry of targets: name -> target. The CLI looks a target up here and calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmctl.errors import BadInput, did_you_mean
from llmctl.infra.targets.base import Connection, Target
from llmctl.infra.targets.eks import EksTarget
from llmctl.infra.targets.kubeconfig import KubeconfigTarget
from llmctl.infra.targets.local import LocalTarget
from llmctl.infra.targets.names import DEFAULT_TARGET, TARGET_NAMES

if TYPE_CHECKING:
    from llmctl.infra.targets.needs import Need

# In the order of TARGET_NAMES (a test checks that every name has exactly one target).
TARGETS: dict[str, Target] = {
    target.name: target for target in (EksTarget(), KubeconfigTarget(), LocalTarget())
}


def names_phrase() -> str:
    """'eks, kubeconfig or local'."""
    return f"{', '.join(TARGET_NAMES[:-1])} or {TARGET_NAMES[-1]}"


def target_help() -> str:
    """`--target`'s help: each name with its summary."""
    described = [f"{name} ({TARGETS[name].summary})" for name in TARGET_NAMES]
    return f"{', '.join(described[:-1])} or {described[-1]}."


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
    return target


def default_target() -> Target:
    return TARGETS[DEFAULT_TARGET]


def connect_needs() -> frozenset[Need]:
    """What `connect` checks before it reads the record naming the target: what any target's
    connect needs."""
    return frozenset().union(*(t.needs.get("connect", frozenset()) for t in TARGETS.values()))


def connect(stack: str, blueprint: str, port: int, workload: str | None = None) -> Connection:
    """`llmctl connect`: find the recorded endpoint and let its target reach it."""
    from llmctl.infra.targets.needs import check_needs
    from llmctl.state import load_endpoint

    check_needs(connect_needs())
    found = load_endpoint(stack, blueprint, workload)
    return get_target(found.target).connect(found, port)
