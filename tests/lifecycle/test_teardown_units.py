"""When `down` and `stacks gc` may drop Kubernetes objects from state, called directly (seconds):
every branch of `teardown.decide` (asked with --force, no platform, cluster gone, AWS cannot say,
EKS deleting, no kubeconfig, kubectl missing, API unreachable, API answering), the refusal's
words and the lines that say what --force drops.

The boundaries are doubles: EKS answers through botocore's Stubber on a real client (the exact
replies and error codes of eks:DescribeCluster), kubectl through a recorded stand-in of
`kubectl_json`, the saved state through saved_backend.py."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from saved_backend import SavedBackend

from llmctl.errors import EngineError, LlmctlError, PrerequisiteError, ServingError
from llmctl.infra.lifecycle import teardown
from llmctl.infra.lifecycle.engine import StackSpec
from llmctl.infra.lifecycle.kube import kubeconfig_path
from llmctl.infra.lifecycle.teardown import (
    DELETE_UNREACHABLE,
    ClusterState,
    Teardown,
    decide,
    describe_cluster,
    drop_lines,
    drop_summary,
    first_line,
    is_unreachable,
    kind_counts,
    kubeconfig_for,
    refusal,
)

CLUSTER = "llmctl-ci"
REGION = "eu-west-1"
KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\n"
SPECS = [StackSpec("llmctl-platform", "ci"), StackSpec("llmctl-tiny-cpu", "ci.pr-1")]
UNREACHABLE = "Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout"


class Eks:
    """A session whose EKS client answers from botocore's Stubber; records the regions asked."""

    def __init__(self) -> None:
        self.client_ = boto3.client(
            "eks", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
        )
        self.stub = Stubber(self.client_)
        self.stub.activate()
        self.regions: list[str | None] = []

    def client(self, service: str, region_name: str | None = None) -> Any:
        assert service == "eks"
        self.regions.append(region_name)
        return self.client_

    def found(self, status: str) -> Eks:
        self.stub.add_response(
            "describe_cluster", {"cluster": {"name": CLUSTER, "status": status}}, {"name": CLUSTER}
        )
        return self

    def error(self, code: str, message: str = "nope") -> Eks:
        self.stub.add_client_error("describe_cluster", service_error_code=code, service_message=message)
        return self


def saved(kinds: list[str]) -> SavedBackend:
    """The platform's state holding these resource types (and a non-Kubernetes one)."""
    backend = SavedBackend()
    backend.add("llmctl-platform", "ci", state=[{"type": t} for t in kinds])
    backend.add("llmctl-tiny-cpu", "ci.pr-1", state=[{"type": "kubernetes:core/v1:Service"}])
    return backend


STATE = [
    "kubernetes:karpenter.sh/v1:NodePool",
    "kubernetes:karpenter.sh/v1:NodePool",
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
    "kubernetes:helm.sh/v3:Release",
    "eks:index:Cluster",
    "aws:ec2/vpc:Vpc",
    "kubernetes:extra:colons:here",
    "",
]


