"""Environments shared by several workloads, through the stand-in engine: the platform is built
for every workload recorded in the environment, `down --blueprint` shrinks it, the AZs of the first
`up` are kept, and PR workloads share one `ci` platform that `stacks gc` never removes under them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from lifecycle_support import lifecycle, short
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.errors import LlmctlError, UserAbort
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.lifecycle.status import workload_rows
from llmctl.state import list_endpoints, load_endpoint


@pytest.fixture(autouse=True)
def hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama2-70b is gated: a (dummy) token, which only ends up in a Secret of the stand-in."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


A, B = "llama2-inf2", "llama2-70b-vllm-gpu"  # inferentia vs gpu pools
REGION = "us-west-2"
NEURON = {
    "kubernetes:helm.sh/v3:Release::neuron-release",
    "kubernetes:karpenter.sh/v1:NodePool::nodepools-inferentia-inf2-nodepool",
    "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::nodepools-inferentia-inf2-nodeclass",
    "llmctl:platform:Neuron::neuron",
}
GPU_POOL = "kubernetes:karpenter.sh/v1:NodePool::nodepools-gpu-nvidia-nodepool"


def platform(engine: StandinEngine, stack: str) -> dict[str, dict[str, Any]]:
    """The platform's saved resources by short name."""
    return {short(urn): res for urn, res in engine.resources(PLATFORM_PROJECT, stack).items()}


def settings(engine: StandinEngine, stack: str) -> dict[str, Any]:
    """The platform config `up` wrote to the stack (Pulumi.<stack>.yaml), minus the names."""
    import yaml

    from llmctl.state import state_dir

    path = state_dir() / "workspaces" / PLATFORM_PROJECT / f"Pulumi.{stack}.yaml"
    config = yaml.safe_load(path.read_text())["config"]
    return {k: v for k, v in config.items() if k not in ("llmctl:stack", "llmctl:cluster_name")}


def test_two_blueprints_share_the_platform_in_any_order_and_down_shrinks_it(engine: StandinEngine) -> None:
    lifecycle(stack="ab").up(A, region=REGION, wait=False)
    first = platform(engine, "ab")
    assert set(first) >= NEURON and GPU_POOL not in first
    seen: list[list[str]] = []
    lifecycle(stack="ab").up(
        B, region=REGION, wait=False, confirm=lambda plan: seen.append(plan.summary()) or True
    )
    both = platform(engine, "ab")
    # B's pool and chart came; A's pool, node class and Neuron chart stayed, with the same inputs
    assert GPU_POOL in both and "kubernetes:helm.sh/v3:Release::nvidia-release" in both
    assert all(both[name]["inputs"] == first[name]["inputs"] for name in NEURON)
    assert [run for run in engine.deletes() if run["project"] == PLATFORM_PROJECT] == []
    assert f"also serves {A}" in seen[0][-1] and "inferentia-inf2" in seen[0][-1]
    assert [p["name"] for p in engine.outputs(PLATFORM_PROJECT, "ab")["node_pools"]] == [
        "core",
        "default",
        "ray-head",
        "inferentia-inf2",
        "gpu-nvidia",
    ]
    # each workload recorded its blueprint and pools where any machine can read them back
    rows = workload_rows("ab", lifecycle().engine)
    assert [(r["blueprint"], r["workload"], r["pools"]) for r in rows] == [
        (B, None, ["core", "default", "ray-head", "gpu-nvidia"]),
        (A, None, ["core", "default", "ray-head", "inferentia-inf2"]),
    ]

    # the other order gives the same platform
    lifecycle(stack="ba").up(B, region=REGION, wait=False)
    lifecycle(stack="ba").up(A, region=REGION, wait=False)
    assert {n.replace("-ba", "-ab") for n in platform(engine, "ba")} == set(both)
    assert settings(engine, "ba") == settings(engine, "ab")

    # an unknown workload: one line naming those that are there, nothing changed
    before = engine.ops()
    with pytest.raises(LlmctlError) as info:
        lifecycle(stack="ab").down(region=REGION, blueprint="tiny-cpu", confirm=lambda items: True)
    assert info.value.message == f"no blueprint tiny-cpu in environment 'ab'; deployed there: {B}, {A}"
    assert engine.ops()[len(before) :] == []

    # down A: A's workload goes, then the platform loses A's pool, node class and chart, in order
    b_stack = engine.resources(f"llmctl-{B}", "ab")
    b_history = len(engine.history(f"llmctl-{B}", "ab"))
    listed: list[list[str]] = []
    result = lifecycle(stack="ab").down(
        region=REGION, blueprint=A, confirm=lambda items: listed.append(items) or True
    )
    assert result.destroyed == [f"llmctl-{A}/ab"] and result.updated == [f"{PLATFORM_PROJECT}/ab"]
    assert listed[0][-2:] == [
        f"platform stack {PLATFORM_PROJECT}/ab: updated to what the workloads left need "
        f"(pools core, default, ray-head, gpu-nvidia; {B} stays)",
        "  pool inferentia-inf2 removed (no workload left uses it)",
    ]
    assert result.platform_changes == ["pool inferentia-inf2 removed (no workload left uses it)"]
    [run_] = [r for r in engine.deletes() if r["project"] == PLATFORM_PROJECT]
    assert run_["kind"] == "update"
    assert [sorted(short(u) for u in wave) for wave in run_["waves"]] == [
        [
            "kubernetes:helm.sh/v3:Release::neuron-release",
            "kubernetes:karpenter.sh/v1:NodePool::nodepools-inferentia-inf2-nodepool",
        ],
        [
            "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::nodepools-inferentia-inf2-nodeclass",
            "llmctl:platform:Neuron::neuron",
        ],
    ]
    after = platform(engine, "ab")
    assert set(both) - set(after) == NEURON and GPU_POOL in after
    assert engine.resources(f"llmctl-{B}", "ab") == b_stack  # B untouched
    assert len(engine.history(f"llmctl-{B}", "ab")) == b_history
    assert engine.checkpoint(f"llmctl-{A}", "ab") is None


