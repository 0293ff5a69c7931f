"""`llmctl plan diff` on small hand-made plans: bad input (one line, exit 2), path matching, exit
codes and the comment size limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llmctl import __version__
from llmctl.cli.app import app
from llmctl.infra.plan.diff import InputChange, diff_plans, diff_values
from llmctl.infra.plan.doc import header
from llmctl.infra.plan.render import MARKDOWN_LIMIT, render_markdown

runner = CliRunner()


def _plan(resources: list[dict[str, Any]], hourly: float = 1.0, **extra: Any) -> dict[str, Any]:
    stack = {"id": "llmctl-platform/dev", "kind": "platform", "resources": resources}
    cost = {"platform_hourly_usd": hourly, "workloads": [], "hourly_usd": hourly}
    return {**header(), "stacks": [stack], "cost": cost, "violations": [], **extra}


def _res(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    urn = f"urn:pulumi:dev::llmctl-platform::aws:s3/bucket:Bucket::{name}"
    return {
        "urn": urn,
        "type": "aws:s3/bucket:Bucket",
        "name": name,
        "parent": None,
        "depends_on": [],
        "inputs": inputs,
    }


def _file(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def _diff(tmp_path: Path, old: Any, new: Any, *flags: str) -> Any:
    return runner.invoke(
        app, ["plan", "diff", _file(tmp_path, "old.json", old), _file(tmp_path, "new.json", new), *flags]
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "is not JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        ('["a list"]', 'is not an llmctl plan (no "format": "llmctl-plan" header)'),
        ('{"ok": true, "resources": []}', "is a plan from an older llmctl (it has no format version)"),
        (
            json.dumps({**header(), "format_version": 99, "stacks": []}),
            f"is a plan of format version 99; llmctl {__version__} reads format version 1",
        ),
        (
            json.dumps({**header(), "llmctl_version": "0.0.1", "stacks": []}),
            f"was written by llmctl 0.0.1; this is llmctl {__version__}",
        ),
        (json.dumps({**header(), "stacks": "nope"}), "is a damaged plan: `stacks` is missing or malformed"),
        # cut or hand-edited: one line naming the damaged part, not a KeyError from the comparison
        (
            json.dumps({**header(), "stacks": [{"resources": []}]}),
            "is a damaged plan: stacks[0] has no `id`",
        ),
        (
            json.dumps(_plan([{"type": "aws:s3/bucket:Bucket", "inputs": {}}])),
            "is a damaged plan: resource 0 of stack llmctl-platform/dev lacks its urn, type or name",
        ),
        (json.dumps({**_plan([]), "cost": "free"}), "is a damaged plan: `cost` is malformed"),
        (
            json.dumps({**_plan([]), "cost": {"workloads": [{"blueprint": "x"}]}}),
            "is a damaged plan: `cost` is malformed",
        ),
        (json.dumps({**_plan([]), "violations": ["x"]}), "is a damaged plan: `violations` is malformed"),
    ],
)
def test_bad_plan_files_say_what_and_how_to_fix(tmp_path: Path, content: str, says: str) -> None:
    result = _diff(tmp_path, content, _plan([]))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[0].endswith(says) and "old.json" in lines[0]
    assert lines[1].startswith("hint: ") and "llmctl plan --offline --json" in lines[1]
    assert len(lines) == 2 and "Traceback" not in result.output


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "diff", str(tmp_path / "none.json"), str(tmp_path / "b.json")])
    assert result.exit_code == 2 and "cannot read plan file" in result.stderr
    plan = _file(tmp_path, "p.json", _plan([]))
    result = runner.invoke(app, ["plan", "diff", plan, plan, "--format", "html"])
    assert result.exit_code == 2 and "unknown --format 'html'" in result.stderr


def test_version_mismatch_can_be_allowed_and_is_shown(tmp_path: Path) -> None:
    old = _plan([_res("a", {"x": 1})], llmctl_version="0.0.1")
    refused = _diff(tmp_path, old, _plan([_res("a", {"x": 1})]))
    assert refused.exit_code == 2 and "--allow-version-mismatch" in refused.stderr
    allowed = _diff(tmp_path, old, _plan([_res("a", {"x": 1})]), "--allow-version-mismatch")
    assert allowed.exit_code == 0
    assert f"different llmctl versions: 0.0.1 (old), {__version__} (new)" in allowed.stdout


def test_exit_codes_like_diff(tmp_path: Path) -> None:
    same = _diff(tmp_path, _plan([_res("a", {"x": 1})]), _plan([_res("a", {"x": 1})]))
    assert same.exit_code == 0 and same.stdout.startswith("plan diff: no changes")
    cost_only = _diff(tmp_path, _plan([], hourly=1.0), _plan([], hourly=2.0))
    assert cost_only.exit_code == 1 and "$1.00 -> $2.00 per hour (+$1.00)" in cost_only.stdout
    changed = _diff(tmp_path, _plan([_res("a", {"x": 1})]), _plan([_res("b", {"x": 1})]), "--format", "json")
    assert changed.exit_code == 1
    data = json.loads(changed.stdout)
    assert [(r["action"], r["name"]) for r in data["resources"]] == [("remove", "a"), ("add", "b")]


def test_paths_name_lists_by_name_and_quote_odd_keys() -> None:
    old = {
        "containers": [{"name": "head", "image": "a"}, {"name": "ui", "image": "u"}],
        "labels": {"k.io/x": "1"},
    }
    new = {"containers": [{"name": "sidecar", "image": "s"}, {"name": "head", "image": "b"}], "labels": {}}
    assert diff_values(old, new) == [
        InputChange("containers[name=head].image", "changed", "a", "b"),
        InputChange("containers[name=ui]", "removed", {"name": "ui", "image": "u"}, None),
        InputChange("containers[name=sidecar]", "added", None, {"name": "sidecar", "image": "s"}),
        InputChange('labels["k.io/x"]', "removed", "1", None),
    ]
    assert diff_values({"args": [1, 2]}, {"args": [1, 3, 4]}) == [
        InputChange("args[1]", "changed", 2, 3),
        InputChange("args[2]", "added", None, 4),
    ]


def test_embedded_documents_are_compared_inside() -> None:
    old = {"policy": json.dumps({"Statement": [{"Action": "s3:GetObject"}]}), "conf": "a: 1\nb: [x]\n"}
    new = {"policy": json.dumps({"Statement": [{"Action": "s3:*"}]}), "conf": "a: 2\nb: [x]\n"}
    assert diff_values(old, new) == [
        InputChange("conf > a", "changed", 1, 2),
        InputChange("policy > Statement[0].Action", "changed", "s3:GetObject", "s3:*"),
    ]
    assert diff_values({"v": "plain one"}, {"v": "plain two"}) == [
        InputChange("v", "changed", "plain one", "plain two")
    ]


def test_markdown_stays_under_the_comment_limit() -> None:
    old = _plan([_res(f"bucket-{i:04d}", {"v": "x" * 90}) for i in range(2000)])
    new = _plan([_res(f"bucket-{i:04d}", {"v": "y" * 90}) for i in range(2000)])
    text = render_markdown(diff_plans(old, new))
    assert len(text) <= MARKDOWN_LIMIT < 65_536
    assert "more resource(s) left out to fit a comment" in text and text.rstrip().endswith("</details>")