@pytest.fixture
def kubectl(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """kubectl as `decide` calls it: each call recorded; the first item of the list is what it does
    (None: answers; an exception: raised)."""
    calls: list[Any] = [None]

    def run(kubeconfig: Path, *args: str, timeout: float = 30) -> Any:
        calls.append((kubeconfig, args, timeout))
        if isinstance(calls[0], Exception):
            raise calls[0]
        return {"items": []}

    monkeypatch.setattr(teardown, "kubectl_json", run)
    return calls


def run_decide(
    backend: SavedBackend, eks: Eks | None, *, outputs: dict[str, Any] | None, **kw: Any
) -> Teardown:
    kw.setdefault("region", REGION)
    return decide(backend, SPECS, stack="ci", outputs=outputs, cluster=CLUSTER, session=eks, **kw)


# ---- small pieces -----------------------------------------------------------------------------------
def test_first_line_is_the_last_non_empty_line_cut_to_the_limit() -> None:
    assert first_line("  \nerror: one\n  two  \n\n") == "two"
    assert first_line("a\nb\nc") == "c"
    assert first_line("") == "" and first_line("   ") == "   "
    assert first_line("x" * 200) == "x" * 160
    assert first_line("abcdef", limit=3) == "abc"


@pytest.mark.parametrize(
    ("text", "unreachable"),
    [
        ("configured Kubernetes cluster is unreachable: token expired", True),
        ("Unable to connect to the server: EOF", True),
        ("failed: UNREACHABLE CLUSTER", True),
        ("the server is unreachable", False),
        ("resource busy", False),
    ],
)
def test_is_unreachable_reads_the_words_of_the_provider_and_kubectl(text: str, unreachable: bool) -> None:
    assert is_unreachable(LlmctlError(text)) is unreachable


def test_refusal_names_the_fixes_and_what_force_drops() -> None:
    dev = refusal("c1", "us-east-1", "dev", "why", "2 NodePool")
    assert isinstance(dev, PrerequisiteError)
    assert dev.message == "cluster c1 cannot be torn down safely: why; nothing was changed"
    assert dev.hint is not None
    assert "`aws eks update-kubeconfig --name c1 --region us-east-1`" in dev.hint
    assert "run `llmctl down` again; or `llmctl down --force` drops 2 NodePool from state" in dev.hint
    ci = refusal("c1", "us-east-1", "ci", "why", started=True)
    assert ci.message == "cluster c1 cannot be torn down safely: why; nothing was dropped from state"
    assert ci.hint is not None
    assert (
        "`llmctl down --stack ci` again; or `llmctl down --stack ci --force` drops the Kubernetes objects in state"
        in ci.hint
    )


def test_kind_counts_count_only_kubernetes_resources_by_kind_and_api() -> None:
    counts = kind_counts(saved(STATE), SPECS)
    assert counts == Counter(
        {
            ("NodePool", "karpenter.sh/v1"): 2,
            ("EC2NodeClass", "karpenter.k8s.aws/v1"): 1,
            ("Release", "helm.sh/v3"): 1,
            ("Service", "core/v1"): 1,
        }
    )


def test_drop_lines_follow_the_leaves_order_then_the_rest_by_name() -> None:
    counts = Counter(
        {
            ("Deployment", "apps/v1"): 1,
            ("Service", "core/v1"): 2,
            ("NodePool", "karpenter.sh/v1"): 3,
            ("ConfigMap", "core/v1"): 4,
            ("Release", "helm.sh/v3"): 1,
        }
    )
    lines = drop_lines(counts)
    assert [line.split(" (")[0] for line in lines] == [
        "drops 3 NodePool",
        "drops 2 Service",
        "drops 1 Release",
        "drops 4 ConfigMap",
        "drops 1 Deployment",
    ]
    assert lines[0] == f"drops 3 NodePool (karpenter.sh/v1) from state: {teardown.LEAVES['NodePool']}"
    assert lines[3] == "drops 4 ConfigMap (core/v1) from state: stays in the cluster while it exists"
    assert drop_lines(Counter()) == []


def test_drop_summary_adds_up_each_kind_most_first() -> None:
    counts = Counter(
        {("Service", "core/v1"): 1, ("NodePool", "karpenter.sh/v1"): 2, ("NodePool", "v1beta1"): 2}
    )
    assert drop_summary(counts) == "4 NodePool, 1 Service"
    assert drop_summary(Counter()) == ""


def test_teardown_drops_only_when_delete_unreachable_is_true() -> None:
    assert not Teardown().drops
    assert not Teardown(env={DELETE_UNREACHABLE: "false"}).drops
    assert Teardown(env={DELETE_UNREACHABLE: "true"}).drops


def test_the_guard_turns_an_unreachable_destroy_into_the_refusal_unless_dropping() -> None:
    plan = Teardown(cluster=CLUSTER, region=REGION, stack="ci")
    with pytest.raises(PrerequisiteError) as info, plan.guard():
        raise EngineError("destroy failed\nconfigured Kubernetes cluster is unreachable: x\n")
    assert info.value.message == (
        f"cluster {CLUSTER} cannot be torn down safely: a destroy found its Kubernetes API unreachable "
        "(configured Kubernetes cluster is unreachable: x); nothing was dropped from state"
    )
    with pytest.raises(EngineError, match="quota"), plan.guard():
        raise EngineError("quota exceeded")  # any other failure passes through
    dropping = Teardown(env={DELETE_UNREACHABLE: "true"})
    with pytest.raises(EngineError, match="unreachable"), dropping.guard():
        raise EngineError("cluster is unreachable")
    with plan.guard():
        pass


# ---- AWS and the kubeconfig -------------------------------------------------------------------------
def test_describe_cluster_reads_gone_status_and_errors() -> None:
    assert describe_cluster(
        CLUSTER, REGION, session=Eks().error("ResourceNotFoundException")
    ) == ClusterState(gone=True)
    assert describe_cluster(CLUSTER, REGION, session=Eks().found("ACTIVE")) == ClusterState(status="ACTIVE")
    denied = describe_cluster(CLUSTER, REGION, session=Eks().error("AccessDeniedException", "not allowed"))
    assert denied == ClusterState(error="eks:DescribeCluster failed (AccessDeniedException: not allowed)")


def test_the_clusters_state_cannot_change_after_it_was_read() -> None:
    state = ClusterState(status="ACTIVE")
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.gone = True  # type: ignore[misc]


def test_describe_cluster_that_cannot_reach_aws_says_why() -> None:
    class Offline:
        def client(self, service: str, region_name: str | None = None) -> Any:
            return boto3.client(
                service,
                region_name=region_name,
                endpoint_url="http://127.0.0.1:9",
                aws_access_key_id="x",
                aws_secret_access_key="x",
                config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=2),
            )

    state = describe_cluster(CLUSTER, REGION, session=Offline())
    assert not state.gone and state.status == ""
    assert state.error.startswith("eks:DescribeCluster failed (EndpointConnectionError: ")


