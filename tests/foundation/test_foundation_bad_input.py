"""Bad and edge-case input across the CLI: a clear message, a non-zero exit, nothing half-made.

Each test reproduces one problem found by trying to break the commands (tracebacks, invalid JSON,
leaked processes, files touched outside the state dir) and checks the fixed behaviour.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_foundation_bad_input")


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def json_out(result: Any) -> dict[str, Any]:
    """stdout must be exactly one strict JSON document."""
    data = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"non-JSON literal {name}"))
    assert isinstance(data, dict)
    return data


class _NotAnLlm(BaseHTTPRequestHandler):
    """Lists a model but fails every completion, like a proxy in front of the wrong service."""

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(501)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def not_an_llm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotAnLlm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


# --- output and the error boundary ---------------------------------------------------------------


def test_error_hint_with_brackets_is_printed_literally() -> None:
    result = run("bench", "--endpoint", "http://127.0.0.1:1/v1", "--slo", "ttft=abc")
    assert result.exit_code == 2
    assert "name=value[ms|s]" in result.stderr  # was swallowed as Rich markup


def test_usage_error_with_json_still_prints_json() -> None:
    result = run("size", "llama-2-7b", "--context", "0", "--json")
    assert result.exit_code == 2
    data = json_out(result)
    assert data["error"] == "UsageError" and "--context" in data["message"]
    assert "llmctl size --help" in data["hint"]
    # one line and a hint on stderr, like every other error (not Click's three-line usage block)
    assert result.stderr.splitlines() == [f"error: {data['message']}", f"hint: {data['hint']}"]


@pytest.mark.parametrize(
    "args",
    [["size", "llama-2-7b", "--context", "0"], ["bogus"], ["--bogus"], ["up", "--bogus"], ["bench", "-c"]],
)
def test_usage_errors_are_one_line_and_a_hint(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: run `llmctl")
    assert "Usage:" not in result.output


def test_usage_error_without_json_keeps_stdout_empty() -> None:
    result = run("blueprints", "validate", "--bogus")
    assert result.exit_code == 2 and result.stdout == ""


def test_emit_json_writes_strict_json_for_non_finite_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    from llmctl.cli.output import emit_json

    emit_json({"a": float("inf"), "b": [float("nan"), 1.5], "c": {"d": -float("inf")}})
    assert json.loads(capsys.readouterr().out) == {"a": None, "b": [None, 1.5], "c": {"d": None}}


@pytest.mark.parametrize(
    "args",
    [
        ["cost", "-b", "tiny-cpu", "--node-price", "inf", "--json"],
        # a list flag in the one list style (cli/options.number_list): checked by llmctl, not Click
        ["cost", "-b", "tiny-cpu", "-t", "inf", "--json"],
        ["size", "llama-2-7b", "--batch", "99999999999999999999", "--json"],
        ["size", "llama-2-7b", "--context", "99999999999", "--json"],
    ],
)
def test_absurd_numbers_are_rejected_not_computed(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert json_out(result)["error"] == ("BadInput" if "-t" in args else "UsageError")


# --- blueprints ----------------------------------------------------------------------------------


def test_blueprint_path_that_is_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "bp.yaml"
    folder.mkdir()
    result = run("blueprints", "show", str(folder), "--json")
    assert result.exit_code == 2
    assert "is a directory" in json_out(result)["message"]


def test_directory_named_like_a_catalog_blueprint_does_not_shadow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tiny-cpu").mkdir()  # e.g. left by `llmctl render --out tiny-cpu`
    monkeypatch.chdir(tmp_path)
    result = run("blueprints", "show", "tiny-cpu", "--json")
    assert result.exit_code == 0, result.stderr
    assert json_out(result)["blueprint"]["name"] == "tiny-cpu"


@pytest.mark.parametrize("target", ["dir", "under-file"])
def test_schema_out_to_unwritable_path(tmp_path: Path, target: str) -> None:
    (tmp_path / "file").write_text("x")
    out = tmp_path if target == "dir" else tmp_path / "file" / "schema.json"
    result = run("blueprints", "schema", "--out", str(out), "--json")
    assert result.exit_code == 2
    assert "cannot write the schema" in json_out(result)["message"]


def test_schema_out_writes_and_reports_json(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = run("blueprints", "schema", "--out", str(out), "--json")
    assert result.exit_code == 0
    assert json_out(result) == {"path": str(out)}
    assert "properties" in json.loads(out.read_text())


@pytest.mark.parametrize(
    ("command", "flag", "value", "needle"),
    [
        ("render", "--stack", "has space", "invalid cluster name"),
        ("render", "--region", "mars", "not an AWS region"),
        ("validate", "--stack", "a/b", "invalid cluster name"),
        ("validate", "--region", "us west", "not an AWS region"),
    ],
)
def test_render_and_validate_reject_bad_stack_and_region(
    command: str, flag: str, value: str, needle: str
) -> None:
    result = run(command, "-b", "tiny-cpu", flag, value, "--json")
    assert result.exit_code == 2
    assert needle in json_out(result)["problems"][0]["message"]


def test_bad_region_is_named_before_any_aws_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "xx")
    result = run("sweep", "--cluster", "c", "--json")
    assert result.exit_code == 2  # bad input, not a missing prerequisite
    data = json_out(result)
    assert "'xx' is not an AWS region" in data["message"] and "--region" in data["hint"]


# --- models, local target and the endpoint registry ----------------------------------------------


def test_models_tiny_into_a_file_or_below_one(tmp_path: Path) -> None:
    """Bad input, exit 2 (issue 54 item 2: it was 6, "a serving app or the local target failed")."""
    file = tmp_path / "file"
    file.write_text("x")
    result = run("models", "tiny", str(file), "--json")
    assert result.exit_code == 2 and "is a file" in json_out(result)["message"]
    result = run("models", "tiny", str(file / "sub"))
    assert result.exit_code == 2
    assert "cannot create" in result.stderr and "Traceback" not in result.stderr
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    result = run("models", "tiny", str(folder), "--json")
    assert result.exit_code == 2 and "not an empty directory" in json_out(result)["message"]


@pytest.mark.parametrize(
    ("flags", "message", "hint"),
    [
        (["--heads", "4", "--kv-heads", "3"], "cannot share 3 key/value heads", "--kv-heads a divisor"),
        (["--layers", "0"], "--layers must be at least 1", "e.g. --layers 2"),  # its hint named heads
        (["--head-dim", "0"], "--head-dim must be at least 1", "e.g. --head-dim 16"),
        (["--tensor-parallel", "3"], "tensor_parallel 3 must divide", "--heads 24"),
    ],
)
def test_models_tiny_bad_shape_is_bad_input(
    tmp_path: Path, flags: list[str], message: str, hint: str
) -> None:
    result = run("models", "tiny", str(tmp_path / "m"), *flags, "--json")
    assert result.exit_code == 2, result.output
    data = json_out(result)
    assert data["error"] == "BadInput" and message in data["message"] and hint in data["hint"]
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("target", ["file", "under-file"])
def test_render_out_to_unwritable_place_is_bad_input(tmp_path: Path, target: str) -> None:
    """Issue 54 item 1: `render --out` that cannot be written exits 2 like `blueprints schema --out`
    and `bench --out` (it exited 1, the code of a failed verdict)."""
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" if target == "file" else tmp_path / "file" / "manifests"
    result = run("render", "-b", "tiny-cpu", "--out", str(out), "--json")
    assert result.exit_code == 2, result.output
    data = json_out(result)
    assert data["error"] == "BadInput" and "cannot write manifests" in data["message"]


def test_local_up_rejects_a_bad_stack_before_starting_anything(tmp_path: Path) -> None:
    state = Path(os.environ["LLMCTL_STATE_DIR"])
    model = tmp_path / "model"
    model.mkdir()
    result = run(
        "up", "-b", "tiny-cpu", "--target", "local", "--model", str(model), "--stack", "a b", "--yes"
    )
    assert result.exit_code == 2
    assert "invalid stack name 'a b'" in result.stderr
    assert not (state / "local").exists()  # no record, no runner (it used to start, then fail)


def test_local_down_cannot_reach_outside_the_state_dir(tmp_path: Path) -> None:
    state = Path(os.environ["LLMCTL_STATE_DIR"])
    victim = state.parent / "victim.json"
    victim.write_text(json.dumps({"pid": 0, "blueprint": "x"}))
    result = run("down", "--target", "local", "--stack", "../..", "--yes", "--json")
    assert result.exit_code == 2
    assert "invalid stack name" in json_out(result)["message"]
    assert victim.exists()


def test_damaged_endpoint_record_is_a_clear_error() -> None:
    from llmctl.state import state_dir

    folder = state_dir() / "endpoints" / "dev"
    folder.mkdir(parents=True)
    (folder / "tiny-cpu.json").write_text("{bad")
    result = run("chat", "-b", "tiny-cpu", "--prompt", "hi", "--json")
    assert result.exit_code == 1
    data = json_out(result)
    assert "is damaged" in data["message"] and "delete" in data["hint"]
    (folder / "tiny-cpu.json").write_text('{"foo": 1}')
    result = run("status", "--target", "local")
    assert result.exit_code == 1 and "is damaged" in result.stderr


# --- bench ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "[1, 2]",
        '{"kind": "sweep", "levels": [1]}',
        '{"metrics": 5}',
        '{"kind": "sweep", "levels": [{"label": "c1", "ttft_s_p50": "x"}]}',
    ],
)
def test_bench_compare_malformed_summaries(tmp_path: Path, content: str) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(content)
    result = run("bench", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    assert result.exit_code == 2
    assert "is not an llmctl bench summary" in json_out(result)["message"]


def test_bench_out_below_a_file(tmp_path: Path, not_an_llm: str) -> None:
    (tmp_path / "file").write_text("x")
    result = run(
        "bench", "-e", not_an_llm, "-n", "1", "--warmup", "0", "--out", str(tmp_path / "file" / "r"), "--json"
    )
    assert result.exit_code == 2
    assert "cannot write results" in json_out(result)["message"]


def test_bench_where_every_request_fails_exits_non_zero(tmp_path: Path, not_an_llm: str) -> None:
    out = tmp_path / "results"
    result = run(
        "bench", "-e", not_an_llm, "-n", "2", "--warmup", "0", "--no-plots", "--out", str(out), "--json"
    )
    assert result.exit_code == 7  # EndpointError; it used to exit 0 with a summary of nothing
    data = json_out(result)
    assert data["error"] == "EndpointError" and "2 x http_501" in data["message"]
    assert (out / "requests.json").exists()  # the evidence is kept


# --- issue 54 item 1, the rest of it: bad input is 2 whoever finds it ------------------------------


def test_a_stack_name_ecr_cannot_take_is_bad_input() -> None:
    """`images build --stack Ab` exited 1 (a failed verdict) for a name the user gave."""
    result = run("images", "build", "-b", "tiny-cpu", "--stack", "Ab", "--json")
    assert result.exit_code == 2, result.output
    data = json_out(result)
    assert data["error"] == "BadInput" and "cannot be part of an ECR repository name" in data["message"]


def test_an_existing_cluster_without_its_files_is_bad_input(tmp_path: Path) -> None:
    """`--target kubeconfig` without --pools, or with a --kubeconfig that does not exist: exit 2."""
    import yaml

    from llmctl.errors import BadInput
    from llmctl.infra.workload.config import PlatformFacts

    with pytest.raises(BadInput, match="needs --pools FILE"):
        PlatformFacts.for_existing_cluster(None)
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump({"pools": [{"name": "cpu", "instance_types": ["m5.xlarge"]}]}))
    with pytest.raises(BadInput, match="does not exist") as info:
        PlatformFacts.for_existing_cluster(pools, kubeconfig=tmp_path / "none")
    assert info.value.exit_code == 2
