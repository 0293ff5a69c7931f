from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from llmctl import __version__
from llmctl.cli.app import app
from llmctl.infra.plan import offline_plan

runner = CliRunner()


def test_offline_plan_json() -> None:
    result = runner.invoke(app, ["plan", "--blueprint", "tiny-cpu", "--offline", "--json", "--stack", "ci"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["cluster_name"] == "llmctl-ci"
    assert data["pools"] == ["core", "default", "ray-head"]
    assert data["format"] == "llmctl-plan" and data["format_version"] == 1
    assert data["llmctl_version"] == __version__
    assert [s["id"] for s in data["stacks"]] == ["llmctl-platform/ci", "llmctl-tiny-cpu/ci"]
    platform = data["stacks"][0]["resources"]
    provider = next(r for r in platform if r["type"] == "pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    node_group = next(r for r in platform if r["type"] == "aws:eks/nodeGroup:NodeGroup")
    assert node_group["parent"] == "cluster"
    assert node_group["inputs"]["launchTemplate"]["version"] == "<unknown>"  # computed at create time
    nodepool = next(r for r in platform if r["type"] == "kubernetes:karpenter.sh/v1:NodePool")
    assert "karpenter-release" in nodepool["depends_on"]
    assert [r["urn"] for r in platform] == sorted(r["urn"] for r in platform)
    assert data["resource_count"] == sum(s["resource_count"] for s in data["stacks"])


def test_offline_plan_tree() -> None:
    result = runner.invoke(app, ["plan", "-b", "llama2-inf2", "--offline"])
    assert result.exit_code == 0, result.output
    assert "llmctl:platform:Karpenter karpenter" in result.stdout
    assert "inferentia-inf2" in result.stdout
    assert "policy: passed" in result.stdout


def test_plan_without_offline_points_to_preview() -> None:
    result = runner.invoke(app, ["plan", "-b", "tiny-cpu"])
    assert result.exit_code == 3
    assert "--offline" in result.stderr and "llmctl preview" in result.stderr


def test_plan_needs_a_blueprint() -> None:
    result = runner.invoke(app, ["plan", "--offline"])
    assert result.exit_code == 2
    assert "no blueprint given" in result.stderr


def test_unknown_blueprint() -> None:
    result = runner.invoke(app, ["plan", "--offline", "-b", "llama2-inf3"])
    assert result.exit_code == 2 and "did you mean" in result.stderr


@pytest.mark.usefixtures("latest_versions")
def test_policy_failure_exits_non_zero_with_violations() -> None:
    result = runner.invoke(app, ["plan", "-b", "tiny-cpu", "--offline"])
    assert result.exit_code == 1
    assert "[pinned-versions] karpenter-release" in result.stdout
    assert "policy check failed" in result.stderr
    as_json = runner.invoke(app, ["plan", "-b", "tiny-cpu", "--offline", "--json"])
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["ok"] is False and any(v["rule"] == "pinned-versions" for v in data["violations"])


def test_all_pools_plan_and_region() -> None:
    result = offline_plan([], all_pools=True, region="us-east-1")
    assert result.ok
    zones = {r.inputs["availabilityZone"] for r in result.resources if r.type == "aws:ec2/subnet:Subnet"}
    # the mocks offer use1-az1..az4, none of the preferred use1-az6/az5: the first two are used
    assert zones == {"us-east-1a", "us-east-1b"}
