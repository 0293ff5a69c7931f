"""`llmctl images build --push`: ECR login and push against moto's ECR, through a stand-in `docker`
that accepts only the calls and flags the real one would be given and really pushes the image to
moto's ECR (tests/lifecycle/docker_standin.py); what was pushed is read back from the registry."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from lifecycle_support import code_tag
from typer.testing import CliRunner

from llmctl import __version__
from llmctl.cli.app import app

HERE = Path(__file__).parent


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir, data = tmp_path / "docker-bin", tmp_path / "docker"
    bin_dir.mkdir()
    data.mkdir()
    (data / "calls.jsonl").write_text("")
    script = bin_dir / "docker"
    script.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(HERE / 'docker_standin.py')!r}, run_name='__main__')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_DOCKER_DIR", str(data))
    return data


def calls(data: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (data / "calls.jsonl").read_text().splitlines()]


def pushed(ecr: Any, repository: str, tag: str) -> str:
    """The digest ECR holds under the tag, after checking it is its manifest's sha256 and that every
    blob the manifest names was uploaded."""
    [image] = ecr.batch_get_image(repositoryName=repository, imageIds=[{"imageTag": tag}])["images"]
    manifest = image["imageManifest"]
    digest = str(image["imageId"]["imageDigest"])
    assert digest == "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
    document = json.loads(manifest)
    blobs = [document["config"]["digest"], *(layer["digest"] for layer in document["layers"])]
    found = ecr.batch_check_layer_availability(repositoryName=repository, layerDigests=blobs)["layers"]
    assert [layer["layerAvailability"] for layer in found] == ["AVAILABLE"] * 2
    return digest


def test_push_logs_in_with_ecrs_token_and_pushes_to_the_workload_repository(aws: str, docker: Path) -> None:
    ecr = boto3.client("ecr", region_name=aws)
    ecr.create_repository(repositoryName="llmctl/qa/tiny-cpu")  # an earlier push made it
    token = ecr.get_authorization_token()["authorizationData"][0]
    registry = token["proxyEndpoint"].removeprefix("https://")
    user, password = base64.b64decode(token["authorizationToken"]).decode().split(":", 1)
    args = ["images", "build", "-b", "tiny-cpu", "--stack", "qa", "--push", "--region", aws, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["image"] == f"{registry}/llmctl/qa/tiny-cpu:{code_tag()}" and out["pushed"] is True
    assert code_tag().startswith(f"{__version__}-")  # the tag `up` looks up: version and code digest
    assert out["digest"] == pushed(ecr, "llmctl/qa/tiny-cpu", code_tag())
    assert [
        i["imageTags"] for i in ecr.describe_images(repositoryName="llmctl/qa/tiny-cpu")["imageDetails"]
    ] == [[code_tag()]]
    login, built = [c for c in calls(docker) if c["args"][0] in ("login", "buildx")]
    assert (login["user"], login["registry"], login["password"]) == (user, registry, password)
    assert built["-t"] == out["image"] and built["--push"] is True and built["--platform"] == "linux/amd64"


def test_push_before_the_first_up_creates_the_repository(aws: str, docker: Path) -> None:
    args = ["images", "build", "-b", "tiny-cpu", "--stack", "qa", "--push", "--region", aws, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    ecr = boto3.client("ecr", region_name=aws)
    [repo] = ecr.describe_repositories(repositoryNames=["llmctl/qa/tiny-cpu"])["repositories"]
    assert repo["imageTagMutability"] == "IMMUTABLE" and repo["imageScanningConfiguration"]["scanOnPush"]
    tags = ecr.list_tags_for_resource(resourceArn=repo["repositoryArn"])["tags"]
    assert tags == [{"Key": "llmctl:cluster", "Value": "llmctl-qa"}]  # what the sweep removes it by
    assert [c["args"][0] for c in calls(docker)] == ["info", "login", "buildx"]
    again = CliRunner().invoke(app, args)  # the repository exists now: reused, not created twice
    assert again.exit_code == 0, again.output
    assert len(ecr.describe_repositories()["repositories"]) == 1


def test_a_named_workload_pushes_to_its_own_repository_tagged_with_the_environments_cluster(
    aws: str, docker: Path
) -> None:
    """`--stack ci --workload pr-42`: repository llmctl/ci.pr-42/<blueprint> (as `up --workload`
    looks it up), tagged with cluster llmctl-ci so the environment's sweep removes it."""
    args = ["images", "build", "-b", "tiny-cpu", "--stack", "ci", "--workload", "pr-42", "--push"]
    result = CliRunner().invoke(app, [*args, "--region", aws, "--json"])
    assert result.exit_code == 0, result.output
    assert "/llmctl/ci.pr-42/tiny-cpu:" in json.loads(result.stdout)["image"]
    ecr = boto3.client("ecr", region_name=aws)
    [repo] = ecr.describe_repositories(repositoryNames=["llmctl/ci.pr-42/tiny-cpu"])["repositories"]
    tags = ecr.list_tags_for_resource(resourceArn=repo["repositoryArn"])["tags"]
    assert tags == [{"Key": "llmctl:cluster", "Value": "llmctl-ci"}]


def test_up_can_build_and_push_first_when_asked(
    aws: str, docker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
    from llmctl.infra.workload.prepare.delivery import decide

    bp = load_blueprint("tiny-cpu")
    registry = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    facts = PlatformFacts.for_blueprint(bp, region=aws).model_copy(update={"ecr_registry": registry})
    config = WorkloadConfig(blueprint=bp, platform=facts)
    monkeypatch.setenv("LLMCTL_DELIVERY", "build")
    notes: list[str] = []
    chosen = decide(config, note=notes.append)
    [built] = [c for c in calls(docker) if c["args"][0] == "buildx"]
    ecr = boto3.client("ecr", region_name=aws)
    digest = pushed(ecr, "llmctl/dev/tiny-cpu", built["-t"].rsplit(":", 1)[1])
    assert chosen.mode == "image" and chosen.image.endswith(f"/llmctl/dev/tiny-cpu@{digest}")
    assert "LLMCTL_DELIVERY=build" in chosen.reason and "Docker engine" in notes[0]
    assert built["--push"] is True and "/llmctl/dev/tiny-cpu:" in built["-t"]


def test_the_push_hint_of_a_named_workload_uses_its_flags() -> None:
    from llmctl.infra.workload.prepare.delivery import _stack_flags

    assert _stack_flags("ci.pr-42") == "--stack ci --workload pr-42"
    assert _stack_flags("dev") == "--stack dev"
