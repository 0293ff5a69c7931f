"""Names every room of `infra/` shares, defined once and pure (importing it loads nothing heavy):
the deployment targets' names (the registry, the CLI's `--target` and the workload configuration
read them from here) and how stacks, workloads and their namespaces are named."""

from __future__ import annotations

import re
from typing import Literal, get_args

from llmctl.errors import BadInput

# Targets whose workload is a Pulumi stack on Kubernetes: a cluster llmctl builds, or one it is given.
ClusterTarget = Literal["eks", "kubeconfig"]
TargetName = Literal[ClusterTarget, "local"]

TARGET_NAMES: tuple[TargetName, ...] = get_args(TargetName)
DEFAULT_TARGET: TargetName = "eks"
# A few words each for `--target`'s help; each target class reads its own (`Target.summary`).
TARGET_SUMMARIES: dict[TargetName, str] = {
    "eks": "an EKS cluster llmctl builds",
    "kubeconfig": "an existing cluster",
    "local": "this machine",
}


def target_help() -> str:
    """`--target`'s help: each name with its summary (here, so the CLI's start-up loads no target)."""
    described = [f"{name} ({TARGET_SUMMARIES[name]})" for name in TARGET_NAMES]
    return f"{', '.join(described[:-1])} or {described[-1]}."


_WORKLOAD = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
_ENV = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


def check_workload(name: str) -> str:
    """A workload name (`pr-42`), or a one-line error: it becomes part of a stack, a namespace and
    an ECR repository name."""
    if not _WORKLOAD.match(name):
        raise BadInput(
            f"invalid workload name {name!r}",
            "use lowercase letters, digits and '-' (at most 32 characters, starting and ending with a "
            "letter or digit), e.g. pr-42",
        )
    return name


def workload_stack(env: str, workload: str | None) -> str:
    """The workload stack's name: the environment, or `<env>.<workload>`."""
    return f"{env}.{check_workload(workload)}" if workload else env


def split_stack(name: str) -> tuple[str, str | None]:
    """`ci.pr-42` -> ('ci', 'pr-42'); `dev` -> ('dev', None). Environment names have no '.'."""
    env, dot, workload = name.partition(".")
    return env, (workload if dot else None)


def is_workload_stack(name: str) -> bool:
    """Whether `name` reads as `<env>.<workload>` (e.g. `ci.pr-42`)."""
    env, workload = split_stack(name)
    return bool(workload and _ENV.match(env) and _WORKLOAD.match(workload))


def namespace(blueprint: str, workload: str | None) -> str | None:
    """The Kubernetes namespace of a named workload (`<blueprint>-<workload>`); None for the
    default one (the blueprint's name, as before)."""
    if not workload:
        return None
    found = f"{blueprint}-{workload}"
    if len(found) > 63:
        raise BadInput(
            f"namespace {found!r} is longer than 63 characters",
            "use a shorter --workload name",
        )
    return found
