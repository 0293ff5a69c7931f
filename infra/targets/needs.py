"""What a target's operation needs, and the preflight that checks exactly that, all at once.

A target declares per operation a set of :data:`Need`; :func:`check_needs` turns the set into
checks (in a fixed order) and raises one error listing every missing item, each with its fix.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from llmctl.errors import LlmctlError, PrerequisiteError
from llmctl.infra.lifecycle.kube import kubeconfig_file
from llmctl.serving.common.deps import SERVING_EXTRA

Need = Literal["pulumi", "kubectl", "kubectl-eks", "aws-cli", "kubeconfig", "ray", "aws", "hf-token"]
# The order checks run (and problems are listed) in.
NEED_ORDER: tuple[Need, ...] = (
    "pulumi",
    "kubectl",
    "kubectl-eks",
    "aws-cli",
    "kubeconfig",
    "ray",
    "aws",
    "hf-token",
)
# What `llmctl doctor` calls each check (the same checks `up`'s preflight runs).
NEED_NAMES: dict[Need, str] = {
    "pulumi": "pulumi CLI",
    "kubectl": "kubectl",
    "kubectl-eks": "kubectl",
    "aws-cli": "AWS CLI",
    "kubeconfig": "kubeconfig",
    "ray": "Ray",
    "aws": "AWS credentials",
    "hf-token": "Hugging Face token",
}


@dataclass(frozen=True)
class NeedContext:
    """What the checks look at: the region given (for AWS), the kubeconfig file given, and the
    blueprint with the Hugging Face token file given (a gated model needs a token)."""

    region: str | None = None
    kubeconfig: Path | None = None
    blueprint: str | None = None
    hf_token_file: Path | None = None


def require_kubeconfig(path: Path | None) -> str:
    """What the preflight reports for a kubeconfig file it found."""
    return f"kubeconfig {kubeconfig_file(path)}"


def require_ray() -> str:
    """Ray (the serving extra) is importable; found without importing it."""
    if importlib.util.find_spec("ray") is None:
        raise PrerequisiteError(
            "Ray is not installed (the local target serves with Ray Serve)",
            SERVING_EXTRA,
        )
    return "Ray (serving extra)"


def _pulumi(_: NeedContext) -> str:
    from llmctl.infra.aws.preflight import require_pulumi  # lazy: off the CLI start-up path

    return require_pulumi()


def _kubectl(_: NeedContext) -> str:
    from llmctl.infra.aws.preflight import require_kubectl  # lazy: off the CLI start-up path

    return require_kubectl()


def _kubectl_eks(_: NeedContext) -> str:
    # readiness, status and down's finalizer checks call kubectl against the pinned EKS version
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()
    from llmctl.infra.aws.preflight import require_kubectl_for  # lazy: off the CLI start-up path

    return require_kubectl_for(versions().eks.kubernetes_version.value)


def _aws_cli(_: NeedContext) -> str:
    # the EKS kubeconfig authenticates through `aws eks get-token` (every Kubernetes resource, kubectl)
    from llmctl.infra.aws.preflight import require_aws_cli  # lazy: off the CLI start-up path

    return require_aws_cli()


def _aws(ctx: NeedContext) -> str:
    from llmctl.infra.aws.preflight import (  # lazy: off the CLI start-up path
        require_aws,
        require_local_credentials,
        resolve_region,
    )

    try:
        region = resolve_region(ctx.region)
    except PrerequisiteError as no_region:
        # no region: still say whether credentials are there, so both come in one list
        try:
            require_local_credentials()
        except PrerequisiteError as no_credentials:
            raise PrerequisiteError(
                no_region.message, fixes=[(e.message, e.hint) for e in (no_region, no_credentials)]
            ) from None
        raise
    ident = require_aws(region)
    return f"AWS account {ident.account} as {ident.arn} in {ident.region}"


def _hf_token(ctx: NeedContext) -> str:
    """A token file given must be readable; a gated model needs a token (from it or HF_TOKEN)."""
    from llmctl.blueprints.catalog import load_blueprint  # lazy: pydantic and YAML
    from llmctl.blueprints.hf_token import hf_token, require_hf_token  # lazy: as the catalog
    from llmctl.blueprints.rules import is_gated  # lazy: pydantic models

    token = hf_token(ctx.hf_token_file)
    if ctx.blueprint is None:
        return "token given" if token else "no token given (no blueprint to check)"
    bp = load_blueprint(ctx.blueprint)
    require_hf_token(bp, token)
    return f"{bp.model.id} is gated; a token is given" if is_gated(bp) else f"{bp.model.id} is not gated"


CHECKS: dict[Need, Callable[[NeedContext], str]] = {
    "pulumi": _pulumi,
    "kubectl": _kubectl,
    "kubectl-eks": _kubectl_eks,
    "aws-cli": _aws_cli,
    "kubeconfig": lambda ctx: require_kubeconfig(ctx.kubeconfig),
    "ray": lambda _: require_ray(),
    "aws": _aws,
    "hf-token": _hf_token,
}


@dataclass(frozen=True)
class NeedResult:
    """One need checked: what was found, or the error that says what is missing and its fix."""

    need: Need
    found: str | None
    problem: LlmctlError | None

    @property
    def name(self) -> str:
        return NEED_NAMES[self.need]


def probe_needs(needs: Iterable[Need], ctx: NeedContext | None = None) -> list[NeedResult]:
    """Check every need (none twice, in NEED_ORDER) and return each outcome: the one list of checks
    `up`'s preflight raises from and `llmctl doctor` prints."""
    wanted = set(needs)
    ctx = ctx or NeedContext()
    results: list[NeedResult] = []
    for need in NEED_ORDER:
        if need not in wanted:
            continue
        try:
            results.append(NeedResult(need, CHECKS[need](ctx), None))
        except LlmctlError as exc:
            results.append(NeedResult(need, None, exc))
    return results


def check_needs(
    needs: Iterable[Need],
    ctx: NeedContext | None = None,
    *,
    look_offline: str | None = None,
    instead: str | None = None,
) -> list[str]:
    """Check every need (none twice); returns what was found, or raises one error listing every
    missing item with its own fix (a bad flag, not a missing thing, is raised as it is).
    `look_offline`: the command that shows the same without these prerequisites; `instead`: the
    command that runs it on this machine without them (the hint names it first)."""
    results = probe_needs(needs, ctx)
    found = [r.found for r in results if r.found is not None]
    problems = [r.problem for r in results if r.problem is not None]
    if len(problems) == 1 and not isinstance(problems[0], PrerequisiteError):
        raise problems[0]  # e.g. AWS rejected the credentials: its own code
    missing = [item for p in problems for item in (getattr(p, "fixes", None) or [(p.message, p.hint)])]
    if missing:
        raise PrerequisiteError(
            f"missing prerequisites ({len(missing)}):",
            "; ".join(
                [
                    *([f"to run it on this machine instead: `{instead}`"] if instead else []),
                    *([f"to look without them: `{look_offline}`"] if look_offline else []),
                ]
            )
            or None,
            fixes=missing,
        )
    return found
