from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmctl import __version__
from llmctl.cli.app import app
from llmctl.infra.plan.run import offline_plan

runner = CliRunner()
CATALOG = Path(__file__).parents[2] / "blueprints" / "catalog"


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


def test_plan_without_a_deployed_stack_is_the_offline_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without `--offline`, `plan` looks for the blueprint's deployed workload stack (issue 51); with
    none in the local backend it reads nothing else (no pulumi CLI) and the plan is the offline one."""
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi: it would fail if the plan called it
    plain = runner.invoke(app, ["plan", "-b", "tiny-cpu", "--json"])
    assert plain.exit_code == 0, plain.output
    flagged = runner.invoke(app, ["plan", "--offline", "-b", "tiny-cpu", "--json"])
    assert flagged.exit_code == 0 and json.loads(flagged.stdout) == json.loads(plain.stdout)
    assert json.loads(plain.stdout)["rollouts"] == [] and json.loads(plain.stdout)["rollout_notes"] == []


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


def test_plan_names_the_workload_stack_and_namespace_up_would_deploy() -> None:
    """`--workload pr-42`: the workload stack `<env>.pr-42` in namespace `<blueprint>-pr-42`, as
    `llmctl up --stack ci --workload pr-42` deploys it; the platform stack stays `ci`."""
    args = ["plan", "-b", "tiny-cpu", "--offline", "--json", "--stack", "ci", "--workload", "pr-42"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"] == "pr-42" and data["stack"] == "ci"
    assert [(s["id"], s.get("namespace")) for s in data["stacks"]] == [
        ("llmctl-platform/ci", None),
        ("llmctl-tiny-cpu/ci.pr-42", "tiny-cpu-pr-42"),
    ]
    workload = data["stacks"][1]["resources"]
    assert {r["urn"].split("::")[0] for r in workload} == {"urn:pulumi:ci.pr-42"}
    namespaces = {r["inputs"]["metadata"].get("namespace") for r in workload if "metadata" in r["inputs"]}
    assert namespaces == {None, "tiny-cpu-pr-42"}  # the Namespace itself, then objects in it
    text = runner.invoke(app, [a for a in args if a != "--json"])
    assert "workload llmctl-tiny-cpu/ci.pr-42 (namespace tiny-cpu-pr-42)" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stack", "ci.pr-1"], "--stack 'ci.pr-1' names a workload stack, not an environment"),
        (["--workload", "PR_1"], "invalid workload name 'PR_1'"),
    ],
)
def test_plan_bad_workload_names_are_one_line_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["plan", "-b", "tiny-cpu", "--offline", *args])
    # exit 2 (bad input), never 1: CI reads 1 as "policy failed, the JSON was written"
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.output


def test_a_blueprint_the_base_revision_lacks_plans_as_a_new_workload_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull request adds `new.yaml`: on the base revision `--skip-missing` plans the environment
    without it (here the platform alone), and the diff names it and shows its stack as new."""
    head, base = tmp_path / "head", tmp_path / "base"
    head.mkdir()
    base.mkdir()
    text = (CATALOG / "tiny-cpu.yaml").read_text(encoding="utf-8")
    (head / "new.yaml").write_text(text.replace("name: tiny-cpu", "name: tiny-new", 1), encoding="utf-8")
    args = ["plan", "--offline", "--json", "--stack", "ci", "--workload", "pr-7", "-b", "new.yaml"]
    plans = {}
    for revision in (base, head):
        monkeypatch.chdir(revision)
        if revision == base:  # without the flag the base revision cannot be planned
            without = runner.invoke(app, args)
            assert without.exit_code == 2 and "blueprint file new.yaml does not exist" in without.stderr
        result = runner.invoke(app, [*args, "--skip-missing"])
        assert result.exit_code == 0, result.output
        (revision / "plan.json").write_text(result.stdout, encoding="utf-8")
        plans[revision.name] = json.loads(result.stdout)
    assert plans["base"]["missing_blueprints"] == ["new.yaml"] and plans["head"]["missing_blueprints"] == []
    assert [s["id"] for s in plans["base"]["stacks"]] == ["llmctl-platform/ci"]
    assert plans["base"]["pools"] == ["core", "default", "ray-head"]
    old, new = str(base / "plan.json"), str(head / "plan.json")
    diff = runner.invoke(app, ["plan", "diff", old, new])
    assert diff.exit_code == 1
    assert diff.stdout.splitlines()[:3] == [
        # four before issue 45, plus the namespace's five NetworkPolicies and the Ray head's own
        # service account, plus issue 53's admission policy and its binding
        "plan diff: 12 added, 0 removed, 0 changed",
        "not in the old revision: new.yaml (its workload stack shows as new)",
        "llmctl-tiny-new/ci.pr-7 (new stack)",
    ]
    markdown = runner.invoke(app, ["plan", "diff", old, new, "--format", "markdown"]).stdout
    assert "> not in the old revision: new.yaml (its workload stack shows as new)" in markdown
    as_json = json.loads(runner.invoke(app, ["plan", "diff", old, new, "--format", "json"]).stdout)
    assert as_json["missing_blueprints"] == {"old": ["new.yaml"], "new": []}
    assert as_json["stacks_added"] == ["llmctl-tiny-new/ci.pr-7"]


