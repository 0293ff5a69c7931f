"""A newcomer's first day (issue 43): the commands as a new user meets them, each run through the
CLI with a fresh state folder (the autouse fixture of this folder's conftest) and no pulumi on PATH.

- `status` and `down` with nothing deployed say so (exit 8) and ask for no tool or credential.
- A refused `up` is not remembered: later hints never repeat its flags.
- A misspelled blueprint gets "did you mean" from every command that takes one.
- `chat` and `bench` without `-b` use the stack's one endpoint.
- Bad input exits 2, whoever finds it.
- The "next:" hint after `up` stops the blueprint deployed, not every local server.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.state import Endpoint, last_up, save_endpoint, state_dir

pytestmark = pytest.mark.xdist_group("test_first_day")  # one fake OpenAI server per module


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(autouse=True)
def no_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with no `pulumi` (and no AWS settings that could make a call succeed)."""
    keep = [
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "pulumi").exists()
    ]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))
    for key in ("PULUMI_BACKEND_URL", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "OPENAI_API_BASE"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(scope="module")
def openai_url() -> Iterator[str]:
    """llmctl's own fake OpenAI server (serving/client/bench/testserver.py), in a child process."""
    from llmctl.serving.client.bench.testserver import running_server

    with running_server() as url:
        yield url


# --- 2: nothing deployed -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["down", "--yes"],
        ["status", "--json"],
        ["down", "-b", "tiny-cpu", "--yes"],
        # issue 54 item 3: one rule for `down` on every target (it said "nothing was running", exit 0)
        ["down", "--target", "local", "--yes"],
        ["down", "--target", "local", "-b", "tiny-cpu", "--yes"],
    ],
)
def test_status_and_down_with_nothing_deployed_say_so_and_ask_for_nothing(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 8, result.output
    assert "deployed in stack 'dev'" in result.stderr
    assert "llmctl up --blueprint" in result.stderr
    # no tool, credential or region was asked for: there is nothing to reach
    assert "not installed" not in result.stderr and "credentials" not in result.stderr
    if "--json" in args:
        assert json.loads(result.stdout)["error"] == "NotDeployed"


def test_down_local_with_a_record_left_takes_it_down() -> None:
    """The other side of the rule: a local server that stopped by itself left its record, which
    `down --target local` removes (exit 0); a second `down` then finds nothing (exit 8)."""
    from llmctl.serving.client.local import _record_path

    record = _record_path("dev", "tiny-cpu")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"blueprint": "tiny-cpu", "pid": 0}))  # pid 0: never alive
    result = run("down", "--target", "local", "--yes")
    assert result.exit_code == 0 and "stopped: tiny-cpu" in result.stdout, result.output
    assert not record.exists()
    assert run("down", "--target", "local", "--yes").exit_code == 8


def test_a_pulumi_stack_in_the_local_backend_is_something_to_reach() -> None:
    """A platform stack left by a failed `up` (no endpoint recorded) is taken down on eks, which
    needs the pulumi CLI; the copy a removed stack leaves (`.json.bak`) is not a stack."""
    stacks = state_dir() / "pulumi" / ".pulumi" / "stacks" / "llmctl-platform"
    stacks.mkdir(parents=True)
    (stacks / "dev.json.bak").write_text("{}")
    assert run("down", "--yes").exit_code == 8
    (stacks / "dev.json").write_text("{}")
    result = run("down", "--yes")
    assert result.exit_code == 3 and "pulumi CLI is not installed" in result.stderr
    assert run("status", "--stack", "other").exit_code == 8  # another environment has nothing


def test_an_explicit_target_still_checks_its_prerequisites() -> None:
    result = run("status", "--target", "eks")
    assert result.exit_code == 3 and "pulumi CLI is not installed" in result.stderr


def test_nothing_deployed_here_names_the_stack_that_has_it(openai_url: str) -> None:
    save_endpoint(Endpoint("ci", "tiny-cpu", "local", openai_url, "fake-model"))
    result = run("status")
    assert result.exit_code == 8 and "it is deployed in stack ci: pass --stack" in result.stderr


# --- 4: a refused up is not remembered -----------------------------------------------------------


