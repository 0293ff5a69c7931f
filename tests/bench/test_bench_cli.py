"""`llmctl bench`, `llmctl bench compare` and `llmctl chat` through the real CLI app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.state import Endpoint, save_endpoint

runner = CliRunner()

SMALL = [
    "--mean-input-tokens",
    "40",
    "--mean-output-tokens",
    "8",
    "--stddev-output-tokens",
    "2",
    "--warmup",
    "1",
]


def _bench(args: list[str]) -> Any:
    return runner.invoke(app, ["bench", *args], catch_exceptions=False)


def test_bench_sweep_writes_results_llmperf_keys_and_plots(fake: Any, tmp_path: Path) -> None:
    url = fake(ttft=0.01, tpot=0.002)
    out = tmp_path / "run"
    result = _bench(
        ["-e", url, "-c", "1,4", "-n", "8", *SMALL, "--slo", "ttft=10s", "-o", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sweep"]["kind"] == "sweep"
    assert [level["label"] for level in data["sweep"]["levels"]] == ["c1", "c4"]
    summary = json.loads((out / "c4" / "summary.json").read_text())
    for key in (
        "results_ttft_s_quantiles_p50",
        "results_inter_token_latency_s_mean",
        "results_request_output_throughput_token_per_s_quantiles_p90",
        "results_number_output_tokens_mean",
        "mean_output_throughput_token_per_s",
        "num_completed_requests_per_min",
    ):
        assert summary[key] is not None, key
    assert summary["num_concurrent_requests"] == 4
    assert summary["counts"]["completed"] == 8
    assert summary["goodput"]["requests_meeting_slo"] == 8  # a 10 s limit: met even on a busy machine
    assert summary["definitions"]["tpot_s"].startswith("time per output token")
    requests = json.loads((out / "c4" / "requests.json").read_text())
    assert len(requests) == 8
    events = [json.loads(line) for line in (out / "c4" / "events.jsonl").read_text().splitlines()]
    chunks = [e for e in events if e["event"] == "chunk"]
    assert len(chunks) == sum(r["chunks"] for r in requests) + sum(
        1 for e in events if e["event"] == "chunk" and e["req"] not in {r["index"] for r in requests}
    )
    for name in (
        "latency_vs_load.png",
        "throughput_vs_load.png",
        "c1/ttft_hist.png",
        "c4/tokens_per_s_hist.png",
    ):
        assert (out / name).read_bytes()[:4] == b"\x89PNG", name
    assert list((out / "c1").glob("fake-model_40_8_summary.json"))

    compare = runner.invoke(app, ["bench", "compare", str(out), str(out), "--json"])
    assert compare.exit_code == 0, compare.output
    levels = json.loads(compare.stdout)["levels"]
    assert [lv["level"] for lv in levels] == ["c1", "c4"]
    ttft = next(r for r in levels[0]["rows"] if r["metric"] == "ttft_s_p50")
    assert ttft["change"] == 0.0


def test_bench_table_output_and_seed_flag_aliases(fake: Any, tmp_path: Path) -> None:
    url = fake(ttft=0.005, tpot=0.001)
    result = _bench(
        [
            "-e",
            url,
            "--num-concurrent-requests",
            "2",
            "--max-num-completed-requests",
            "4",
            "--results-dir",
            str(tmp_path / "r"),
            "--llm-api",
            "openai",
            "--additional-sampling-params",
            "{}",
            "--no-plots",
            *SMALL,
        ]
    )
    assert result.exit_code == 0, result.output
    assert "TTFT (ms)" in result.stdout and "add --explain" in result.stdout  # issue 26: once, on request
    assert "definitions\n" not in result.stdout
    assert "achieved rate not shown (4 requests" in result.stdout  # 4 requests: no rate
    # the server's usage gave every count: no note about approximate counts (issue 26)
    assert "output token counts from usage: 4" in result.stdout
    assert "approximate token counts" not in result.stdout
    assert (tmp_path / "r" / "summary.json").exists()
    # where the counter did count (here: the prompts), its note says of which counts
    from rich.console import Console

    from llmctl.serving.client.bench import report

    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    summary["tokens"]["input_source"] = {"tokenizer": 4}
    summary["tokens"]["note"] = "approximate token counts: one token per word"
    console = Console(record=True, width=200)
    report.render_level(console, summary, definitions=False)
    assert "note (input counts): approximate token counts" in console.export_text()


def test_bench_compare_two_single_runs(fake: Any, tmp_path: Path) -> None:
    url = fake(ttft=0.005, tpot=0.001)
    for name in ("a", "b"):
        assert (
            _bench(
                ["-e", url, "-n", "3", *SMALL, "--no-plots", "-o", str(tmp_path / name), "--json"]
            ).exit_code
            == 0
        )
    result = runner.invoke(app, ["bench", "compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "TTFT p50 (ms)" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-c", "abc"], "is not a whole number"),
        (["-c", "0"], "must be positive"),
        (["--slo", "ttfx=1"], "did you mean 'ttft'"),
        (["--rate", "2", "-c", "4"], "exclude each other"),
        (["--arrival", "poison", "--rate", "1"], "did you mean 'poisson'"),
        (["--extra-body", "{nope"], "--extra-body is not JSON"),
        # the pair is refused before anything looks for the (undeployed) blueprint
        (["--blueprint", "never-deployed"], "give --endpoint or --blueprint, not both"),
    ],
)
def test_bench_rejects_bad_input_without_traceback(fake: Any, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["bench", "-e", fake(), *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_bench_unreachable_endpoint_and_bad_url() -> None:
    result = runner.invoke(app, ["bench", "-e", "http://127.0.0.1:9/v1", "-n", "1"])
    assert result.exit_code == 7 and "cannot reach" in result.output
    result = runner.invoke(app, ["bench", "-e", "ftp://example/v1"])
    assert result.exit_code == 7 and "not an http(s) endpoint" in result.output


def test_bench_compare_rejects_empty_folders(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    result = runner.invoke(app, ["bench", "compare", str(tmp_path / "a"), str(tmp_path / "a")])
    assert result.exit_code == 2 and "holds no summary.json" in result.output


def test_bench_and_chat_resolve_a_deployed_blueprint(fake: Any, tmp_path: Path, state_dir: Path) -> None:
    url = fake(ttft=0.001, tpot=0.001)
    save_endpoint(Endpoint(stack="dev", blueprint="tiny", target="local", base_url=url, model="fake-model"))
    result = _bench(
        ["--blueprint", "tiny", "-n", "2", *SMALL, "--no-plots", "-o", str(tmp_path / "o"), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["endpoints"] == [url]
    result = runner.invoke(app, ["chat", "--blueprint", "tiny", "-p", "hi", "--max-tokens", "3", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"] == "fake-model" and len(data["response"].split()) == 3
    assert data["usage"]["completion_tokens"] == 3
    result = runner.invoke(app, ["bench", "--blueprint", "tiny-cpu", "-n", "1"])
    assert result.exit_code == 8 and "is not deployed" in result.output
    result = runner.invoke(app, ["bench", "--blueprint", "nope", "-n", "1"])  # known nowhere: a typo
    assert result.exit_code == 2 and "unknown blueprint 'nope'" in result.output


def test_bench_and_chat_take_a_named_workload(fake: Any, tmp_path: Path, state_dir: Path) -> None:
    url = fake(ttft=0.001, tpot=0.001)
    save_endpoint(
        Endpoint(stack="ci", blueprint="tiny", target="eks", base_url=url, model="pr-model", workload="pr-4")
    )
    args = ["--blueprint", "tiny", "--stack", "ci", "--workload", "pr-4"]
    result = runner.invoke(app, ["chat", *args, "-p", "hi", "--max-tokens", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "pr-model"
    result = _bench([*args, "-n", "2", *SMALL, "--no-plots", "-o", str(tmp_path / "o"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["endpoints"] == [url]
    result = runner.invoke(app, ["chat", "--blueprint", "tiny", "--stack", "ci", "-p", "hi"])
    assert result.exit_code == 8 and "--workload pr-4" in result.output  # names the workload there


def test_chat_one_shot_streams_to_stdout(fake: Any) -> None:
    url = fake(ttft=0.001, tpot=0.001)
    result = runner.invoke(app, ["chat", "-e", url, "--prompt", "hello", "--max-tokens", "4"])
    assert result.exit_code == 0, result.output
    assert len(result.stdout.split()) == 4


def test_chat_interactive_history_reset_and_exit(fake: Any) -> None:
    url = fake(ttft=0.001, tpot=0.001)
    script = "hello\n/history\n/histry\n/reset\n/history\n/system be brief\n/exit\n"
    result = runner.invoke(app, ["chat", "-e", url, "--max-tokens", "2"], input=script)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "user: hello" in out
    assert "did you mean '/history'" in out
    assert "conversation reset" in out
    assert out.count("user: hello") == 1  # the history was empty after /reset


def test_fake_server_speaks_the_openai_protocol(fake: Any) -> None:
    import openai

    url = fake(ttft=0.001, tpot=0.001)
    client = openai.OpenAI(base_url=url, api_key="none", http_client=httpx.Client())
    stream = client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "one two three"}],
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 5
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 5 and chunks[-1].usage.prompt_tokens == 3
    assert [m.id for m in client.models.list()] == ["fake-model"]


def test_bench_help_shows_whole_flag_names_at_80_columns() -> None:
    result = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    for flag in (
        "--endpoint",
        "--concurrency",
        "--max-concurrency",
        "--requests",
        "--warmup",
        "--mean-input-tokens",
        "--stddev-output-tokens",
        "--max-tokens",  # issue 26: chat's name (--max-output-tokens is a hidden alias)
        "--no-fixed-output",
        "--no-plots",
    ):
        assert flag in result.output, flag


# the process as the console script runs it, reporting at exit what its collector froze, whether
# Rich or an HTTP client library was imported, and how many TLS contexts the bench client made
_PROCESS = """
import atexit, gc, sys
def report():
    from llmctl.serving.client.bench.wire import _tls_context
    libraries = any(name in sys.modules for name in ("aiohttp", "httpx", "httpcore"))
    made = _tls_context.cache_info().currsize
    print(gc.get_freeze_count(), len(gc.get_objects()), "rich" in sys.modules, libraries, made, file=sys.stderr)