def test_skip_missing_still_fails_on_a_broken_blueprint(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [", encoding="utf-8")
    result = runner.invoke(app, ["plan", "--offline", "-b", str(broken), "--skip-missing"])
    assert result.exit_code == 2 and "Traceback" not in result.output


@pytest.mark.parametrize("names", [["tiny-cpu"], ["llama2-70b-vllm-gpu", "llama2-inf2"]])
def test_the_plans_platform_is_the_one_up_builds_for_those_workloads(names: list[str]) -> None:
    """The offline plan and `up` (the union of the environment's workload records) give the same
    platform config, so a plan diff shows what `up` would change."""
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.lifecycle.environment import WorkloadRecord, union
    from llmctl.infra.platform.config import validate_config

    planned = offline_plan(names, stack="ci", workload="pr-1").config
    pools, types = union(WorkloadRecord.for_blueprint(load_blueprint(n), "pr-1") for n in names)
    built = validate_config(
        {"stack": "ci", "region": "us-west-2", "pools": pools, "instance_types": types}, source="test"
    )
    assert planned.to_pulumi_config() == built.to_pulumi_config()


def test_a_pr_comment_names_the_prs_workload_stack_and_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flow of the example workflow: base and head planned with `--workload pr-42`; the diff of
    a replicas change names `llmctl-tiny-cpu/ci.pr-42` and the object in namespace tiny-cpu-pr-42."""
    text = (CATALOG / "tiny-cpu.yaml").read_text(encoding="utf-8")
    files = {}
    for side, replicas in (("base", "1"), ("head", "2")):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "bp.yaml").write_text(
            text.replace("  replicas: 1\n", f"  replicas: {replicas}\n", 1), encoding="utf-8"
        )
        monkeypatch.chdir(folder)
        args = ["plan", "--offline", "--json", "--stack", "ci", "--workload", "pr-42", "-b", "bp.yaml"]
        result = runner.invoke(app, args + (["--skip-missing"] if side == "base" else []))
        assert result.exit_code == 0, result.output
        files[side] = folder / "plan.json"
        files[side].write_text(result.stdout, encoding="utf-8")
    diff = runner.invoke(app, ["plan", "diff", str(files["base"]), str(files["head"])])
    assert diff.exit_code == 1
    assert diff.stdout.splitlines()[:3] == [
        "plan diff: 0 added, 0 removed, 1 changed",
        "llmctl-tiny-cpu/ci.pr-42",
        "  ~ kubernetes:ray.io/v1:RayService tiny-cpu-pr-42/tiny-cpu",
    ]
    assert "      spec.rayClusterConfig.workerGroupSpecs[0].replicas: 1 -> 2" in diff.stdout