def test_azs_of_the_first_up_are_kept_and_change_only_with_reselect(engine: StandinEngine) -> None:
    from llmctl.infra.platform.network import Zone, choose_zones

    # p4de only in b, c, d; inf2 everywhere: alone, the union would move a subnet from az1 to az2
    gpu_zones = ["us-west-2b", "us-west-2c", "us-west-2d"]
    engine.control(offerings={"p4de.24xlarge": gpu_zones})
    zones = [Zone(f"us-west-2{x}", f"usw2-az{n}") for n, x in enumerate("abcd", start=1)]
    everywhere = {z.name for z in zones}
    fresh = choose_zones(
        zones, ["usw2-az4", "usw2-az1"], 2, {"inf2.48xlarge": everywhere, "p4de.24xlarge": set(gpu_zones)}
    )
    assert [z.id for z in fresh] == ["usw2-az2", "usw2-az4"]

    lifecycle().up(A, region=REGION, wait=False)
    assert engine.outputs(PLATFORM_PROJECT, "dev")["az_ids"] == ["usw2-az1", "usw2-az4"]
    subnets = {n for n in platform(engine, "dev") if n.startswith("aws:ec2/subnet:Subnet::")}
    lifecycle().up(B, region=REGION, wait=False)
    assert engine.outputs(PLATFORM_PROJECT, "dev")["az_ids"] == ["usw2-az1", "usw2-az4"]
    assert {n for n in platform(engine, "dev") if n.startswith("aws:ec2/subnet:Subnet::")} == subnets
    assert json.loads(settings(engine, "dev")["llmctl:pinned_az_ids"]) == ["usw2-az1", "usw2-az4"]

    # --reselect-azs says which subnets go and asks first; declined, nothing changes
    seen: list[list[str]] = []
    ups = len([op for op in engine.ops() if op[0] == "up"])
    with pytest.raises(UserAbort):
        lifecycle().up(
            B,
            region=REGION,
            wait=False,
            reselect_azs=True,
            confirm=lambda p: seen.append(p.summary()) and False,
        )
    note = seen[0][-1]
    assert note.startswith("--reselect-azs: the AZs are chosen again; subnets replaced: ")
    assert "network-nodes-usw2-az1" in note and "network-nodes-usw2-az2" in note and "az4" not in note
    assert len([op for op in engine.ops() if op[0] == "up"]) == ups
    # accepted: the new AZs are kept from then on
    lifecycle().up(B, region=REGION, wait=False, reselect_azs=True)
    assert engine.outputs(PLATFORM_PROJECT, "dev")["az_ids"] == ["usw2-az2", "usw2-az4"]
    lifecycle().up(A, region=REGION, wait=False)
    assert engine.outputs(PLATFORM_PROJECT, "dev")["az_ids"] == ["usw2-az2", "usw2-az4"]


