"""`llmctl bench` on more than one event loop (serving/client/bench/loops.py): correctness, not timing.

The loops' merged results must be what one loop gives: the same requests (indices, prompts,
lengths), the same token totals, the same files with the same keys. How much more accurate several
loops are is measured by ``make bench`` (benchmarks/bench_accuracy.py), never asserted here.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.serving.client.bench import loops as loops_module
from llmctl.serving.client.bench.loadgen import LoadPlan
from llmctl.serving.client.bench.loops import LOOP_SLOTS, auto_loops, is_loopback, loops_for, share
from llmctl.serving.client.bench.testserver import timeline

runner = CliRunner()

ARGS = ["--mean-input-tokens", "40", "--stddev-input-tokens", "6", "--mean-output-tokens", "12",
        "--stddev-output-tokens", "4", "--warmup", "3", "--seed", "7", "--no-plots", "--json"]  # fmt: skip


def _bench(url: str, out: Path, *extra: str) -> dict[str, Any]:
    result = runner.invoke(app, ["bench", "-e", url, "-c", "6", "-n", "29", "-o", str(out), *ARGS, *extra])
    assert result.exit_code == 0, result.output
    return {
        "summary": json.loads((out / "summary.json").read_text()),
        "requests": json.loads((out / "requests.json").read_text()),
        "llmperf": json.loads(next(out.glob("*_individual_responses.json")).read_text()),
        "files": sorted(p.name for p in out.iterdir()),
        "served": sorted(stream[4] for stream in timeline(url)),
    }


def _shape(value: Any) -> Any:
    """The keys of a JSON value, recursively (lists by their first element)."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value and isinstance(value[0], (dict, list)) else "list"
    return "value"


def test_three_loops_send_the_requests_of_one_and_write_the_same_files(fake: Any, tmp_path: Path) -> None:
    url = fake(ttft=0.005, tpot=0.001)
    one = _bench(url, tmp_path / "one", "--loops", "1")
    url = fake(ttft=0.005, tpot=0.001)  # clears the server's timeline
    three = _bench(url, tmp_path / "three", "--loops", "3")
    assert one["summary"]["load"]["loops"] == 1 and one["summary"]["load"]["worker_peak_rss_mib"] == []
    assert three["summary"]["load"]["loops"] == 3
    assert len(three["summary"]["load"]["worker_peak_rss_mib"]) == 3
    assert all(peak > 0 for peak in three["summary"]["load"]["worker_peak_rss_mib"])
    # the same requests: warm-up 0-2, window 3-31, each sent once, with the same prompt and lengths
    assert one["served"] == three["served"] == list(range(32))
    keep = ("index", "number_input_tokens", "max_tokens", "number_output_tokens", "output_token_source")
    assert [{k: r[k] for k in keep} for r in three["requests"]] == [
        {k: r[k] for k in keep} for r in one["requests"]
    ]
    assert [r["index"] for r in three["requests"]] == list(range(3, 32))
    assert all(r["error_code"] is None for r in three["requests"])
    for key in ("counts", "tokens"):
        assert three["summary"][key] == one["summary"][key], key
    assert three["summary"]["results_num_completed_requests"] == 29
    for name in ("number_input_tokens", "number_output_tokens"):
        total = sum(r[name] for r in one["llmperf"])
        assert sum(r[name] for r in three["llmperf"]) == total
    # the same files with the same keys (the figures differ from run to run, the shape does not)
    assert three["files"] == one["files"]
    assert _shape(three["summary"]) == _shape(one["summary"])
    assert _shape(three["requests"]) == _shape(one["requests"])
    assert _shape(three["llmperf"]) == _shape(one["llmperf"])
    # every loop's window opened before the first request was written (the common start)
    assert three["summary"]["load"]["lead_in_s"] >= 0


@pytest.mark.parametrize(
    ("concurrency", "cpus", "loops"),
    [(1, 2, 1), (16, 2, 1), (LOOP_SLOTS, 2, 1), (2 * LOOP_SLOTS - 1, 2, 1), (64, 2, 2), (256, 2, 2),
     (64, 1, 1), (256, 8, 8), (100, 8, 3)],
)  # fmt: skip
def test_the_rule_picks_one_loop_per_full_loop_slots_up_to_the_cpus(
    concurrency: int, cpus: int, loops: int
) -> None:
    assert auto_loops(concurrency, cpus=cpus) == loops


