"""Fixtures for the bench tests: the timed fake OpenAI server in a child process."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from llmctl.serving.bench.loadgen import LoadPlan, LoadResult, run_load
from llmctl.serving.bench.prompts import PromptFactory
from llmctl.serving.bench.testserver import FakeTiming, configure, running_server
from llmctl.serving.bench.tokens import ApproxTokenizer


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

    return asyncio.run(main())


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
