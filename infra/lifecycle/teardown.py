"""When `down` and `stacks gc` may drop Kubernetes objects from state instead of deleting them.

`PULUMI_K8S_DELETE_UNREACHABLE=true` makes the Kubernetes provider forget every object of a cluster it
cannot reach. Set blindly, an expired token is enough for Pulumi to drop the NodePools,
EC2NodeClasses and Services from state and then delete EKS under Karpenter nodes that keep running.
So destroys run without it, and it is set only when

- `eks:DescribeCluster` says the cluster is gone (ResourceNotFoundException), or
- the user asked for it with `llmctl down --force`, after being told what it drops.

When the cluster exists but its Kubernetes API cannot be reached (or AWS cannot say whether the
cluster exists), `down` refuses before changing anything, with one line naming the fix.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmctl.errors import EngineError, LlmctlError, PrerequisiteError
from llmctl.infra.aws.session import new_session
from llmctl.infra.lifecycle.kube import kubeconfig_path, kubectl_json, save_kubeconfig

DELETE_UNREACHABLE = "PULUMI_K8S_DELETE_UNREACHABLE"
CREDENTIAL_CODES = (
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "AuthFailure",
    "AccessDenied",
    "AccessDeniedException",
)
# What dropping an object of a kind from state (without deleting it) may leave behind.
LEAVES = {
    "NodePool": "Karpenter keeps its nodes running until the sweep terminates the instances tagged for the cluster",
    "EC2NodeClass": "its instance profiles and launch templates stay until the sweep deletes them",
    "NodeClaim": "its EC2 instance stays until the sweep terminates it",
    "Service": "a LoadBalancer Service's load balancer and security groups stay until the sweep deletes them",
    "Release": "the chart's objects stay in the cluster while it exists",
}
UNREACHABLE_WORDS = ("cluster is unreachable", "unable to connect to the server", "unreachable cluster")


@dataclass
class Teardown:
    """How the destroys of one environment run, and what the user is told about it."""

    env: dict[str, str] = field(default_factory=dict)  # extra environment of every destroy
    notes: list[str] = field(default_factory=list)  # said before the destroys, kept in the result
    confirm_lines: list[str] = field(default_factory=list)  # added to the confirmation
    kubeconfig: Path | None = None  # the cluster's kubeconfig, when one is known
    cluster: str = ""
    region: str = ""
    stack: str = "dev"

    @property
    def drops(self) -> bool:
        return self.env.get(DELETE_UNREACHABLE) == "true"

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """A destroy that failed because the cluster is unreachable becomes the refusal (nothing was
        dropped: the destroy ran without delete-unreachable)."""
        try:
            yield
        except EngineError as exc:
            if not self.drops and is_unreachable(exc):
                raise refusal(
                    self.cluster,
                    self.region,
                    self.stack,
                    f"a destroy found its Kubernetes API unreachable ({first_line(exc.message)})",
                    started=True,
                ) from exc
            raise


def first_line(text: str, limit: int = 160) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else text)[:limit]


def is_unreachable(exc: LlmctlError) -> bool:
    text = exc.message.lower()
    return any(word in text for word in UNREACHABLE_WORDS)


def refusal(
    cluster: str, region: str, stack: str, why: str, drops: str = "", *, started: bool = False
) -> PrerequisiteError:
    """`down` refuses: one line saying why, the hint naming the fixes and what --force drops.
    `started`: a destroy had begun (what it deleted before the failure is gone; nothing was dropped)."""
    flag = "" if stack == "dev" else f" --stack {stack}"
    outcome = "nothing was dropped from state" if started else "nothing was changed"
    return PrerequisiteError(
        f"cluster {cluster} cannot be torn down safely: {why}; {outcome}",
        "refresh your AWS credentials (`aws sso login` or new keys) and the kubeconfig "
        f"(`aws eks update-kubeconfig --name {cluster} --region {region}`), then run `llmctl down{flag}` again; "
        f"or `llmctl down{flag} --force` drops {drops or 'the Kubernetes objects in state'} from state "
        "without deleting them (their nodes and load balancers are then left to the sweep)",
    )


# ---- what is in state --------------------------------------------------------------------------
def kind_counts(engine: Any, specs: Sequence[Any]) -> Counter[tuple[str, str]]:
    """(kind, group/version) -> how many Kubernetes objects the stacks' states hold."""
    counts: Counter[tuple[str, str]] = Counter()
    for spec in specs:
        for res in engine.state_resources(spec):
            parts = str(res.get("type", "")).split(":")
            if len(parts) == 3 and parts[0] == "kubernetes":
                counts[(parts[2], parts[1])] += 1
    return counts


def drop_lines(counts: Counter[tuple[str, str]]) -> list[str]:
    """One line per kind: how many, and what dropping them may leave."""
    order = list(LEAVES)
    ranked = sorted(
        counts.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0])
    )
    return [
        f"drops {n} {kind} ({api}) from state: {LEAVES.get(kind, 'stays in the cluster while it exists')}"
        for (kind, api), n in ranked
    ]