atexit.register(report)
from llmctl.cli.app import main
before = gc.get_freeze_count()
sys.argv = ["llmctl", *sys.argv[1:]]
print(before, file=sys.stderr)
main()
"""


def test_a_json_run_imports_no_rich_and_its_process_freezes_what_it_imported(
    fake: Any, tmp_path: Path
) -> None:
    """Issue 29, the whole CLI's CPU: `--json` prints no table, so Rich (about 40 ms of CPU) stays
    unimported; and the console script freezes its modules, so that no full collection during the
    run walks them, and everything once the command is done, so that the interpreter's collection
    at exit walks nothing (together about 0.2-0.3 CPU s at c64). The client is wire.py: no HTTP
    client library is imported, and an http:// run loads no CA certificates."""
    args = ["bench", "-e", fake(ttft=0.001, tpot=0.001), "-c", "2", "-n", "4", *SMALL, "--json", "--no-plots"]
    done = subprocess.run(
        [sys.executable, "-c", _PROCESS, *args, "-o", str(tmp_path / "out")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["counts"]["completed"] == 4
    before, (frozen, unfrozen, rich, libraries, tls) = int(done.stderr.split()[0]), done.stderr.split()[-5:]
    assert before == 0  # importing the app alone leaves the collector as it was
    assert int(frozen) > 10_000 and rich == "False", done.stderr
    assert (libraries, tls) == ("False", "0"), done.stderr
    # at exit the command's own imports and objects are frozen too: nothing left for the
    # interpreter's last collection to walk but what the exit hooks made
    assert int(unfrozen) < 1_000, done.stderr
