"""The target registry: one name per target, did-you-mean for unknown names, and each target's
declared needs are exactly what its preflight checks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.errors import LlmctlError
from llmctl.infra.names import DEFAULT_TARGET, TARGET_NAMES
from llmctl.infra.targets.base import UpRequest
from llmctl.infra.targets.needs import NEED_ORDER
from llmctl.infra.targets.registry import TARGETS, connect_needs, get_target
from llmctl.state import Endpoint

runner = CliRunner()

# What the preflight says when each need is missing (the fixtures below take every one away).
MISSING = {
    "pulumi": "pulumi CLI is not installed",
    "kubectl": "kubectl is not installed",
    "kubectl-eks": "kubectl (within one minor version of the cluster's Kubernetes",
    "aws-cli": "the AWS CLI is not installed",
    "kubeconfig": "--target kubeconfig needs --kubeconfig FILE",
    "ray": "Ray is not installed",
    "aws": "no AWS credentials",
    "hf-token": "is gated on Hugging Face and no token was given",
}
GATED = "llama2-triton-vllm-gpu"  # a gated model: the token need is reported too
OPERATIONS = [(name, op) for name, target in TARGETS.items() for op in target.needs]


def test_every_name_has_exactly_one_target() -> None:
    assert tuple(TARGETS) == TARGET_NAMES == ("eks", "kubeconfig", "local")
    assert all(target.name == name for name, target in TARGETS.items())
    assert DEFAULT_TARGET in TARGETS and set(MISSING) == set(NEED_ORDER)


@pytest.mark.parametrize(("typo", "meant"), [("ekss", "eks"), ("kubeconf", "kubeconfig"), ("lcoal", "local")])
def test_unknown_target_suggests_the_closest_name(typo: str, meant: str) -> None:
    with pytest.raises(LlmctlError) as info:
        get_target(typo)
    assert info.value.message == f"unknown --target {typo!r}"
    assert info.value.hint == f"did you mean {meant!r}? use eks, kubeconfig or local"


def test_unknown_target_on_the_command_line_is_one_line_without_a_traceback() -> None:
    for args in (["up", "-b", "tiny-cpu", "--yes"], ["down", "--yes"], ["status"]):
        result = runner.invoke(app, [*args, "--target", "locl"])
        assert result.exit_code == 2, result.output  # bad input, like an unknown option
        assert "unknown --target 'locl'" in result.stderr and "did you mean 'local'?" in result.stderr
        assert "Traceback" not in result.stderr
    result = runner.invoke(app, ["status", "--target", "mars"])
    assert result.exit_code == 2 and "did you mean" not in result.stderr
    assert "use eks, kubeconfig or local" in result.stderr


@pytest.fixture
def nothing_installed(no_aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pulumi, no kubectl (empty PATH), no AWS credentials, Ray hidden from the import system."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "ray", None)  # importlib.util.find_spec("ray") is now None
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)


@pytest.mark.parametrize(("name", "operation"), OPERATIONS)
def test_declared_needs_are_what_the_preflight_checks(
    name: str, operation: str, nothing_installed: None
) -> None:
    target = TARGETS[name]
    declared = target.needs[operation]  # type: ignore[index]
    if not declared:
        assert target.preflight(operation) == []  # type: ignore[arg-type]
        return
    with pytest.raises(LlmctlError) as info:
        target.preflight(operation, region="us-west-2", blueprint=GATED)  # type: ignore[arg-type]
    listed = " | ".join(what for what, _fix in getattr(info.value, "fixes", [])) or info.value.message
    reported = {need for need, text in MISSING.items() if text in listed}
    assert reported == declared


def test_the_cli_checks_what_the_chosen_target_declares(nothing_installed: None) -> None:
    result = runner.invoke(app, ["up", "-b", "tiny-cpu", "--target", "local", "--yes"])
    assert result.exit_code == 3 and "Ray is not installed" in result.stderr
    assert "pulumi" not in result.stderr and "AWS" not in result.stderr
    result = runner.invoke(app, ["down", "--target", "kubeconfig", "--yes"])
    assert result.exit_code == 3 and "pulumi CLI is not installed" in result.stderr
    assert "AWS" not in result.stderr  # an existing cluster's workloads need no AWS credentials
    result = runner.invoke(app, ["up", "-b", "tiny-cpu", "--target", "kubeconfig", "--yes"])
    assert result.exit_code == 3
    assert result.stderr.count("missing prerequisites") == 1
    for need in ("pulumi", "kubectl", "kubeconfig"):
        assert MISSING[need] in result.stderr
    result = runner.invoke(app, ["status", "--target", "local", "--json"])
    assert result.exit_code == 0, result.output  # the local status needs nothing


def test_an_operation_a_target_does_not_offer_is_one_clear_error() -> None:
    with pytest.raises(LlmctlError) as info:
        get_target("local").preview(UpRequest("tiny-cpu"))
    assert info.value.message == "`llmctl preview` does not apply to --target local"
    assert info.value.hint == "it applies to --target eks"


def test_a_flag_another_target_owns_is_refused() -> None:
    with pytest.raises(LlmctlError, match="--model and --port apply to --target local only"):
        get_target("kubeconfig", UpRequest("tiny-cpu", port=9000))
    with pytest.raises(LlmctlError, match="--pools applies to --target kubeconfig only"):
        get_target("local", UpRequest("tiny-cpu", pools=Path("pools.yaml")))
    assert get_target("local", UpRequest("tiny-cpu", model="m", port=9000)).name == "local"


def test_connect_checks_what_any_target_needs_then_asks_the_recorded_target() -> None:
    assert connect_needs() == {"kubectl"}
    local = Endpoint("dev", "tiny-cpu", "local", "http://127.0.0.1:9/v1", "m")
    connection = get_target(local.target).connect(local, 8000)
    assert connection.lines == ["local target: already at http://127.0.0.1:9/v1"]
    assert not connection.forwarding


# ---- issue 25, item 5: every tool `up` on EKS calls is checked, with versions, before the plan ----


def fake_tool(bin_dir: Path, name: str, output: str) -> None:
    """A `name` on PATH that prints `output` (a version line) for any call."""
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\necho '{output}'\n")  # echo: a shell builtin, PATH has only this folder
    tool.chmod(0o755)


def test_eks_up_lists_every_missing_tool_at_once_before_any_plan(nothing_installed: None) -> None:
    result = runner.invoke(app, ["up", "-b", "tiny-cpu", "--yes"])
    assert result.exit_code == 3, result.output
    assert result.stderr.count("missing prerequisites") == 1
    for need in ("pulumi", "aws-cli", "kubectl-eks", "aws"):
        assert MISSING[need] in result.stderr, need
    # the fix of each is in the one hint
    assert "get.pulumi.com" in result.stderr and "getting-started-install" in result.stderr
    assert "kubernetes.io/docs/tasks/tools" in result.stderr


@pytest.mark.parametrize(
    ("aws_cli", "kubectl", "refused"),
    [
        (
            "aws-cli/1.23.5 Python/3.8.10 Linux/5.15 botocore/1.25.5",
            "v1.35.2",
            "AWS CLI 1.23.5 is older than 1.24.0",
        ),
        ("aws-cli/2.6.3 Python/3.9.12 Linux/5.15 exe/x86_64", "v1.35.2", "AWS CLI 2.6.3 is older than 2.7.0"),
        ("aws-cli/2.31.0 Python/3.13.7 Linux/6.8 exe/x86_64", "v1.32.4", "kubectl 1.32 is more than 1 minor"),
        ("aws-cli/2.31.0 Python/3.13.7 Linux/6.8 exe/x86_64", "v1.38.0", "kubectl 1.38 is more than 1 minor"),
    ],
)
def test_eks_up_refuses_tools_too_old_for_the_cluster(
    aws_cli: str, kubectl: str, refused: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.infra.aws.preflight import require_aws_cli, require_kubectl_for

    bin_dir = tmp_path / "tools"
    fake_tool(bin_dir, "aws", aws_cli)
    fake_tool(bin_dir, "kubectl", f'{{"clientVersion": {{"gitVersion": "{kubectl}"}}}}')
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(LlmctlError) as info:
        require_aws_cli()
        require_kubectl_for("1.35")
    assert refused in info.value.message and info.value.hint
    if "kubectl" in refused:  # installed: another version is the fix, not an install (issue 54 item 6)
        verb = "upgrade kubectl to 1.35" if kubectl < "v1.35" else "install the older kubectl 1.35"
        assert info.value.hint.startswith(verb) and "--channel=1.35/stable" in info.value.hint


def test_eks_up_accepts_current_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.infra.aws.preflight import require_aws_cli, require_kubectl_for

    bin_dir = tmp_path / "tools"
    fake_tool(bin_dir, "aws", "aws-cli/1.45.11 Python/3.11.7 Linux/6.18 botocore/1.43.11")
    fake_tool(bin_dir, "kubectl", '{"clientVersion": {"gitVersion": "v1.34.1"}}')
    monkeypatch.setenv("PATH", str(bin_dir))
    assert require_aws_cli().startswith("aws-cli/1.45.11")
    assert require_kubectl_for("1.35").startswith("kubectl v1.34.1")
