"""The lifecycle commands through Typer's CliRunner: prerequisite hints, exits, JSON keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lifecycle_scenario import CLUSTER, build
from lifecycle_support import ready_pod
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app

runner = CliRunner()


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["up", "--blueprint", "tiny-cpu", "--yes"],
        # (with nothing deployed, down and status say so first: tests/foundation/test_first_day.py)
        ["down", "--yes", "--target", "eks"],
        ["preview", "--blueprint", "tiny-cpu"],
        ["status", "--target", "eks"],
        ["stacks", "list"],
        ["stacks", "gc", "--older-than", "3d", "--yes"],
    ],
)
def test_missing_pulumi_gives_the_install_hint(args: list[str], no_pulumi: None, aws: str) -> None:
    code, _out, err = run(*args)
    assert code == 3, err
    assert "pulumi CLI is not installed" in err and "get.pulumi.com" in err


@pytest.mark.parametrize(
    "args",
    [
        ["up", "--blueprint", "tiny-cpu", "--yes"],
        ["down", "--yes", "--target", "eks"],
        ["preview", "--blueprint", "tiny-cpu"],
        ["sweep", "--cluster", CLUSTER, "--dry-run"],
    ],
)
def test_missing_aws_credentials_gives_the_hint(args: list[str], no_aws: None, engine: StandinEngine) -> None:
    code, _out, err = run(*args)
    assert code == 3, err
    assert "no AWS credentials" in err and "aws configure" in err
    assert [op for op in engine.ops() if op[0] in ("up", "destroy", "preview")] == []


def test_doctor_failing_checks_exit_non_zero_with_fixes(no_aws: None, no_pulumi: None) -> None:
    code, out, err = run("doctor", "--blueprint", "llama2-inf2", "--region", "us-west-2")
    assert code == 3
    assert "FAIL" in out and "aws configure" in out and "get.pulumi.com" in out
    assert "check(s) failed" in err


def test_doctor_json(no_aws: None) -> None:
    code, out, _ = run("doctor", "--region", "us-west-2", "--json")
    assert code == 3
    data = json.loads(out)
    assert set(data) == {"ok", "region", "blueprint", "checks"}
    assert set(data["checks"][0]) == {"name", "ok", "detail", "fix", "skipped"}


def test_connect_without_kubectl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, _out, err = run("connect", "--blueprint", "tiny-cpu")
    assert code == 3 and "kubectl is not installed" in err and "install kubectl" in err


def test_endpoint_not_deployed_says_how_to_deploy() -> None:
    code, _out, err = run("endpoint", "--blueprint", "tiny-cpu")
    assert code != 0 and "llmctl up --blueprint tiny-cpu" in err


def test_sweep_dry_run_json(aws: str) -> None:
    sc = build(aws)
    code, out, err = run("sweep", "--cluster", CLUSTER, "--dry-run", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["dry_run"] is True and data["deleted"] == []
    assert len(data["found"]) == sum(len(ids) for ids in sc.ours.values())


def test_sweep_refuses_to_ask_without_a_terminal(aws: str) -> None:
    build(aws)
    code, _out, err = run("sweep", "--cluster", CLUSTER)
    assert code == 2 and "--yes" in err
    code, out, err = run("sweep", "--cluster", CLUSTER, "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["failed"] == []


def test_up_then_down_end_to_end(engine: StandinEngine, aws: str) -> None:
    engine.kube(ready_pod("tiny-cpu"))
    code, out, err = run("up", "--blueprint", "tiny-cpu", "--yes", "--progress", "plain")
    assert code == 0, err
    assert (
        "http://localhost:8000/v1" in out and "llmctl chat --blueprint tiny-cpu" in out and "timeline" in out
    )
    code, out, err = run("endpoint", "--blueprint", "tiny-cpu", "--json")
    assert code == 0 and json.loads(out)["base_url"] == "http://localhost:8000/v1"
    code, out, err = run("stacks", "list", "--json")
    assert code == 0 and {(r["project"], r["stack"]) for r in json.loads(out)} == {
        ("llmctl-platform", "dev"),
        ("llmctl-tiny-cpu", "dev"),
    }
    code, out, err = run("status", "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["cluster"]["cluster_name"] == CLUSTER and len(status["stacks"]) == 2
    code, out, err = run("down")
    assert code == 2 and "--yes" in err  # stdin is not a terminal
    code, out, err = run("down", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["leftovers"] == []


def test_preview_markdown(engine: StandinEngine, aws: str) -> None:
    code, out, err = run("preview", "--blueprint", "tiny-cpu", "--format", "markdown")
    assert code == 0, err
    assert (
        out.startswith("### llmctl preview: `tiny-cpu` on stack `dev`") and "| llmctl-tiny-cpu/dev |" in out
    )


def test_preview_names_the_workload_stack_of_a_named_workload(engine: StandinEngine, aws: str) -> None:
    """`--workload pr-42`: the platform stack is the environment, the workload stack `ci.pr-42`."""
    args = ("preview", "--blueprint", "tiny-cpu", "--stack", "ci", "--workload", "pr-42")
    code, out, err = run(*args)
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("llmctl-")]
    assert [line.split(":")[0] for line in lines] == ["llmctl-platform/ci", "llmctl-tiny-cpu/ci.pr-42"]
    assert [op[1:] for op in engine.ops() if op[0] == "preview"] == [
        ("llmctl-platform", "ci"),
        ("llmctl-tiny-cpu", "ci.pr-42"),
    ]
    code, out, err = run(*args, "--format", "json")
    assert code == 0, err
    assert (json.loads(out)["stack"], json.loads(out)["workload_stack"]) == ("ci", "ci.pr-42")
    code, out, err = run(*args, "--format", "markdown")
    assert out.startswith("### llmctl preview: `tiny-cpu` on stack `ci.pr-42`")
    assert "| llmctl-platform/ci |" in out and "| llmctl-tiny-cpu/ci.pr-42 |" in out


def test_stacks_gc_removes_old_stacks(engine: StandinEngine, aws: str) -> None:
    assert run("up", "--blueprint", "tiny-cpu", "--yes", "--stack", "pr-7", "--no-wait")[0] == 0
    code, out, _ = run("stacks", "gc", "--older-than", "1d", "--json", "--yes")
    assert code == 0 and json.loads(out)["removed"] == []
    code, out, err = run("stacks", "gc", "--older-than", "0m", "--prefix", "pr-", "--yes", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["removed"] == ["llmctl-tiny-cpu/pr-7", "llmctl-platform/pr-7"]
    assert [r["cluster"] for r in data["sweeps"]] == ["llmctl-pr-7"] and data["ok"] is True
    assert [op for op in engine.ops() if op[0] == "destroy"] == [
        ("destroy", "llmctl-tiny-cpu", "pr-7"),
        ("destroy", "llmctl-platform", "pr-7"),
    ]


def test_stacks_gc_spares_stacks_being_updated_and_the_platform_under_them(
    engine: StandinEngine, aws: str
) -> None:
    assert run("up", "--blueprint", "tiny-cpu", "--yes", "--stack", "pr-8", "--no-wait")[0] == 0
    engine.hold_lock("llmctl-tiny-cpu", "pr-8")  # an update of the workload is running
    code, out, err = run("stacks", "gc", "--older-than", "0m", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out) == {
        "expired": [],
        "removed": [],
        "dry_run": False,
        "notes": [],
        "sweeps": [],
        "leftovers": [],
        "ok": True,
    }
    assert [op for op in engine.ops() if op[0] == "destroy"] == []
