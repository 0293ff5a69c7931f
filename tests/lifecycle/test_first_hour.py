"""Issue 26: a newcomer's first hour on a machine without AWS credentials or the pulumi CLI.

Each test runs the real CLI (Typer's runner) and asserts the output and the exit code."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.errors import EXIT_CODES

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare_machine(no_aws: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No pulumi, kubectl or AWS CLI (an empty PATH), no credentials and no region."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)


def bad_blueprint(tmp_path: Path) -> Path:
    """The catalog's llama2-inf2 with a tensor-parallel degree Inferentia2 cannot run (7)."""
    text = (ROOT / "blueprints" / "catalog" / "llama2-inf2.yaml").read_text()
    assert "tensor_parallel: 24" in text
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace("tensor_parallel: 24", "tensor_parallel: 7"))
    return path


# ---- item 1: the blueprint first (offline), then every missing prerequisite at once ---------------


def test_up_with_a_misspelled_blueprint_names_the_blueprint_not_the_prerequisites(bare_machine: None) -> None:
    result = runner.invoke(app, ["up", "--blueprint", "llama2-inf3", "--region", "us-west-2", "--yes"])
    assert result.exit_code == 2, result.output
    assert "unknown blueprint 'llama2-inf3'; did you mean 'llama2-inf2'?" in result.stderr
    assert "prerequisite" not in result.stderr and "pulumi" not in result.stderr


def test_up_with_a_broken_blueprint_file_names_the_field(bare_machine: None, tmp_path: Path) -> None:
    result = runner.invoke(app, ["up", "--blueprint", str(bad_blueprint(tmp_path)), "--yes"])
    assert result.exit_code == 2, result.output
    assert "compute.tensor_parallel: tp 7 is not allowed on inferentia2" in result.stderr
    assert "prerequisite" not in result.stderr


@pytest.mark.parametrize("region", [[], ["--region", "us-west-2"]])
def test_up_lists_every_missing_prerequisite_each_with_its_fix(bare_machine: None, region: list[str]) -> None:
    result = runner.invoke(app, ["up", "--blueprint", "llama2-inf2", *region, "--yes"])
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    items = [line.strip()[2:] for line in lines if line.strip().startswith("• ")]
    fixes = [line.strip() for line in lines if line.strip().startswith("fix: ")]
    expected = ["pulumi CLI is not installed", "kubectl", "AWS CLI is not installed", "no AWS credentials"]
    if not region:
        expected.append("no AWS region is set")  # and credentials still listed (they used to hide)
    for text in expected:
        assert sum(text in item for item in items) == 1, (text, items)
    assert len(items) == len(expected) == len(fixes)  # one fix line under each item
    assert lines[0].startswith(f"error: missing prerequisites ({len(expected)})")
    assert "llmctl plan --offline --blueprint llama2-inf2" in result.stderr
    assert result.stderr.count("hint:") == 1


def test_missing_prerequisites_as_json_list_each_fix(bare_machine: None) -> None:
    result = runner.invoke(app, ["up", "--blueprint", "llama2-inf2", "--yes", "--json"])
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert data["error"] == "PrerequisiteError" and len(data["missing"]) == 5
    assert all(item["fix"] for item in data["missing"])


# ---- item 7: a misspelled region is refused offline; doctor lists the checks it skipped -----------


@pytest.mark.parametrize("command", [["plan", "--offline"], ["up", "--yes"], ["doctor"]])
def test_a_misspelled_region_is_refused_with_the_closest_name(bare_machine: None, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--blueprint", "tiny-cpu", "--region", "us-wset-2"])
    assert result.exit_code == 2 if command[0] != "doctor" else result.exit_code == 3, result.output
    text = result.stderr + result.stdout
    assert "'us-wset-2' is not an AWS region; did you mean 'us-west-2'?" in text
    assert "us-wset-2a" not in text and "policy: passed" not in text


def test_a_real_region_outside_the_default_list_still_plans(bare_machine: None) -> None:
    result = runner.invoke(app, ["plan", "--offline", "--blueprint", "tiny-cpu", "--region", "eu-south-2"])
    assert result.exit_code == 0, result.output
    assert "region=eu-south-2" in result.stdout


def test_doctor_without_credentials_lists_the_checks_it_skipped(bare_machine: None) -> None:
    result = runner.invoke(app, ["doctor", "--blueprint", "llama2-inf2", "--region", "us-west-2", "--json"])
    assert result.exit_code == 3
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["AWS credentials"]["ok"] is False
    for name in ("region", "instance offerings", "vCPU quota", "capacity reservations", "AMI alias"):
        assert checks[name]["skipped"] is True and checks[name]["ok"] is None, name
        assert "needs working AWS credentials" in checks[name]["detail"]
    text = runner.invoke(app, ["doctor", "--blueprint", "llama2-inf2", "--region", "us-west-2"]).stdout
    assert re.search(r"^skip vCPU quota: not run: needs working AWS credentials$", text, re.M)


# ---- item 9: offline commands fail fast with one line ---------------------------------------------


def test_size_of_a_hub_model_offline_fails_at_once_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # nothing cached
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: as good as offline
    started = time.monotonic()
    result = runner.invoke(app, ["size", "Qwen/Qwen2.5-7B-Instruct"])
    took = time.monotonic() - started
    assert result.exit_code == 2, result.output
    assert took < 10, took  # it took 24 s of retries
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: model 'Qwen/Qwen2.5-7B-Instruct'")
    assert lines[1].startswith("hint:") and "retry" not in result.output.lower()


# ---- item 8: one exit-code table, a declined prompt is not an error -------------------------------


def test_the_exit_code_table_is_in_the_help_and_the_readme() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    readme = (ROOT / "README.md").read_text()
    for code, meaning in EXIT_CODES.items():
        assert re.search(rf"^\s*{code}\s+{re.escape(meaning)}\s*$", result.stdout, re.M), code
        assert f"| {code} | {meaning} |" in readme, code


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["up", "-b", "tiny-cpu", "--target", "lcoal"], 2),  # a bad value
        (["up", "-b", "tiny-cpu", "--no-such-flag"], 2),  # an unknown option: the same code
        (["endpoint", "-b", "tiny-cpu"], 8),  # not deployed
        (["down", "--target", "local"], 2),  # a prompt without a terminal: needs --yes
    ],
)
def test_one_code_per_meaning(args: list[str], code: int) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert code in EXIT_CODES and "Traceback" not in result.output


def test_a_declined_prompt_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer.testing

    # the runner's stdin stands for a terminal where the user answers "n"
    monkeypatch.setattr(typer.testing._NamedTextIOWrapper, "isatty", lambda self: True)
    result = runner.invoke(app, ["down", "--target", "local"], input="n\n")
    assert result.exit_code == 0, result.output
    assert "nothing was changed" in result.stderr and "error" not in result.stderr