def test_kubeconfig_for_saves_the_output_text_or_json_else_reads_the_saved_one() -> None:
    assert kubeconfig_for("ci", None) is None
    assert kubeconfig_for("ci", {"kubeconfig": ""}) is None
    path = kubeconfig_for("ci", {"kubeconfig": KUBECONFIG})
    assert path == kubeconfig_path("ci") and path.read_text() == KUBECONFIG
    assert kubeconfig_for("ci", {}) == path  # the one saved before
    data = {"apiVersion": "v1", "kind": "Config"}
    assert kubeconfig_for("ci", {"kubeconfig": data}) == path
    assert json.loads(path.read_text()) == data


# ---- the decision -----------------------------------------------------------------------------------
def test_force_drops_without_asking_aws_and_says_what_it_drops(kubectl: list[Any]) -> None:
    eks = Eks()  # no reply queued: any AWS call would fail the test
    plan = run_decide(saved(STATE), eks, outputs={"kubeconfig": KUBECONFIG}, force=True)
    assert plan.env == {DELETE_UNREACHABLE: "true"} and plan.drops
    assert plan.kubeconfig == kubeconfig_path("ci")
    assert plan.confirm_lines[0] == (
        f"--force: destroys run with {DELETE_UNREACHABLE}=true; if cluster {CLUSTER} cannot be reached:"
    )
    assert [line.split(" (")[0] for line in plan.confirm_lines[1:]] == [
        "  drops 2 NodePool",
        "  drops 1 EC2NodeClass",
        "  drops 1 Service",
        "  drops 1 Release",
    ]
    assert plan.notes[0].startswith(f"--force: {DELETE_UNREACHABLE}=true (asked for)")
    assert plan.notes[1:] == [line.strip() for line in plan.confirm_lines[1:]]
    assert eks.regions == [] and kubectl == [None]
    assert (plan.cluster, plan.region, plan.stack) == (CLUSTER, REGION, "ci")


def test_force_without_a_platform_or_objects_says_it_drops_nothing() -> None:
    plan = run_decide(SavedBackend(), Eks(), outputs=None, force=True)
    assert plan.drops and plan.kubeconfig is None
    assert plan.confirm_lines[1:] == ["  no Kubernetes objects in state: --force drops nothing"]
    assert plan.notes[1:] == ["no Kubernetes objects in state: --force drops nothing"]


def test_without_a_platform_or_stacks_nothing_is_asked_or_dropped(kubectl: list[Any]) -> None:
    eks = Eks()
    for outputs, specs in [(None, SPECS), ({"kubeconfig": KUBECONFIG}, [])]:
        plan = decide(
            saved(STATE), specs, stack="ci", outputs=outputs, cluster=CLUSTER, region=REGION, session=eks
        )
        assert plan == Teardown(cluster=CLUSTER, region=REGION, stack="ci")
    assert eks.regions == [] and kubectl == [None]