def test_a_refused_up_is_not_repeated_by_later_hints() -> None:
    result = run("up", "--blueprint", "tiny-cpu", "--region", "us-wset-2", "--yes")
    assert result.exit_code == 2 and "us-wset-2" in result.stderr
    assert last_up("dev", "tiny-cpu") is None
    result = run("endpoint", "--blueprint", "tiny-cpu")
    assert result.exit_code == 8
    assert "us-wset-2" not in result.stderr and "llmctl up --blueprint tiny-cpu --stack dev" in result.stderr
    # refused for a missing prerequisite (no pulumi): not remembered either
    assert run("up", "--blueprint", "tiny-cpu", "--region", "us-east-1", "--yes").exit_code == 3
    assert last_up("dev", "tiny-cpu") is None


def test_an_up_that_ran_and_failed_is_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past its checks, a failed `up` is what a user repeats: the hints name it, flags and all."""
    import llmctl.serving.client.local as local
    from llmctl.errors import ServingError

    def fails(*args: object, **kwargs: object) -> None:
        raise ServingError("the local server exited during start-up", "see its log")

    monkeypatch.setattr(local, "start_local", fails)
    (tmp_path / "m").mkdir()
    result = run("up", "-b", "tiny-cpu", "--target", "local", "--model", str(tmp_path / "m"), "--yes")
    assert result.exit_code == 6, result.output
    assert (
        last_up("dev", "tiny-cpu")
        == f"llmctl up --blueprint tiny-cpu --target local --stack dev --model {tmp_path / 'm'}"
    )


def test_a_model_folder_that_does_not_exist_is_bad_input(tmp_path: Path) -> None:
    """Issue 54 item 2: `--model ./nonexistent` is the user's input (exit 2, it was 6 "the local
    target failed"), refused before anything starts, so no hint repeats it."""
    result = run("up", "-b", "tiny-cpu", "--target", "local", "--model", str(tmp_path / "none"), "--yes")
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.stderr and "llmctl models tiny DIR" in result.stderr
    assert last_up("dev", "tiny-cpu") is None


