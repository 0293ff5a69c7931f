"""A workload stack's own ECR repository (`images build --push`) goes with the workload stack:
`down --workload` and `stacks gc` delete it (moto's ECR), and keep every other workload's."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import Stubber
from lifecycle_support import push
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.aws import images

BP = "tiny-cpu"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def repositories(region: str) -> list[str]:
    found = boto3.client("ecr", region_name=region).describe_repositories()["repositories"]
    return sorted(repo["repositoryName"] for repo in found)


def age(engine: StandinEngine, project: str, stack: str, days: int) -> None:
    """Backdate a stack's last update, as if it ran `days` ago."""
    path = engine.backend / ".pulumi" / "history" / project / f"{stack}.json"
    entries = json.loads(path.read_text())
    stamp = (datetime.now(timezone.utc) - timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    entries[-1]["endTime"] = stamp
    path.write_text(json.dumps(entries))


def test_down_and_gc_of_a_pr_workload_delete_only_its_image_repository(
    engine: StandinEngine, aws: str
) -> None:
    for pr in ("pr-1", "pr-2", "pr-3"):
        code, _out, err = run("up", "-b", BP, "--stack", "ci", "--workload", pr, "--yes", "--no-wait")
        assert code == 0, err
        push(aws, f"llmctl/ci.{pr}/{BP}", "1")
    push(aws, f"llmctl/qa/{BP}", "1")  # another environment's
    assert len(repositories(aws)) == 4

    code, out, err = run("down", "--stack", "ci", "--workload", "pr-1", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["ok"] is True and report["destroyed"] == [f"llmctl-{BP}/ci.pr-1"]
    assert f"deleted image repository llmctl/ci.pr-1/{BP}" in report["notes"]
    assert repositories(aws) == [f"llmctl/ci.pr-2/{BP}", f"llmctl/ci.pr-3/{BP}", f"llmctl/qa/{BP}"]

    age(engine, f"llmctl-{BP}", "ci.pr-2", 5)
    code, out, err = run("stacks", "gc", "--older-than", "3d", "--prefix", "pr-", "--yes", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["removed"] == [f"llmctl-{BP}/ci.pr-2"] and report["ok"] is True
    assert f"deleted image repository llmctl/ci.pr-2/{BP}" in report["notes"]
    assert repositories(aws) == [f"llmctl/ci.pr-3/{BP}", f"llmctl/qa/{BP}"]

    # a workload without a pushed image: nothing to delete, nothing said
    code, out, err = run("up", "-b", BP, "--stack", "ci", "--workload", "pr-4", "--yes", "--no-wait")
    assert code == 0, err
    code, out, err = run("down", "--stack", "ci", "--workload", "pr-4", "--yes", "--json")
    assert code == 0, err
    assert not [note for note in json.loads(out)["notes"] if "image repository" in note]
    assert repositories(aws) == [f"llmctl/ci.pr-3/{BP}", f"llmctl/qa/{BP}"]


def test_a_refused_delete_is_a_note_with_the_fix_and_a_leftover(monkeypatch: pytest.MonkeyPatch) -> None:
    ecr = boto3.client("ecr", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ecr)
    stub.add_client_error("delete_repository", "AccessDeniedException", "not authorized")
    stub.add_client_error("delete_repository", "RepositoryNotFoundException", "none")
    monkeypatch.setattr(boto3, "client", lambda *_a, **_k: ecr)
    with stub:
        note, left = images.delete_workload_repository("us-west-2", "ci.pr-1", BP)
        assert note is not None and f"could not delete the image repository llmctl/ci.pr-1/{BP}" in note
        assert "ecr:DeleteRepository" in note and "--force --region us-west-2" in note
        assert (left.kind, left.id, left.region) == ("ecr-repository", f"llmctl/ci.pr-1/{BP}", "us-west-2")
        assert images.delete_workload_repository("us-west-2", "ci.pr-1", BP) == (None, None)
