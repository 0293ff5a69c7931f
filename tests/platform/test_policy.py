"""Policy rules: the real graph passes; deliberately broken graphs and configs fail with the
rule and a message naming the fix."""

from __future__ import annotations

import contextlib
import copy
import json
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.protobuf import empty_pb2
from platform_support import Graph, graph_for

from llmctl.infra.plan.offline import Registered
from llmctl.infra.plan.policy import Violation, check_policy, crossguard_pack, errors
from llmctl.infra.plan.run import offline_plan
from llmctl.infra.platform.config import PlatformConfig

Mutation = Callable[[list[Registered]], None]


def _one(resources: list[Registered], name: str) -> Registered:
    return next(r for r in resources if r.name == name)


def _set(name: str, key: str, value: object) -> Mutation:
    def mutate(resources: list[Registered]) -> None:
        _one(resources, name).inputs[key] = value

    return mutate


def _drop(name: str) -> Mutation:
    def mutate(resources: list[Registered]) -> None:
        resources.remove(_one(resources, name))

    return mutate


def _nodepool_taints(resources: list[Registered]) -> None:
    _one(resources, "nodepools-gpu-nvidia-nodepool").inputs["spec"]["template"]["spec"]["taints"] = []


def _nodeclass(field: str, value: object) -> Mutation:
    def mutate(resources: list[Registered]) -> None:
        spec = _one(resources, "nodepools-inferentia-inf2-nodeclass").inputs["spec"]
        if field == "alias":
            spec["amiSelectorTerms"] = [{"alias": value}]
        else:
            spec["metadataOptions"]["httpTokens"] = value

    return mutate


def _open_sg(resources: list[Registered]) -> None:
    resources.append(
        Registered(
            urn="urn:pulumi:t::p::aws:ec2/securityGroup:SecurityGroup::wide-open",
            type="aws:ec2/securityGroup:SecurityGroup",
            name="wide-open",
            parent=None,
            inputs={
                "ingress": [{"cidrBlocks": ["0.0.0.0/0"], "fromPort": 22}],
                "tags": {"llmctl:stack": "dev", "llmctl:cluster": "c"},
            },
        )
    )


def _untag(resources: list[Registered]) -> None:
    _one(resources, "network-vpc").inputs["tags"] = {"Name": "x"}


CASES: list[tuple[str, Mutation, str, str]] = [
    ("imdsv2", _set("cluster-core-lt", "metadataOptions", {"httpTokens": "optional"}), "cluster-core-lt", "httpTokens=required"),
    ("imdsv2", _nodeclass("httpTokens", "optional"), "nodepools-inferentia-inf2-nodeclass", "IMDSv2"),
    ("imdsv2", _set("cluster-core", "launchTemplate", None), "cluster-core", "launch template"),
    ("kms-secrets", _set("cluster-eks", "encryptionConfigKeyArn", None), "cluster-eks", "encryption_config_key_arn"),
    ("s3-public-access", _drop("cache-public-access-block"), "cache-bucket", "BucketPublicAccessBlock"),
    ("s3-public-access", _set("cache-public-access-block", "restrictPublicBuckets", False), "cache-public-access-block", "restrictPublicBuckets"),
    ("s3-encryption", _drop("cache-encryption"), "cache-bucket", "default encryption"),
    ("open-security-group", _open_sg, "wide-open", "llmctl:public-lb"),
    ("tags", _untag, "network-vpc", "llmctl:stack, llmctl:cluster"),
    ("pinned-versions", _set("karpenter-release", "version", "latest"), "karpenter-release", "not pinned"),
    ("pinned-versions", _set("karpenter-release", "version", "^1.0"), "karpenter-release", "not pinned"),
    ("pinned-versions", _nodeclass("alias", "al2023@latest"), "nodepools-inferentia-inf2-nodeclass", "drifts"),
    ("pinned-versions", _set("cluster-eks", "version", None), "cluster-eks", "EKS picks"),
    ("accelerator-taint", _nodepool_taints, "nodepools-gpu-nvidia-nodepool", "nvidia.com/gpu:NoSchedule"),
]  # fmt: skip


def test_real_graph_passes(all_pools_graph: Graph) -> None:
    violations = check_policy(all_pools_graph.resources)
    assert errors(violations) == []
    assert violations == []  # the API endpoint is private by default