def test_a_cluster_eks_no_longer_finds_is_dropped_from_state(kubectl: list[Any]) -> None:
    eks = Eks().error("ResourceNotFoundException")
    plan = run_decide(saved(STATE), eks, outputs={"kubeconfig": KUBECONFIG})
    assert plan.env == {DELETE_UNREACHABLE: "true"}
    assert plan.notes == [
        f"cluster {CLUSTER} is gone (eks:DescribeCluster in {REGION}: ResourceNotFoundException): "
        f"Kubernetes objects still in state are dropped from it ({DELETE_UNREACHABLE}=true)"
    ]
    assert plan.kubeconfig is None and eks.regions == [REGION] and kubectl == [None]


def test_when_aws_cannot_say_down_refuses_naming_what_force_would_drop(kubectl: list[Any]) -> None:
    with pytest.raises(PrerequisiteError) as info:
        run_decide(saved(STATE), Eks().error("ExpiredTokenException", "expired"), outputs={})
    assert info.value.message == (
        f"cluster {CLUSTER} cannot be torn down safely: AWS cannot say whether it still exists: "
        "eks:DescribeCluster failed (ExpiredTokenException: expired); nothing was changed"
    )
    assert (
        info.value.hint
        and "--force` drops 2 NodePool, 1 EC2NodeClass, 1 Release, 1 Service from state" in info.value.hint
    )
    assert kubectl == [None]


def test_a_cluster_eks_is_deleting_is_refused(kubectl: list[Any]) -> None:
    with pytest.raises(PrerequisiteError) as info:
        run_decide(saved([]), Eks().found("DELETING"), outputs={"kubeconfig": KUBECONFIG})
    assert (
        "EKS is deleting it (wait until `aws eks describe-cluster` no longer finds it)" in info.value.message
    )
    assert info.value.hint and "--force` drops 1 Service from state" in info.value.hint
    assert kubectl == [None]


def test_a_live_cluster_without_a_kubeconfig_is_destroyed_without_dropping(kubectl: list[Any]) -> None:
    plan = run_decide(saved(STATE), Eks().found("ACTIVE"), outputs={"cluster_name": CLUSTER})
    assert plan.env == {} and plan.kubeconfig is None
    assert plan.notes == [
        f"no kubeconfig for cluster {CLUSTER} to check its Kubernetes API: the destroys run "
        "without dropping anything from state"
    ]
    assert kubectl == [None]


def test_a_live_cluster_whose_api_answers_is_destroyed_without_dropping_or_notes(kubectl: list[Any]) -> None:
    plan = run_decide(saved(STATE), Eks().found("ACTIVE"), outputs={"kubeconfig": KUBECONFIG})
    assert plan.env == {} and plan.notes == [] and plan.confirm_lines == []
    assert plan.kubeconfig == kubeconfig_path("ci")
    assert kubectl[1:] == [(kubeconfig_path("ci"), ("get", "namespaces"), 60)]


def test_a_live_cluster_whose_api_is_unreachable_is_refused(kubectl: list[Any]) -> None:
    kubectl[0] = ServingError(f"`kubectl get namespaces -o json` failed: {UNREACHABLE}", None)
    with pytest.raises(PrerequisiteError) as info:
        run_decide(saved(STATE), Eks().found("UPDATING"), outputs={"kubeconfig": KUBECONFIG})
    assert info.value.message == (
        f"cluster {CLUSTER} cannot be torn down safely: it exists (UPDATING) but its Kubernetes API is "
        f"unreachable ({UNREACHABLE}); nothing was changed"
    )
    assert (
        info.value.hint
        and "--force` drops 2 NodePool, 1 EC2NodeClass, 1 Release, 1 Service from state" in info.value.hint
    )


def test_without_kubectl_the_api_is_not_checked_and_nothing_dropped(kubectl: list[Any]) -> None:
    kubectl[0] = PrerequisiteError("kubectl is not installed", "install it")
    plan = run_decide(saved(STATE), Eks().found("ACTIVE"), outputs={"kubeconfig": KUBECONFIG})
    assert plan.env == {}
    assert plan.notes == [
        f"kubectl is not installed: the Kubernetes API of {CLUSTER} was not checked; the destroys run "
        "without dropping anything from state"
    ]


def test_a_platform_that_recorded_no_region_is_asked_in_the_aws_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    eks = Eks().error("ResourceNotFoundException")
    plan = run_decide(saved([]), eks, outputs={}, region=None)
    assert plan.region == "ap-south-1" and eks.regions == ["ap-south-1"]
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    eks = Eks().error("ResourceNotFoundException")
    assert run_decide(saved([]), eks, outputs={}, region=None).region == "us-west-2"
    assert eks.regions == ["us-west-2"]
