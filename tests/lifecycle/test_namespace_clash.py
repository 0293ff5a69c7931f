"""Issue 53, finding 6: two workloads of one environment never share a namespace.

`<blueprint>-<workload>` is not injective: `tiny-cpu` + workload `pr-42` and a blueprint `tiny-cpu-pr`
+ workload `42` both make `tiny-cpu-pr-42`, and the namespace keys the compile-cache prefix and the
Pod Identity trust of the workload's roles. The attack, through the stand-in engine: a second `up`
that would land in the first one's namespace is refused before anything is pinned or changed, naming
both workloads; `preview` and `plan` refuse it too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.blueprints._data import data_file
from llmctl.cli.app import app
from llmctl.errors import BadInput
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.lifecycle.environment import WorkloadRecord, refuse_namespace_clash


def _record(blueprint: str, workload: str | None, namespace: str) -> WorkloadRecord:
    return WorkloadRecord(blueprint=blueprint, workload=workload, namespace=namespace)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (_record("tiny-cpu", "pr-42", "tiny-cpu-pr-42"), _record("tiny-cpu-pr", "42", "tiny-cpu-pr-42")),
        # a named workload against another blueprint's default one (its namespace is its name)
        (_record("tiny-cpu", None, "tiny-cpu"), _record("tiny", "cpu", "tiny-cpu")),
    ],
)
def test_a_namespace_another_workload_has_is_refused_naming_both(
    first: WorkloadRecord, second: WorkloadRecord
) -> None:
    with pytest.raises(BadInput) as info:
        refuse_namespace_clash(second, [first])
    assert first.label() in info.value.message and second.label() in info.value.message
    assert repr(first.namespace) in info.value.message
    refuse_namespace_clash(first, [first])  # its own record (a second `up` of it) is no clash
    refuse_namespace_clash(second, [_record("tiny-cpu", "pr-43", "tiny-cpu-pr-43")])


def test_up_and_preview_refuse_a_workload_landing_in_anothers_namespace(
    engine: StandinEngine, aws: str, tmp_path: Path
) -> None:
    data = yaml.safe_load(data_file("catalog", "tiny-cpu.yaml").read_text())
    data["name"] = "tiny-cpu-pr"
    other = tmp_path / "tiny-cpu-pr.yaml"
    other.write_text(yaml.safe_dump(data, sort_keys=False))

    def run(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(app, list(args))
        return result.exit_code, result.stdout, result.stderr

    code, _out, err = run(
        "up", "-b", "tiny-cpu", "--stack", "ci", "--workload", "pr-42", "--yes", "--no-wait"
    )
    assert code == 0, err
    ops = list(engine.ops())
    # `plan` (against the deployed stacks) refuses it too: it would otherwise say ok for a workload `up` refuses
    for command in ("up", "preview", "plan"):
        flags = ["--yes", "--no-wait"] if command == "up" else []
        code, out, err = run(command, "-b", str(other), "--stack", "ci", "--workload", "42", *flags, "--json")
        assert code == 2, err
        error = json.loads(out)
        assert error["error"] == "BadInput"
        assert "tiny-cpu-pr (workload 42)" in error["message"]
        assert "tiny-cpu (workload pr-42)" in error["message"]
        assert "'tiny-cpu-pr-42'" in error["message"]
    # nothing ran after the refusals: no preview or update of the platform, no workload stack of the second
    assert engine.ops()[len(ops) :] == []
    assert engine.checkpoint("llmctl-tiny-cpu-pr", "ci.42") is None
    assert engine.checkpoint(PLATFORM_PROJECT, "ci") is not None