def test_an_api_endpoint_open_to_the_internet_warns() -> None:
    config = PlatformConfig.for_blueprints([], endpoint={"public": True, "public_cidrs": ["0.0.0.0/0"]})
    assert [v.rule for v in check_policy(graph_for(config))] == ["open-endpoint"]


@pytest.mark.parametrize(
    ("rule", "mutate", "resource", "fragment"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_broken_graph_fails(
    all_pools_graph: Graph, rule: str, mutate: Mutation, resource: str, fragment: str
) -> None:
    resources = copy.deepcopy(all_pools_graph.resources)
    mutate(resources)
    found = [v for v in errors(check_policy(resources)) if v.rule == rule]
    assert found, f"{rule} not reported"
    assert any(v.resource == resource and fragment in v.message for v in found), found


def test_broken_config_fails_offline_plan(latest_versions: None) -> None:
    result = offline_plan(["llama2-inf2"])
    assert not result.ok
    messages = [(v.rule, v.resource, v.message) for v in errors(result.violations)]
    assert ("pinned-versions", "karpenter-release") in [(r, n) for r, n, _ in messages]
    assert any("al2023@latest drifts" in m for _, _, m in messages)


def test_violation_json_shape() -> None:
    v = Violation(rule="tags", resource="r", urn="u", message="m")
    assert v.to_dict() == {"rule": "tags", "resource": "r", "urn": "u", "message": "m", "severity": "error"}


def test_crossguard_pack_needs_pulumi_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.errors import PrerequisiteError

    monkeypatch.setitem(sys.modules, "pulumi_policy", None)  # as if not installed
    with pytest.raises(PrerequisiteError, match="pulumi_policy") as info:
        crossguard_pack()
    assert info.value.hint is not None and "pip install pulumi-policy" in info.value.hint


@contextlib.contextmanager
def _served_pack(name: str, enforcement: str) -> Iterator[Any]:
    """The pack served by the real `pulumi_policy` in its own process, as the pulumi CLI runs a
    policy pack: it prints its port, then answers the Analyzer gRPC protocol. Yields the stub."""
    import grpc
    from pulumi.runtime.proto import analyzer_pb2_grpc

    code = f"from llmctl.infra.plan.policy import crossguard_pack; crossguard_pack(name={name!r}, enforcement={enforcement!r})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        # generous: the child imports pulumi and the policy module on a possibly busy machine
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "the policy pack did not print its port within 120 s"
        line = proc.stdout.readline().decode().strip()
        assert line.isdigit(), (line, proc.stderr.read().decode() if proc.poll() is not None else "")
        with grpc.insecure_channel(f"127.0.0.1:{line}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _analyzer_resource(res: Registered) -> Any:
    from google.protobuf import json_format, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2

    properties = struct_pb2.Struct()
    json_format.ParseDict(json.loads(json.dumps(res.inputs, default=str)), properties)
    return analyzer_pb2.AnalyzerResource(
        type=res.type,
        properties=properties,
        urn=res.urn,
        name=res.name,
        parent=res.parent or "",
        dependencies=list(res.dependencies),
    )


def test_crossguard_pack_reports_the_same_violations_over_the_analyzer_protocol(
    all_pools_graph: Graph,
) -> None:
    from pulumi.runtime.proto import analyzer_pb2

    with _served_pack("mine", "advisory") as analyzer:
        info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=60)
        assert info.name == "mine"
        (policy,) = info.policies
        assert policy.name == "llmctl-platform-rules"
        assert policy.enforcementLevel == analyzer_pb2.ADVISORY

        def run(resources: list[Registered]) -> list[tuple[str, str]]:
            request = analyzer_pb2.AnalyzeStackRequest(resources=[_analyzer_resource(r) for r in resources])
            reply = analyzer.AnalyzeStack(request, timeout=120)
            assert {d.policyPackName for d in reply.diagnostics} <= {"mine"}
            return [(d.message, d.urn) for d in reply.diagnostics]

        assert run(all_pools_graph.resources) == []  # warnings (open-endpoint) are not violations
        broken = copy.deepcopy(all_pools_graph.resources)
        _set("karpenter-release", "version", "latest")(broken)
        reported = run(broken)
        release = _one(broken, "karpenter-release")
        assert any(
            # the engine's diagnostic message is the policy's description, a newline, then ours
            message.split("\n")[-1].startswith("[pinned-versions] karpenter-release:") and urn == release.urn
            for message, urn in reported
        ), reported