@pytest.mark.parametrize(
    ("concurrency", "cpus", "loops"),
    [(64, 2, 1), (128, 2, 1), (64, 3, 2), (256, 8, 7), (16, 8, 1), (64, 1, 1)],
)
def test_a_server_on_this_machine_keeps_a_cpu(concurrency: int, cpus: int, loops: int) -> None:
    assert auto_loops(concurrency, cpus=cpus, local_server=True) == loops


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:8000/v1", True),
        ("http://[::1]:8000/v1", True),
        ("127.0.0.5:8000", True),
        ("http://10.0.0.7:8000/v1", False),
        ("https://api.example.com/v1", False),
        ("http://localhost.example.com/v1", False),
    ],
)
def test_loopback_endpoints_are_told_apart(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_the_rule_leaves_a_cpu_only_when_every_endpoint_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops_module, "usable_cpus", lambda: 2)
    local = LoadPlan(endpoints=["http://127.0.0.1:8000/v1"], model="m", concurrency=64, requests=256)
    remote = LoadPlan(endpoints=["http://10.0.0.7:8000/v1"], model="m", concurrency=64, requests=256)
    both = LoadPlan(
        endpoints=["http://127.0.0.1:8000/v1", "http://10.0.0.7:8000/v1"],
        model="m",
        concurrency=64,
        requests=256,
    )
    assert (loops_for(local, None), loops_for(remote, None), loops_for(both, None)) == (1, 2, 2)
    assert loops_for(local, 2) == 2  # --loops still decides


def test_the_override_and_the_limits_of_the_loops() -> None:
    plan = LoadPlan(endpoints=["http://x/v1"], model="m", concurrency=4, requests=3)
    assert loops_for(plan, 8) == 3  # no loop without a slot and a measured request
    assert loops_for(LoadPlan(endpoints=["http://x/v1"], model="m", concurrency=4, duration=5), 8) == 4
    assert loops_for(LoadPlan(endpoints=["http://x/v1"], model="m", rate=5.0), 4) == 1  # an open loop
    assert loops_for(LoadPlan(endpoints=["http://x/v1"], model="m", concurrency=64, requests=256), 1) == 1
    assert [share(29, 3, k) for k in range(3)] == [10, 10, 9]
    assert sum(share(7, 4, k) for k in range(4)) == 7


def test_loops_with_an_open_loop_are_refused(fake: Any) -> None:
    result = runner.invoke(app, ["bench", "-e", fake(), "--rate", "2", "--loops", "2"])
    assert result.exit_code != 0
    assert "open loop (--rate) runs on one" in result.output
    assert "Traceback" not in result.output


def test_a_worker_that_dies_fails_the_run_with_a_clear_error(
    fake: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = loops_module.run_load

    async def dies_in_the_second_loop(plan: LoadPlan, prompts: Any, **kwargs: Any) -> Any:
        if kwargs.get("stride", 1) > 1 and kwargs["first_index"] % kwargs["stride"] == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return await real(plan, prompts, **kwargs)

    # the workers are forked from this process, so they run the patched function
    monkeypatch.setattr(loops_module, "run_load", dies_in_the_second_loop)
    url = fake(ttft=0.005, tpot=0.001)
    result = runner.invoke(
        app, ["bench", "-e", url, "-c", "4", "-n", "8", "--loops", "2", "-o", str(tmp_path / "r"), *ARGS]
    )
    assert result.exit_code == 1
    assert "load worker 2 of 2 (level c4) died (killed by SIGKILL)" in result.output
    assert "--loops 1" in result.output
    assert "Traceback" not in result.output


def test_a_stop_ends_every_loop_cleanly_with_what_was_measured(fake: Any, make_prompts: Any) -> None:
    import asyncio
    import time

    from llmctl.serving.client.bench.loadgen import run_blocking
    from llmctl.serving.client.bench.loops import run_level

    # 20 tokens: each request about 8 s long, so every slot holds one when the stop comes, however
    # slowly a busy machine lets the workers start their first requests
    url = fake(ttft=0.005, tpot=0.4)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=4, duration=60.0, warmup=0)

    async def main() -> Any:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(3.0, stop.set)  # what the first Ctrl-C does
        return await run_level(plan, make_prompts(mean_out=20, std_out=0), 2, stop=stop)

    began = time.monotonic()
    result = run_blocking(main)
    assert time.monotonic() - began < 30  # long before the 60 s duration
    assert result.interrupted and result.loops == 2
    statuses = {record.status for record in result.records}
    assert "error" in statuses  # the requests in flight were cancelled and kept
    cancelled = [r for r in result.records if r.error_type == "cancelled"]
    assert 1 <= len(cancelled) <= 4
    assert len({r.index for r in result.records}) == len(result.records)  # no index sent twice


def test_a_stop_during_the_warmup_opens_no_window(fake: Any, make_prompts: Any) -> None:
    import asyncio
    import time

    from llmctl.serving.client.bench.loadgen import run_blocking
    from llmctl.serving.client.bench.loops import run_level

    # the warm-up requests take about 8 s: the stop at 3 s comes after both workers began theirs
    # (at 0.5 s, a busy machine had not yet let the second worker send its one)
    url = fake(ttft=0.005, tpot=0.4)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=4, requests=40, warmup=3)

    async def main() -> Any:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(3.0, stop.set)
        return await run_level(plan, make_prompts(mean_out=20, std_out=0), 2, stop=stop)

    began = time.monotonic()
    result = run_blocking(main)
    assert time.monotonic() - began < 20
    assert result.interrupted and result.records == []
    assert sorted(r.index for r in result.warmup_records) == [0, 1, 2]
    assert {r.error_type for r in result.warmup_records} == {"cancelled"}
