"""The stand-in's replay of recorded program runs (standin_engine/memo.py): a replayed `up` leaves the
same state and events as the run it replays, unique names are made anew, and what the key cannot see
(a fault, a patched attribute, a program a test wrote) always runs."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pulumi
import pytest
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine, StackSpec

PLATFORM = "llmctl-platform"
WL = "llmctl-tiny-cpu"
UNIQUE = re.compile(r"\d{18}[0-9a-f]{8}")
runner = CliRunner()


@pytest.fixture
def program_memo(tmp_path: Path) -> Path:
    """This module's own memo folder: nothing recorded by other tests."""
    folder = tmp_path / "memo"
    folder.mkdir()
    return folder


def up() -> None:
    result = runner.invoke(
        app, ["up", "--blueprint", "tiny-cpu", "--yes", "--no-wait", "--progress", "plain"]
    )
    assert result.exit_code == 0, result.stdout + result.stderr


def down() -> None:
    result = runner.invoke(app, ["down", "--yes", "--progress", "plain"])
    assert result.exit_code == 0, result.stdout + result.stderr


def outcomes(memo: Path) -> Counter[tuple[str, str]]:
    path = memo / "memo-runs.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter((entry["outcome"], entry["run"]) for entry in map(json.loads, lines))


def plain(resources: dict[str, dict[str, Any]]) -> Any:
    return json.loads(UNIQUE.sub("<unique>", json.dumps(resources, sort_keys=True)))


def queue_names(engine: StandinEngine) -> list[str]:
    return [
        r["outputs"]["name"]
        for r in engine.resources(PLATFORM, "dev").values()
        if r["type"] == "aws:sqs/queue:Queue"
    ]


def test_a_second_up_replays_every_program_and_leaves_the_same_state_with_new_unique_names(
    engine: StandinEngine, aws: str, program_memo: Path
) -> None:
    up()
    first = {p: engine.resources(p, "dev") for p in (PLATFORM, WL)}
    first_queues = queue_names(engine)
    runs = [
        ("miss", f"{PLATFORM}/dev update"),  # the preview, then the update
        ("miss", f"{WL}/dev update"),
    ]
    assert outcomes(program_memo) == Counter({runs[0]: 2, runs[1]: 1})
    events_before = len(engine.calls())
    down()
    up()  # from the same empty state: the same three runs, now replayed
    assert outcomes(program_memo) == Counter(
        {runs[0]: 2, runs[1]: 1, ("hit", f"{PLATFORM}/dev update"): 2, ("hit", f"{WL}/dev update"): 1}
    )
    second = {p: engine.resources(p, "dev") for p in (PLATFORM, WL)}
    assert plain(second) == plain(first) and len(second[PLATFORM]) > 20
    # the interruption queue's name is made at create time: a replayed create gets a new one
    assert len(first_queues) == 1 and queue_names(engine) != first_queues
    ups = [c for c in engine.calls()[events_before:] if c["command"] == "up"]
    assert len(ups) == 2  # the platform and the workload, both recorded as the CLI's own calls
    assert engine.outputs(PLATFORM, "dev")["cluster_name"] == "llmctl-dev"


def test_a_fault_a_tests_own_program_or_a_patched_attribute_always_runs(
    engine: StandinEngine, aws: str, program_memo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.control(fail={"no-such-resource": "never registered"})
    up()  # a fault set: every run runs, none is looked up or recorded
    assert outcomes(program_memo) == Counter(
        {("off", f"{PLATFORM}/dev update"): 2, ("off", f"{WL}/dev update"): 1}
    )
    assert list(program_memo.glob("*.json")) == []
    down()
    engine.control(fail={})

    def own() -> None:
        pulumi.export("answer", 42)

    before = outcomes(program_memo)
    spec = StackSpec("llmctl-own", "dev", own, {"aws:region": aws})
    assert Engine(resolve_backend()).up(spec) == {"answer": 42}
    assert Engine(resolve_backend()).up(spec) == {"answer": 42}
    assert outcomes(program_memo) == before  # a test's own program: no lookup, no record

    from llmctl.infra.platform import program

    monkeypatch.setattr(program, "node_pool_outputs", program.node_pool_outputs)  # same code, patched
    up()
    assert outcomes(program_memo) == before  # after a patch: no lookup either
    assert engine.outputs(PLATFORM, "dev")["cluster_name"] == "llmctl-dev"


@pytest.mark.usefixtures("fresh_programs")
def test_fresh_programs_turns_replay_off(engine: StandinEngine, aws: str, program_memo: Path) -> None:
    up()  # with replay on, its three runs would be recorded (the first test above)
    assert outcomes(program_memo) == Counter() and list(program_memo.glob("*.json")) == []
