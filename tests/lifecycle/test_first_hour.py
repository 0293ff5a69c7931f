"""Issue 26: a newcomer's first hour on a machine without AWS credentials or the pulumi CLI.

Each test runs the real CLI (Typer's runner) and asserts the output and the exit code."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    assert "compute.tensor_parallel (line " in result.stderr  # the field and its line in the file
    assert "): tp 7 is not allowed on inferentia2" in result.stderr
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
        (["down", "--target", "local", "-b", "llama2-inf2", "--yes"], 8),  # not recorded: not deployed
    ],
)
def test_one_code_per_meaning(args: list[str], code: int) -> None:
    a_stopped_local_server()
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert code in EXIT_CODES and "Traceback" not in result.output


def a_stopped_local_server() -> None:
    """A local server record of tiny-cpu whose process is gone (pid 0 is never alive): something
    `down --target local` has to take down, so it asks before it does."""
    from llmctl.serving.client.local import _record_path

    record = _record_path("dev", "tiny-cpu")
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"blueprint": "tiny-cpu", "pid": 0}))


def test_a_declined_prompt_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer.testing

    a_stopped_local_server()

    # the runner's stdin stands for a terminal where the user answers "n"
    monkeypatch.setattr(typer.testing._NamedTextIOWrapper, "isatty", lambda self: True)
    result = runner.invoke(app, ["down", "--target", "local"], input="n\n")
    assert result.exit_code == 0, result.output
    assert "nothing was changed" in result.stderr and "error" not in result.stderr


# ---- items 2 and 5: follow-ups find a local server; a second `up` with other flags says so --------


@pytest.fixture
def local_server(bare_machine: None, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A local server of tiny-cpu as `up --target local` records it: a live process (a sleeper, so
    `down` has something to stop) and a /healthz that answers, with no Ray behind it."""
    import http.server
    import threading

    from llmctl.state import Endpoint, save_endpoint, state_dir

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path.endswith("/healthz") else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    root = f"http://127.0.0.1:{port}"
    record = {
        "blueprint": "tiny-cpu",
        "stack": "dev",
        "pid": sleeper.pid,
        "port": port,
        "base_url": f"{root}/v1",
        "health_url": f"{root}/healthz",
        "model": "tiny",
        "model_path": str(tmp_path / "model"),
        "requested_model": None,
        "ray_dir": None,
        "log": str(tmp_path / "tiny-cpu.log"),
        "started": time.time(),
        "stop_grace_s": 5,
    }
    folder = state_dir() / "local" / "dev"
    folder.mkdir(parents=True)
    (folder / "tiny-cpu.json").write_text(json.dumps(record))
    save_endpoint(Endpoint("dev", "tiny-cpu", "local", record["base_url"], "tiny"))
    try:
        yield record
    finally:
        sleeper.kill()
        sleeper.wait()
        server.shutdown()


def test_follow_up_commands_find_the_local_server_without_being_told(local_server: dict[str, Any]) -> None:
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    assert f"local tiny-cpu: {local_server['base_url']} model tiny" in result.stdout
    assert "(healthy)" in result.stdout and "pulumi" not in result.output
    result = runner.invoke(app, ["stacks", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["project"], r["stack"], r["kind"]) for r in rows] == [("local/tiny-cpu", "dev", "local")]
    assert "Pulumi stacks not listed: the pulumi CLI is not installed" in result.stderr


def test_a_second_local_up_with_other_flags_says_what_differs(local_server: dict[str, Any]) -> None:
    port = local_server["port"]
    other = 8011 if port != 8011 else 8012
    args = ["up", "-b", "tiny-cpu", "--target", "local", "--yes"]
    result = runner.invoke(app, [*args, "--port", str(other), "--model", "other/model"])
    assert result.exit_code == 2, result.output
    assert f"it listens on port {port}, --port asks for {other}" in result.stderr
    assert "--model asks for other/model" in result.stderr
    assert "llmctl down --target local --blueprint tiny-cpu --stack dev" in result.stderr
    assert "done in" not in result.output
    same = runner.invoke(app, [*args, "--port", str(port)])  # the flags it runs with: nothing to say
    assert same.exit_code == 0, same.output
    assert "already running" in same.output or local_server["base_url"] in same.stdout


