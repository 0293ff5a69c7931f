"""Fixtures for the bench tests: the timed fake OpenAI server in a child process."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from llmctl.serving.client.bench.client import RequestRecord
from llmctl.serving.client.bench.loadgen import LoadPlan, LoadResult, run_blocking, run_load
from llmctl.serving.client.bench.metrics import summarize
from llmctl.serving.client.bench.prompts import PromptFactory
from llmctl.serving.client.bench.testserver import FakeTiming, configure, running_server
from llmctl.serving.client.bench.tokens import ApproxTokenizer


@pytest.fixture(scope="session")
def fake_server_url() -> Iterator[str]:
    """One fake server for the whole session (its timing is reset for every test)."""
    with running_server() as url:
        yield url


@pytest.fixture
def fake(fake_server_url: str) -> Iterator[Any]:
    """Configure the fake server: ``fake(ttft=0.02, tpot=0.005, ...)``; returns the base URL."""

    def setup(**fields: Any) -> str:
        configure(fake_server_url, **{**dataclasses.asdict(FakeTiming()), **fields})
        return fake_server_url

    setup()
    yield setup
    setup()


def small_prompts(
    mean_out: int = 20, std_out: int = 4, mean_in: int = 64, shared_prefix: bool = False
) -> PromptFactory:
    return PromptFactory(
        ApproxTokenizer(),
        mean_input_tokens=mean_in,
        stddev_input_tokens=5,
        mean_output_tokens=mean_out,
        stddev_output_tokens=std_out,
        shared_prefix=shared_prefix,
    )


def run(plan: LoadPlan, prompts: PromptFactory | None = None, stop_after: float | None = None) -> LoadResult:
    """Run a plan in a fresh event loop (optionally setting the stop event after some seconds)."""

    async def main() -> LoadResult:
        stop = asyncio.Event()
        if stop_after is not None:
            asyncio.get_running_loop().call_later(stop_after, stop.set)
        return await run_load(plan, prompts or small_prompts(), stop=stop)

    return run_blocking(main)


@pytest.fixture
def state_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def make_prompts() -> Any:
    """``make_prompts(mean_out=20, std_out=4, ...)``: a small PromptFactory."""
    return small_prompts


@pytest.fixture
def run_plan() -> Any:
    """``run_plan(plan, prompts=None, stop_after=None)``: run a LoadPlan to completion."""
    return run


# A recorded run: times are binary fractions (multiples of 1/1024 s), so sums and differences
# are exact in floating point.
T0 = 1000.0


def _ok(
    index: int, start: float, chunks: list[tuple[float, str]], end: float, usage: int | None
) -> RequestRecord:
    record = RequestRecord(index=index, endpoint="http://x/v1", input_tokens_sent=8, max_tokens=3)
    record.chunk_times = [T0 + t for t, _ in chunks]
    record.chunk_texts = [text for _, text in chunks]
    record.first_answer = record.chunk_times[0] if record.chunk_times else None
    record.start, record.end = T0 + start, T0 + end
    record.issued = T0 + start - 1 / 1024
    record.usage_prompt_tokens = 8
    record.usage_completion_tokens = usage
    record.finish_reason = "length"
    record.status = "ok"
    return record


def _recorded() -> LoadResult:
    """Three measured requests in a 1 s window (concurrency 2) and one warm-up request before it.

    * 0: first content 0.25 s after its start, one token per chunk, 3 tokens, [DONE] at 0.5625 s
    * 1: starts at 0.125; chunks of 1, 2 and 1 tokens (usage says 4), [DONE] at 0.875 s
    * 2: starts at 0.5625, answered HTTP 503 at 0.625
    """
    first = _ok(0, 0.0, [(0.25, " a"), (0.375, " b"), (0.5, " c")], 0.5625, usage=3)
    second = _ok(1, 0.125, [(0.375, " d"), (0.5, " e f"), (0.75, " g")], 0.875, usage=4)
    failed = RequestRecord(index=2, endpoint="http://x/v1", input_tokens_sent=8, max_tokens=3)
    failed.issued = failed.start = T0 + 0.5625
    failed.http_status = 503
    failed.end = T0 + 0.625
    failed.status, failed.error_type, failed.error = "error", "http_503", "overloaded"
    warm = _ok(9, -0.5, [(-0.25, " w")], -0.125, usage=1)
    warm.warmup = True
    plan = LoadPlan(endpoints=["http://x/v1"], model="org/Model-1.5", concurrency=2, requests=3, warmup=1)
    return LoadResult(
        plan=plan,
        records=[first, second, failed],
        warmup_records=[warm],
        t0=T0,
        t_end=T0 + 1.0,
        cpu_seconds=0.25,
        loop_lag=[0.0, 0.001],
        interrupted=False,
        warmup_seconds=0.5,
    )


@pytest.fixture
def recorded_run() -> LoadResult:
    """A recorded run with known timestamps (see ``_recorded``)."""
    return _recorded()


@pytest.fixture
def recorded_summary() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``summarize`` of the recorded run: (summary, per-request rows)."""
    settings = {"mean_input_tokens": 8, "mean_output_tokens": 3}
    return summarize(_recorded(), ApproxTokenizer(), prompt_settings=settings)
