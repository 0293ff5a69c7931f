"""Properties of `down`'s and `stacks gc`'s teardown decision (`infra/lifecycle/teardown.py`).

The rule, from the module's docstring: destroys run without `PULUMI_K8S_DELETE_UNREACHABLE`, and
it is set only when EKS says the cluster is gone (ResourceNotFoundException) or the user asked
with --force; when the cluster exists but its API cannot be reached, or AWS cannot say whether it
exists, or EKS is deleting it, `decide` refuses before anything changes, in one line naming the
cluster. So for any answer of eks:DescribeCluster (every status, the credential and other error
codes), any kubeconfig (in the outputs, saved, none) and any kubectl outcome (answers, the API
unreachable, kubectl missing):

- objects are dropped from state exactly when --force or the cluster is gone;
- a refusal happens exactly when the cluster is not gone, not forced, and AWS cannot say, EKS is
  deleting it, or its API is unreachable with a kubeconfig in hand; its message is one line;
- without a platform (`outputs` None) or anything to destroy, and without --force, AWS is never
  asked;
- a destroy that fails on an unreachable API becomes the refusal only when nothing is dropped;
- what --force says it drops lists each (kind, API) once, the LEAVES kinds first, and the summary
  counts every object.

EKS answers through botocore's Stubber on a real client and kubectl through the recorded stand-in,
as in test_teardown_units.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from saved_backend import SavedBackend
from test_teardown_units import CLUSTER, KUBECONFIG, REGION, SPECS, UNREACHABLE, Eks

from llmctl.errors import EngineError, PrerequisiteError, ServingError
from llmctl.infra.lifecycle import teardown
from llmctl.infra.lifecycle.engine import StackSpec
from llmctl.infra.lifecycle.kube import kubeconfig_path
from llmctl.infra.lifecycle.teardown import (
    DELETE_UNREACHABLE,
    LEAVES,
    UNREACHABLE_WORDS,
    Teardown,
    decide,
    drop_lines,
    drop_summary,
)

STATUSES = ("CREATING", "ACTIVE", "DELETING", "FAILED", "UPDATING", "PENDING")
CODES = ("ResourceNotFoundException", "AccessDeniedException", "ExpiredTokenException", "ServerException")
eks_st = st.one_of(
    st.sampled_from(STATUSES).map(lambda s: ("found", s)), st.sampled_from(CODES).map(lambda c: ("error", c))
)


@given(
    force=st.booleans(),
    platform=st.booleans(),
    eks=eks_st,
    kubeconfig=st.sampled_from(("output", "saved", "none")),
    kubectl=st.sampled_from(("answers", "unreachable", "missing")),
    stacks=st.sampled_from((SPECS, SPECS[1:], [])),
)
# EKS deleting the cluster, and a refused DescribeCluster, are refusals even without a kubeconfig
@example(False, True, ("found", "DELETING"), "none", "answers", SPECS)
@example(False, True, ("found", "ACTIVE"), "output", "unreachable", SPECS)  # it exists, its API is down
@example(False, True, ("error", "ResourceNotFoundException"), "output", "unreachable", SPECS)  # gone: dropped
@example(False, True, ("error", "AccessDeniedException"), "none", "answers", SPECS)
@example(
    False, True, ("error", "ResourceNotFoundException"), "output", "unreachable", []
)  # nothing to destroy
def test_objects_are_dropped_only_when_forced_or_the_cluster_is_gone_else_refused_or_kept(
    force: bool, platform: bool, eks: tuple[str, str], kubeconfig: str, kubectl: str, stacks: list[StackSpec]
) -> None:
    answer, value = eks
    session = Eks().found(value) if answer == "found" else Eks().error(value)
    outputs = {"kubeconfig": KUBECONFIG} if kubeconfig == "output" else {}
    saved = kubeconfig_path("ci")
    saved.unlink(missing_ok=True)
    if kubeconfig == "saved":
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(KUBECONFIG)
    calls: list[tuple[str, ...]] = []

    def kubectl_json(path: Any, *args: str, timeout: float = 30) -> Any:
        calls.append(args)
        if kubectl == "unreachable":
            raise ServingError(f"kubectl get namespaces failed: {UNREACHABLE}", None)
        if kubectl == "missing":
            raise PrerequisiteError("kubectl not found", "install kubectl")
        return {"items": []}

    gone = answer == "error" and value == "ResourceNotFoundException"
    cannot_say = answer == "error" and not gone
    refused = (
        not force
        and platform
        and bool(stacks)
        and not gone
        and (cannot_say or value == "DELETING" or (kubeconfig != "none" and kubectl == "unreachable"))
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(teardown, "kubectl_json", kubectl_json)
        try:
            plan = decide(
                SavedBackend(),
                stacks,
                stack="ci",
                outputs=outputs if platform else None,
                cluster=CLUSTER,
                region=REGION,
                force=force,
                session=session,
            )
        except PrerequisiteError as error:
            assert refused, error.message
            assert "\n" not in error.message and CLUSTER in error.message
            assert error.message.endswith("nothing was changed")
            return
    assert not refused
    assert plan.drops is (force or (platform and bool(stacks) and gone))
    assert (DELETE_UNREACHABLE in plan.env) is plan.drops
    if not force and not (platform and stacks):
        assert session.regions == [] and calls == []


kind_st = st.sampled_from([*LEAVES, "Deployment", "ConfigMap", "Namespace"])
api_st = st.sampled_from(("v1", "apps/v1", "karpenter.sh/v1", "helm.sh/v3"))


@given(st.dictionaries(st.tuples(kind_st, api_st), st.integers(1, 50), max_size=8))
def test_what_force_drops_is_one_line_per_kind_leaves_first_and_the_summary_counts_all(
    counts: dict[tuple[str, str], int],
) -> None:
    lines = drop_lines(Counter(counts))
    assert len(lines) == len(counts)
    for (kind, api), n in counts.items():
        assert sum(line.startswith(f"drops {n} {kind} ({api}) from state: ") for line in lines) == 1
    order = list(LEAVES)
    ranks = [order.index(k) if k in order else len(order) for k in (line.split()[2] for line in lines)]
    assert ranks == sorted(ranks)
    summary = drop_summary(Counter(counts))
    total = sum(int(part.split()[0]) for part in summary.split(", ")) if summary else 0
    assert total == sum(counts.values())


@given(
    st.booleans(),
    st.sampled_from((*UNREACHABLE_WORDS, "quota exceeded", "")),
    st.sampled_from(("", "Error: ", "x\n")),
)
def test_a_failed_destroy_is_the_refusal_only_when_unreachable_and_nothing_is_dropped(
    drops: bool, words: str, prefix: str
) -> None:
    plan = Teardown(
        env={DELETE_UNREACHABLE: "true"} if drops else {}, cluster=CLUSTER, region=REGION, stack="ci"
    )
    error = EngineError(f"{prefix}delete failed: {words.upper()} at 10.0.0.1", None)
    try:
        with plan.guard():
            raise error
    except PrerequisiteError as refusal:
        assert not drops and words in UNREACHABLE_WORDS
        assert refusal.message.endswith("nothing was dropped from state") and refusal.__cause__ is error
    except EngineError as raised:
        assert raised is error and (drops or words not in UNREACHABLE_WORDS)