def test_hints_after_down_repeat_the_target_and_flags_used(local_server: dict[str, Any]) -> None:
    port = local_server["port"]
    up = runner.invoke(app, ["up", "-b", "tiny-cpu", "--target", "local", "--port", str(port), "--yes"])
    assert up.exit_code == 0, up.output
    down = runner.invoke(app, ["down", "--yes"])  # no --target: it finds the local server
    assert down.exit_code == 0, down.output
    assert "pulumi" not in down.output
    for command in (["chat", "-b", "tiny-cpu", "-p", "hi"], ["endpoint", "-b", "tiny-cpu"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 8, result.output
        assert f"run `llmctl up --blueprint tiny-cpu --target local --stack dev --port {port}` first" in (
            result.stderr
        )


# ---- items 3 and 10: one list style; one name per flag, old spellings kept hidden ------------------


@pytest.fixture
def bench_args(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What `llmctl bench` hands to the layer below (stops there: no endpoint is needed)."""
    from llmctl.errors import LlmctlError
    from llmctl.serving.client.bench import options as bench_options

    seen: list[dict[str, Any]] = []

    def capture(**kwargs: Any) -> None:
        seen.append(kwargs)
        raise LlmctlError("stop here")

    monkeypatch.setattr(bench_options, "bench_config", capture)
    return seen


@pytest.mark.parametrize(
    "flags",
    [["-c", "1", "-c", "4", "-c", "16"], ["--concurrency", "1,4,16"], ["-c", "1", "--concurrency", "4,16"]],
)
def test_list_flags_take_repeats_and_comma_lists_and_drop_nothing(
    bench_args: list[dict[str, Any]], flags: list[str]
) -> None:
    result = runner.invoke(app, ["bench", "-e", "http://a/v1,http://b/v1", "-e", "http://c/v1", *flags])
    assert result.exit_code == 1 and "stop here" in result.stderr
    assert bench_args[0]["concurrency"] == "1,4,16"
    assert bench_args[0]["endpoints"] == ["http://a/v1", "http://b/v1", "http://c/v1"]


def test_space_separated_values_name_the_two_list_styles() -> None:
    result = runner.invoke(app, ["bench", "-e", "http://127.0.0.1:9/v1", "--concurrency", "1", "4"])
    assert result.exit_code == 2
    assert "'4' is not a command" in result.stderr and "-c 1 -c 4" in result.stderr
    assert "-c 1,4" in result.stderr and "No such command" not in result.stderr


def test_plan_takes_blueprints_as_a_comma_list_too() -> None:
    result = runner.invoke(app, ["plan", "--offline", "-b", "tiny-cpu,llama2-inf2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["blueprints"] == ["llama2-inf2", "tiny-cpu"]


def test_bench_and_chat_share_max_tokens_and_the_old_name_still_works(
    bench_args: list[dict[str, Any]],
) -> None:
    for flag in ("--max-tokens", "--max-output-tokens"):
        result = runner.invoke(app, ["bench", "-e", "http://a/v1", flag, "7"])
        assert result.exit_code == 1 and "stop here" in result.stderr
    assert [seen["max_output_tokens"] for seen in bench_args] == [7, 7]
    shown = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--max-tokens" in shown and "--max-output-tokens" not in shown  # the old name is hidden
    assert "--max-tokens" in runner.invoke(app, ["chat", "--help"], env={"COLUMNS": "200"}).stdout


def test_debug_works_after_the_subcommand_too() -> None:
    for args in (["--debug", "endpoint", "-b", "tiny-cpu"], ["endpoint", "-b", "tiny-cpu", "--debug"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 8, result.output
        assert "Traceback" in result.stderr and "is not deployed" in result.stderr


def test_preview_takes_json_like_every_other_command(bare_machine: None) -> None:
    result = runner.invoke(app, ["preview", "-b", "tiny-cpu", "--json"])
    assert result.exit_code == 3  # no pulumi here; the error is JSON on stdout, as with --format json
    assert json.loads(result.stdout)["error"] == "PrerequisiteError"


# ---- the smaller items ------------------------------------------------------------------------------


def test_up_on_the_tiny_model_says_its_answers_are_random(local_server: dict[str, Any]) -> None:
    from llmctl.serving.client.tiny import MARKER

    model = Path(local_server["model_path"])
    model.mkdir()
    (model / MARKER).write_text("{}")
    result = runner.invoke(app, ["up", "-b", "tiny-cpu", "--target", "local", "--yes"])
    assert result.exit_code == 0, result.output
    assert "note: the model is llmctl's tiny one with random weights" in result.stdout


def test_downs_prompt_names_the_blueprints(
    local_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer.testing

    monkeypatch.setattr(typer.testing._NamedTextIOWrapper, "isatty", lambda self: True)
    result = runner.invoke(app, ["down"], input="n\n")
    assert result.exit_code == 0, result.output
    assert "local serving of tiny-cpu in stack dev" in result.stderr
    assert "every blueprint" not in result.output


def test_chat_shows_control_bytes_from_the_model_as_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmctl.serving.client import chat as chat_module

    class Session:
        model = "m"
        base_url = "http://x/v1"
        last_usage = None

        def send(self, text: str) -> Iterator[str]:
            yield "red \x1b[31mtext\x07\r"
            yield "\nnext\tline"

        def close(self) -> None:
            pass

    monkeypatch.setattr(chat_module, "open_session", lambda *args, **kwargs: Session())
    result = runner.invoke(app, ["chat", "-e", "http://x/v1", "--prompt", "hi"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "red \\x1b[31mtext\\x07\\x0d\nnext\tline\n"


def test_blueprints_show_is_yaml_throughout() -> None:
    result = runner.invoke(app, ["blueprints", "show", "tiny-cpu"])
    assert result.exit_code == 0
    assert "gated_model: false" in result.stdout
    assert "False" not in result.stdout and "True" not in result.stdout


def test_plan_prints_the_cost_in_cents() -> None:
    result = runner.invoke(app, ["plan", "--offline", "-b", "tiny-cpu"])
    assert result.exit_code == 0, result.output
    assert re.search(
        r"^cost: \$\d+\.\d\d per hour on demand: platform \$\d+\.\d\d \+ serving nodes \$\d+\.\d\d",
        result.stdout,
        re.M,
    ), result.stdout


def test_status_takes_workload_like_the_other_commands(local_server: dict[str, Any]) -> None:
    from llmctl.infra.lifecycle.status import only_workload

    data = {
        "stack": "ci",
        "target": "eks",
        "stacks": [{"stack": "ci"}, {"stack": "ci.pr-1"}, {"stack": "ci.pr-2"}],
        "workloads": [{"workload": "pr-1"}, {"workload": "pr-2"}, {"workload": None}],
        "endpoints": [{"workload": "pr-1"}, {"workload": None}],
        "cluster": {"cluster_name": "llmctl-ci"},
    }
    narrowed = only_workload(data, "pr-1")
    assert [row["stack"] for row in narrowed["stacks"]] == ["ci", "ci.pr-1"]  # the platform and its own
    assert narrowed["workloads"] == [{"workload": "pr-1"}] and narrowed["endpoints"] == [{"workload": "pr-1"}]
    assert narrowed["cluster"] == data["cluster"]
    result = runner.invoke(app, ["status", "--workload", "pr-1"])  # the stack runs locally
    assert result.exit_code == 2 and "--workload does not apply to --target local" in result.stderr
    result = runner.invoke(app, ["status", "--workload", "PR_1"])
    assert result.exit_code == 2 and "invalid workload name 'PR_1'" in result.stderr


def test_sweep_takes_stack_like_the_other_commands(bare_machine: None) -> None:
    from llmctl.infra.aws.sweep import cluster_to_sweep

    assert cluster_to_sweep(None, "ci") == "llmctl-ci"
    assert cluster_to_sweep("my-cluster", None) == "my-cluster"
    both = runner.invoke(app, ["sweep", "--stack", "ci", "--cluster", "x", "--dry-run"])
    assert both.exit_code == 2 and "--cluster and --stack exclude each other" in both.stderr
    neither = runner.invoke(app, ["sweep", "--dry-run"])
    assert neither.exit_code == 2 and "pass --stack ENV" in neither.stderr
    by_stack = runner.invoke(app, ["sweep", "--stack", "ci", "--dry-run", "--region", "us-west-2"])
    assert by_stack.exit_code == 3 and "no AWS credentials" in by_stack.stderr  # on to AWS with llmctl-ci


def test_blueprints_validate_names_the_file_once_and_the_line(tmp_path: Path) -> None:
    path = bad_blueprint(tmp_path)
    line = 1 + path.read_text().splitlines().index("  tensor_parallel: 7")
    result = runner.invoke(app, ["blueprints", "validate", str(path)])
    assert result.exit_code == 2
    assert result.stdout.count(str(path)) == 1
    assert f"compute.tensor_parallel (line {line}): tp 7 is not allowed on inferentia2" in result.stdout
    data = json.loads(runner.invoke(app, ["blueprints", "validate", str(path), "--json"]).stdout)
    assert data["results"][0]["problems"][0]["line"] == line


def test_cost_takes_throughputs_repeated_or_as_a_comma_list_and_names_a_bad_one() -> None:
    def rows(*args: str) -> list[float]:
        result = runner.invoke(app, ["cost", "--blueprint", "tiny-cpu", *args, "--json"])
        assert result.exit_code == 0, result.output
        return [row["throughput_tokens_per_s"] for row in json.loads(result.stdout)["per_1k_tokens"]]

    assert rows("-t", "100", "-t", "250,500") == rows("-t", "100,250,500") == [100.0, 250.0, 500.0]
    bad = runner.invoke(app, ["cost", "--blueprint", "tiny-cpu", "-t", "100,fast"])
    assert bad.exit_code == 2 and "--throughput 'fast' is not a number" in bad.output
    low = runner.invoke(app, ["cost", "--blueprint", "tiny-cpu", "-t", "0"])
    assert low.exit_code == 2 and "--throughput 0 is out of range" in low.output