def drop_summary(counts: Counter[tuple[str, str]]) -> str:
    if not counts:
        return ""
    kinds: Counter[str] = Counter()
    for (kind, _), n in counts.items():
        kinds[kind] += n
    return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))


# ---- what AWS and the cluster say --------------------------------------------------------------
@dataclass(frozen=True)
class ClusterState:
    """`eks:DescribeCluster`'s answer: gone, its status, or why it could not be asked."""

    gone: bool = False
    status: str = ""
    error: str = ""


def describe_cluster(cluster: str, region: str | None, *, session: Any = None) -> ClusterState:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        maker: Any = session or new_session(region)
        found = maker.client("eks", region_name=region).describe_cluster(name=cluster)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code == "ResourceNotFoundException":
            return ClusterState(gone=True)
        return ClusterState(error=f"eks:DescribeCluster failed ({code}: {error.get('Message', '')})")
    except BotoCoreError as exc:
        return ClusterState(error=f"eks:DescribeCluster failed ({type(exc).__name__}: {exc})")
    return ClusterState(status=str(found.get("cluster", {}).get("status", "")))


def kubeconfig_for(stack: str, outputs: dict[str, Any] | None) -> Path | None:
    """The platform's kubeconfig (its output, saved where `up` keeps it), else the saved one."""

    text = (outputs or {}).get("kubeconfig")
    if isinstance(text, dict):
        text = json.dumps(text)
    if text:
        return save_kubeconfig(stack, str(text))
    path = kubeconfig_path(stack)
    return path if path.exists() else None


def kube_problem(kubeconfig: Path) -> str | None:
    """Why the Kubernetes API cannot be reached with this kubeconfig (None: it answers)."""

    try:
        kubectl_json(kubeconfig, "get", "namespaces", timeout=60)
    except PrerequisiteError:
        raise  # kubectl is missing: the caller says so
    except LlmctlError as exc:
        return first_line(exc.message.split(": ", 1)[-1])
    return None


# ---- the decision ------------------------------------------------------------------------------
def decide(
    engine: Any,
    specs: Sequence[Any],
    *,
    stack: str,
    outputs: dict[str, Any] | None,
    cluster: str,
    region: str | None,
    force: bool = False,
    session: Any = None,
) -> Teardown:
    """How the destroys of `specs` (stacks of environment `stack`) run; raises the refusal when
    the cluster exists but cannot be reached. `outputs` is None when there is no platform stack
    (a kubeconfig target, or nothing left): then no AWS call is made and nothing is dropped."""
    if region is None:  # `stacks gc` of a platform that recorded none: the AWS default
        region = str(new_session().region_name or "us-west-2")
    plan = Teardown(cluster=cluster, region=region, stack=stack)
    if force:
        counts = kind_counts(engine, specs)
        plan.env[DELETE_UNREACHABLE] = "true"
        plan.kubeconfig = kubeconfig_for(stack, outputs) if outputs is not None else None
        lines = drop_lines(counts) or ["no Kubernetes objects in state: --force drops nothing"]
        plan.confirm_lines = [
            f"--force: destroys run with {DELETE_UNREACHABLE}=true; if cluster {cluster} cannot be reached:",
            *(f"  {line}" for line in lines),
        ]
        plan.notes = [
            f"--force: {DELETE_UNREACHABLE}=true (asked for): objects of an unreachable cluster are dropped from state",
            *lines,
        ]
        return plan
    if outputs is None or not specs:
        return plan
    state = describe_cluster(cluster, region, session=session)
    if state.gone:
        plan.env[DELETE_UNREACHABLE] = "true"
        plan.notes.append(
            f"cluster {cluster} is gone (eks:DescribeCluster in {region}: ResourceNotFoundException): "
            f"Kubernetes objects still in state are dropped from it ({DELETE_UNREACHABLE}=true)"
        )
        return plan
    if state.error:
        raise refusal(
            cluster,
            region,
            stack,
            f"AWS cannot say whether it still exists: {state.error}",
            drop_summary(kind_counts(engine, specs)),
        )
    if state.status == "DELETING":
        raise refusal(
            cluster,
            region,
            stack,
            "EKS is deleting it (wait until `aws eks describe-cluster` no longer finds it)",
            drop_summary(kind_counts(engine, specs)),
        )
    plan.kubeconfig = kubeconfig_for(stack, outputs)
    if plan.kubeconfig is None:
        plan.notes.append(
            f"no kubeconfig for cluster {cluster} to check its Kubernetes API: the destroys run "
            "without dropping anything from state"
        )
        return plan
    try:
        problem = kube_problem(plan.kubeconfig)
    except PrerequisiteError as exc:
        plan.notes.append(
            f"{exc.message}: the Kubernetes API of {cluster} was not checked; the destroys run without "
            "dropping anything from state"
        )
        return plan
    if problem:
        raise refusal(
            cluster,
            region,
            stack,
            f"it exists ({state.status}) but its Kubernetes API is unreachable ({problem})",
            drop_summary(kind_counts(engine, specs)),
        )
    return plan