def _age(engine: StandinEngine, project: str, stack: str, days: int) -> None:
    """Backdate a stack's last update, as if it ran `days` ago."""
    path = engine.backend / ".pulumi" / "history" / project / f"{stack}.json"
    entries = json.loads(path.read_text())
    stamp = (datetime.now(timezone.utc) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    entries[-1]["endTime"] = stamp
    path.write_text(json.dumps(entries))


def test_pr_workloads_share_the_ci_platform_and_gc_removes_only_the_expired_one(
    engine: StandinEngine, aws: str
) -> None:
    bp = "tiny-cpu"
    code, out, err = run(
        "up", "--blueprint", bp, "--stack", "ci", "--workload", "pr-1", "--yes", "--no-wait", "--json"
    )
    assert code == 0, err
    flag = f"--blueprint {bp} --stack ci --workload pr-1"
    assert json.loads(out)["next"] == [
        f"llmctl connect {flag}",
        f"llmctl chat {flag}",
        f"llmctl bench {flag}",
        "llmctl down --stack ci --workload pr-1",
    ]
    # the second names the workload and, with --yes too, who else the platform serves
    code, out, err = run("up", "--blueprint", bp, "--stack", "ci", "--workload", "pr-2", "--yes", "--no-wait")
    assert code == 0, err
    assert "ready: tiny-cpu on eks (stack ci, workload pr-2)" in out
    assert "  environment ci: also serves tiny-cpu (workload pr-1); pools core, default, ray-head" in out
    code, out, err = run("stacks", "list", "--json")
    assert code == 0, err
    assert sorted((r["project"], r["stack"], r["workload"]) for r in json.loads(out)) == [
        (PLATFORM_PROJECT, "ci", None),
        (f"llmctl-{bp}", "ci.pr-1", "pr-1"),
        (f"llmctl-{bp}", "ci.pr-2", "pr-2"),
    ]
    # one platform, a namespace and an endpoint per workload
    assert [op for op in engine.ops() if op[0] == "up" and op[1] == PLATFORM_PROJECT] == [
        ("up", PLATFORM_PROJECT, "ci")
    ] * 2
    for pr in ("pr-1", "pr-2"):
        assert engine.outputs(f"llmctl-{bp}", f"ci.{pr}")["namespace"] == f"{bp}-{pr}"
        assert load_endpoint("ci", bp, pr).extra["namespace"] == f"{bp}-{pr}"
    code, out, err = run("status", "--stack", "ci", "--json")
    assert code == 0, err
    assert [(w["workload"], w["namespace"]) for w in json.loads(out)["workloads"]] == [
        ("pr-1", f"{bp}-pr-1"),
        ("pr-2", f"{bp}-pr-2"),
    ]
    code, out, err = run("status", "--stack", "ci")
    assert code == 0, err
    assert f"workload {bp} (pr-1)  namespace {bp}-pr-1  pools core, default" in out

    # pr-1 and the platform were last updated 5 days ago, pr-2 today
    _age(engine, f"llmctl-{bp}", "ci.pr-1", 5)
    _age(engine, PLATFORM_PROJECT, "ci", 5)
    for prefix in ("pr-", ""):
        code, out, err = run("stacks", "gc", "--older-than", "3d", "--prefix", prefix, "--yes", "--json")
        assert code == 0, err
        assert json.loads(out)["removed"] == ([f"llmctl-{bp}/ci.pr-1"] if prefix else [])
    assert engine.checkpoint(PLATFORM_PROJECT, "ci") is not None
    assert engine.checkpoint(f"llmctl-{bp}", "ci.pr-2") is not None
    assert [e.workload for e in list_endpoints("ci")] == ["pr-2"]

    # an unknown workload names the ones there; then the last PR goes and the platform stays
    code, _out, err = run("down", "--stack", "ci", "--workload", "pr-9", "--yes")
    assert (
        code == 8 and "no workload pr-9 in environment 'ci'; deployed there: tiny-cpu (workload pr-2)" in err
    )
    code, out, err = run("down", "--stack", "ci", "--workload", "pr-2", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["destroyed"] == [f"llmctl-{bp}/ci.pr-2"]
    assert engine.checkpoint(PLATFORM_PROJECT, "ci") is not None and list_endpoints("ci") == []


def test_a_workload_whose_first_up_failed_still_keeps_its_pool(engine: StandinEngine) -> None:
    """No outputs saved yet: its record comes from its stack config, so the next `up` of another
    blueprint keeps its pool."""
    engine.control(fail={f"{A}/{A}": "creating RayService: admission webhook denied"})
    with pytest.raises(LlmctlError):
        lifecycle().up(A, region=REGION, wait=False)
    assert "llmctl_workload" not in engine.outputs(f"llmctl-{A}", "dev")
    engine.control(fail={})
    lifecycle().up("tiny-cpu", region=REGION, wait=False)
    assert [p["name"] for p in engine.outputs(PLATFORM_PROJECT, "dev")["node_pools"]] == [
        "core",
        "default",
        "ray-head",
        "inferentia-inf2",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["up", "-b", "tiny-cpu", "--workload", "PR_42", "--yes"], "invalid workload name 'PR_42'"),
        (["up", "-b", "tiny-cpu", "--target", "local", "--workload", "pr-1"], "--workload does not apply"),
        (["down", "--target", "local", "--workload", "pr-1"], "--workload does not apply"),
        (["up", "-b", "tiny-cpu", "--target", "kubeconfig", "--reselect-azs"], "--reselect-azs applies to"),
        (["down", "--workload", "pr-1", "--all"], "exclude each other"),
        (["down", "--stack", "ci.pr-1", "--yes"], "pass --stack ci --workload pr-1"),
    ],
)
def test_bad_workload_flags_are_one_line_errors_before_any_pulumi_call(
    engine: StandinEngine, aws: str, args: list[str], message: str
) -> None:
    code, _out, err = run(*args)
    assert code == 2 and message in err and "Traceback" not in err  # bad input
    assert engine.calls() == []