# --- 5: a misspelled blueprint -------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["chat", "-b", "tiny-cpux", "-p", "hi"],
        ["bench", "-b", "tiny-cpux", "-n", "1"],
        ["endpoint", "-b", "tiny-cpux"],
        ["connect", "-b", "tiny-cpux"],
        ["down", "-b", "tiny-cpux", "--target", "local", "--yes"],
        ["down", "-b", "tiny-cpux", "--yes"],
        ["status", "-b", "tiny-cpux"],
        ["plan", "-b", "tiny-cpux"],
    ],
)
def test_a_misspelled_blueprint_gets_did_you_mean_everywhere(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "unknown blueprint 'tiny-cpux'" in result.stderr and "did you mean 'tiny-cpu'?" in result.stderr
    assert "stopped" not in result.stdout


def test_a_deployed_blueprint_of_ones_own_is_not_a_misspelling(openai_url: str) -> None:
    save_endpoint(Endpoint("dev", "my-model", "local", openai_url, "fake-model"))
    assert run("endpoint", "-b", "my-model").stdout.strip() == openai_url
    assert run("endpoint", "-b", "tiny-cpu").exit_code == 8  # in the catalog, not deployed


# --- 6: chat and bench find the one endpoint -----------------------------------------------------


def test_chat_and_bench_without_a_blueprint_use_the_stacks_one_endpoint(
    openai_url: str, tmp_path: Path
) -> None:
    save_endpoint(Endpoint("dev", "tiny-cpu", "local", openai_url, "fake-model"))
    result = run("chat", "-p", "hi", "--json", "--max-tokens", "4")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "fake-model"
    result = run("bench", "-n", "2", "--warmup", "0", "--no-plots", "--out", str(tmp_path / "r"), "--json")
    assert result.exit_code == 0, result.output
    # two endpoints: which one is asked, not guessed
    save_endpoint(Endpoint("dev", "llama2-inf2", "eks", openai_url, "fake-model"))
    result = run("chat", "-p", "hi")
    assert result.exit_code == 2 and "pass --blueprint NAME" in result.stderr
    assert "llama2-inf2" in result.stderr and "tiny-cpu" in result.stderr


def test_chat_with_nothing_deployed_says_so() -> None:
    result = run("chat", "-p", "hi")
    assert result.exit_code == 8 and "nothing is deployed in stack 'dev'" in result.stderr


# --- 7: bad input exits 2 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "-e", "http://127.0.0.1:9/v1", "-c", "0"],
        ["bench", "-e", "http://127.0.0.1:9/v1", "--slo", "garbage"],
        ["bench", "-e", "http://127.0.0.1:9/v1", "--extra-body", "notjson"],
        ["bench", "compare", "/nonexistent/a", "/nonexistent/b"],
        ["blueprints", "schema", "--out", "/nonexistent/folder/schema.json"],
        ["bench", "-e", "http://127.0.0.1:9/v1", "-b", "tiny-cpu"],
    ],
)
def test_bad_input_exits_2(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and "Traceback" not in result.output


# --- 8: the next: hint ---------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["local", "eks"])
def test_the_next_hint_stops_the_blueprint_deployed_only(target: str) -> None:
    from llmctl.infra.lifecycle.reports import next_commands

    endpoint = Endpoint("dev", "tiny-cpu", target, "http://127.0.0.1:8001/v1", "m")
    [down] = [c for c in next_commands(endpoint) if c.startswith("llmctl down")]
    assert "--blueprint tiny-cpu" in down and ("--target local" in down) == (target == "local")


# --- 3: one list of checks for doctor and up -----------------------------------------------------


@pytest.fixture
def no_aws_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def old_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubectl 1.32 first on PATH (what `kubectl version --client -o json` prints)."""
    folder = tmp_path / "old-kubectl"
    folder.mkdir()
    script = folder / "kubectl"
    script.write_text('#!/bin/sh\necho \'{"clientVersion": {"gitVersion": "v1.32.3"}}\'\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def _doctor_checks(*args: str) -> dict[str, dict[str, Any]]:
    result = run("doctor", *args, "--json")
    assert result.exit_code == 3, result.output
    return {check["name"]: check for check in json.loads(result.stdout)["checks"]}


def test_doctor_fails_the_kubectl_that_up_refuses(no_aws_credentials: None, old_kubectl: None) -> None:
    from llmctl.blueprints.versions import versions

    cluster = versions().eks.kubernetes_version.value
    kubectl = _doctor_checks("-b", "tiny-cpu", "--region", "us-west-2")["kubectl"]
    assert kubectl["ok"] is False and f"from the cluster's Kubernetes {cluster}" in kubectl["detail"]
    # issue 54 item 6: it is installed, so the fix is to upgrade it (it said "install kubectl")
    assert kubectl["fix"].startswith(f"upgrade kubectl to {cluster} ") and "install" not in kubectl["fix"]
    result = run("up", "-b", "tiny-cpu", "--region", "us-west-2", "--yes")
    assert result.exit_code == 3 and kubectl["detail"] in result.stderr


@pytest.mark.parametrize(("blueprint", "local"), [("tiny-cpu", True), ("llama2-inf2", False)])
def test_up_without_a_cloud_names_the_local_target_for_a_cpu_blueprint(
    no_aws_credentials: None, blueprint: str, local: bool
) -> None:
    """Issue 54 item 7: `up -b tiny-cpu --yes` (no --target) on a machine with no pulumi CLI or
    credentials: the hint named `plan --offline` only, not the target that needs neither."""
    result = run("up", "-b", blueprint, "--yes")
    assert result.exit_code == 3, result.output
    hint = result.stderr.strip().splitlines()[-1]
    instead = f"to run it on this machine instead: `llmctl up --blueprint {blueprint} --target local`"
    assert hint.startswith(f"hint: {instead}" if local else "hint: to look without them:"), hint
    assert f"`llmctl plan --offline --blueprint {blueprint} --stack dev`" in hint
    assert ("--target local" in hint) is local


def test_doctor_without_a_region_still_says_whether_credentials_are_there(no_aws_credentials: None) -> None:
    checks = _doctor_checks("-b", "tiny-cpu")
    assert checks["region"]["ok"] is False
    assert checks["AWS credentials"]["ok"] is False and "aws configure" in checks["AWS credentials"]["fix"]


def test_up_lists_the_token_and_the_token_file_with_the_tools(
    no_aws_credentials: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    gated = ["-b", "llama2-triton-vllm-gpu", "--region", "us-west-2"]
    result = run("up", *gated, "--yes")
    assert result.exit_code == 3
    assert "pulumi CLI is not installed" in result.stderr and "no AWS credentials" in result.stderr
    assert "is gated on Hugging Face and no token was given" in result.stderr
    # the same check, with the same words, in doctor
    token = _doctor_checks(*gated)["Hugging Face token"]
    assert token["ok"] is False and "is gated on Hugging Face and no token was given" in token["detail"]
    # a token file that is not there: in the same list, not after the tools and credentials pass
    result = run("up", *gated, "--hf-token-file", str(tmp_path / "missing"), "--yes")
    assert result.exit_code == 3 and "pulumi CLI is not installed" in result.stderr
    assert f"cannot read the Hugging Face token file {tmp_path / 'missing'}" in result.stderr


# --- 13: smaller things --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "hint"),
    [
        (["status"], "nothing was changed"),
        (["blueprints", "list"], "nothing was changed"),
        (["stacks", "list"], "nothing was changed"),
        (["up", "-b", "tiny-cpu"], "run the command again to resume"),
        (["stacks", "gc", "--older-than", "3d"], "run the command again to resume"),
        (["images", "build", "-b", "tiny-cpu"], "run the command again to resume"),
    ],
)
def test_ctrl_c_says_resume_only_where_something_was_changing(words: list[str], hint: str) -> None:
    from llmctl.cli.app import interrupted_hint

    assert interrupted_hint(words) == hint


def test_ctrl_c_on_a_reading_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import llmctl.blueprints.describe

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(llmctl.blueprints.describe, "summaries", interrupted)
    result = run("blueprints", "list")
    assert result.exit_code == 130
    assert "nothing was changed" in result.stderr and "resume" not in result.stderr


def test_a_busy_port_given_with_up_is_refused_before_anything_starts(tmp_path: Path) -> None:
    import socket

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run(
            "up", "-b", "tiny-cpu", "--target", "local", "--model", str(model), "--port", str(port), "--yes"
        )
    assert result.exit_code == 2 and f"port {port} is in use" in result.stderr
    assert last_up("dev", "tiny-cpu") is None  # refused: not repeated by hints
    assert not (state_dir() / "local" / "dev" / "tiny-cpu.json").exists()


def test_what_each_hourly_figure_covers(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.blueprints.hardware import hardware

    platform = f"${hardware().platform_hourly():.2f}/h"
    listing = run("blueprints", "list").stdout
    assert (
        "$/h: the serving nodes" in listing
        and f"the platform (control plane, NAT, core nodes) adds {platform}" in listing
    )
    plan = run("plan", "-b", "tiny-cpu").stdout
    assert re.search(r"cost: \$[\d.]+ per hour on demand: platform \$[\d.]+ \+ serving nodes \$[\d.]+", plan)


def test_bench_help_shows_its_usage_not_a_command_placeholder() -> None:
    usage = run("bench", "--help").stdout.splitlines()[0]
    assert usage.startswith("Usage: llmctl bench [OPTIONS]") and "COMMAND [ARGS]" not in usage


def test_down_stops_the_local_servers_side_by_side(tmp_path: Path) -> None:
    """Each server drains on SIGTERM before it exits: both get the signal before either is gone
    (one after another, the second waited for the first's drain)."""
    import subprocess
    import sys
    import time

    folder = state_dir() / "local" / "dev"
    folder.mkdir(parents=True)
    drain = (
        "import signal, sys, time\n"
        "log = sys.argv[1]\n"
        "def stop(*_):\n"
        "    open(log, 'a').write(f'term {time.monotonic()}\\n')\n"
        "    time.sleep(1.0)\n"
        "    open(log, 'a').write(f'exit {time.monotonic()}\\n')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "open(log, 'a').write('ready\\n')\n"
        "time.sleep(60)\n"
    )
    logs, procs = [], []
    for name in ("tiny-cpu", "llama2-7b-cpu"):
        log = tmp_path / f"{name}.log"
        proc = subprocess.Popen([sys.executable, "-c", drain, str(log)], start_new_session=True)
        (folder / f"{name}.json").write_text(json.dumps({"blueprint": name, "pid": proc.pid}))
        logs.append(log)
        procs.append(proc)
    deadline = time.monotonic() + 20
    while (
        not all(log.exists() and "ready" in log.read_text() for log in logs) and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    result = run("down", "--target", "local", "--yes", "--json")
    for proc in procs:
        proc.wait(timeout=10)
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(result.stdout)["stopped"]) == ["llama2-7b-cpu", "tiny-cpu"]
    events = [line.split() for log in logs for line in log.read_text().splitlines() if line != "ready"]
    terms = [float(t) for kind, t in events if kind == "term"]
    exits = [float(t) for kind, t in events if kind == "exit"]
    assert len(terms) == len(exits) == 2 and max(terms) < min(exits)


# --- 14: the CLI never branches on a target or row kind ------------------------------------------


def test_the_cli_does_not_branch_on_a_kind() -> None:
    """What differs between targets lives in the targets and the rows they return (`stacks list`
    shows each row's `size`), not in branches of the command modules."""
    cli = Path(__file__).resolve().parents[2] / "cli"
    branch = re.compile(r"""\[["'](kind|target)["']\]\s*[!=]=|\.target\s*[!=]=\s*["']""")
    found = [
        f"{p.name}: {line.strip()}"
        for p in cli.glob("*.py")
        for line in p.read_text().splitlines()
        if branch.search(line)
    ]
    assert found == []


def test_stacks_list_shows_each_rows_own_size(tmp_path: Path) -> None:
    import subprocess
    import sys

    folder = state_dir() / "local" / "dev"
    folder.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        (folder / "tiny-cpu.json").write_text(
            json.dumps({"blueprint": "tiny-cpu", "pid": proc.pid, "started": 0})
        )
        result = run("stacks", "list")
        assert result.exit_code == 0, result.output
        assert re.search(r"^dev\s+local/tiny-cpu\s+.*local server$", result.stdout, re.M)
        rows = json.loads(run("stacks", "list", "--json").stdout)
        assert [row["size"] for row in rows] == ["local server"]
    finally:
        proc.kill()
        proc.wait()


# --- 12: blueprint-file errors read the same everywhere ------------------------------------------


@pytest.fixture
def bad_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of tiny-cpu (keeping its name) with a tp degree the CPU does not allow, on line 12."""
    from llmctl.blueprints._data import data_file

    text = data_file("catalog", "tiny-cpu.yaml").read_text()
    assert "  tensor_parallel: 1\n" in text
    path = tmp_path / "my-blueprint.yaml"
    path.write_text(text.replace("  tensor_parallel: 1\n", "  tensor_parallel: 3\n"))
    monkeypatch.chdir(tmp_path)
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "-b", "./my-blueprint.yaml"],
        ["cost", "-b", "./my-blueprint.yaml"],
        ["validate", "-b", "./my-blueprint.yaml"],
        ["up", "-b", "./my-blueprint.yaml", "--target", "local", "--yes"],
        ["render", "-b", "./my-blueprint.yaml"],
    ],
)
def test_a_bad_blueprint_file_reads_the_same_in_every_command(bad_copy: Path, args: list[str]) -> None:
    line = _line_of(bad_copy, "tensor_parallel: 3")
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith(
        "error: my-blueprint.yaml: blueprint 'tiny-cpu' (a copy that kept the catalog's name"
    )
    assert (
        lines[1] == f"  • compute.tensor_parallel (line {line}): tp 3 is not allowed on cpu; use one of [1]"
    )
    assert lines[-1] == "hint: fix the fields listed; `llmctl blueprints schema` documents every field"


def test_blueprints_validate_names_the_file_once_with_lines(bad_copy: Path) -> None:
    line = _line_of(bad_copy, "tensor_parallel: 3")
    result = run("blueprints", "validate", "./my-blueprint.yaml")
    assert result.exit_code == 2
    first, second = result.stdout.splitlines()[:2]
    assert first.count("my-blueprint.yaml") == 1  # was `./my-blueprint.yaml: my-blueprint.yaml: ...`
    assert f"compute.tensor_parallel (line {line})" in second
    assert (
        result.stderr.splitlines()[-1]
        == "hint: fix the fields listed; `llmctl blueprints schema` documents every field"
    )
    data = json.loads(run("validate", "-b", "./my-blueprint.yaml", "--json").stdout)
    assert data["problems"] == [
        {
            "path": "compute.tensor_parallel",
            "message": "tp 3 is not allowed on cpu; use one of [1]",
            "line": line,
        }
    ]


def test_a_yaml_syntax_error_points_at_its_line_and_lists_no_fields(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\n  bad: [\n")
    for args in (["blueprints", "validate", str(path)], ["plan", "-b", str(path)]):
        result = run(*args)
        assert result.exit_code == 2
        assert "not valid YAML at line 2" in result.output
        assert "fields" not in result.stderr  # there are none to fix
