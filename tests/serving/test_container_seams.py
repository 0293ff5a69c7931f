"""The containers the workload builders render run the serving start modules, with what they read.

Each test takes the Deployment the workload renders for a catalog blueprint and runs its
container command + args exactly, with its env, in both image modes (built image, and upstream
base image that pip-installs the app first). Only the binaries we cannot have here are stand-ins
on PATH (pip, tritonserver, torchserve, torch-model-archiver; `python` is this interpreter); they
record how they were called.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from serving_support import mirror_model

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import APP_DIR, VERIFY_SCRIPT, wheel_file
from llmctl.infra.workload.manifests import build_manifests
from llmctl.serving.torchserve_neuronx.config import MODEL_STORE, archive_name, render_model_config
from llmctl.serving.triton_vllm.repository import model_name, render_model_repository
from llmctl.serving.triton_vllm.start import restricted_flags

STANDINS = ("pip", "tritonserver", "torchserve", "torch-model-archiver")


def _container(name: str, image: str | None) -> dict[str, Any]:
    bp = load_blueprint(name)
    config = WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp), image=image)
    deployment = next(o for o in build_manifests(config, hf_token="hf_x") if o["kind"] == "Deployment")
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def _run(container: dict[str, Any], tmp: Path, extra_env: dict[str, str]) -> dict[str, list[str]]:
    """Run the container's command + args with its env; returns {stand-in: argv} of the calls made."""
    bin_dir, calls = tmp / "bin", tmp / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    for python in ("python", "python3"):
        # `python3 -m pip ...` is recorded as a pip call (appended: the lock, then the app)
        pip = f'if [ "$1 $2" = "-m pip" ]; then shift 2; printf "%s\\n" "$@" >> {calls / "pip"}; exit 0; fi\n'
        # the sha256 check of what the init container fetched (delivery.verify_step) is recorded with
        # the files and digests it was given: the fetched files are not here (no init container runs)
        verify = (
            f'if [ "$1" = "-c" ] && [ "$2" = {shlex.quote(VERIFY_SCRIPT)} ]; then shift 2; '
            f'printf "%s\\n" "$@" >> {calls / "verify"}; exit 0; fi\n'
        )
        (bin_dir / python).write_text(f'#!/bin/sh\n{pip}{verify}exec {sys.executable} "$@"\n')
    for tool in STANDINS:
        (bin_dir / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {calls / tool}\n')
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    env = {e["name"]: e.get("value", "from-a-secret") for e in container["env"]}
    env.update(extra_env, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", HOME=str(tmp))
    done = subprocess.run(
        [*container["command"], *container.get("args", [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return {p.name: p.read_text().splitlines() for p in calls.iterdir()}


@pytest.mark.parametrize(
    "image", [None, "registry.example/llmctl-triton:1"], ids=["base-image", "built-image"]
)
def test_triton_container_renders_the_repository_with_the_mirrored_weights(
    image: str | None, tiny_model: Path, aws: dict[str, str], tmp_path: Path
) -> None:
    container = _container("llama2-triton-vllm-gpu", image)
    env = {e["name"]: e.get("value") for e in container["env"]}
    mirror_model(tiny_model, str(env["LLMCTL_MODEL_URI"]))
    repository = tmp_path / "repository"
    calls = _run(container, tmp_path, {**aws, "MODEL_REPOSITORY": str(repository)})

    served = calls["tritonserver"]
    assert served[0] == f"--model-repository={repository}" and served[3:] == container["args"]
    # issue 53 finding 3: the admin APIs behind a header whose value is random per start
    [(http, value), (grpc, same)] = [flag.rsplit("=", 1) for flag in served[1:3]]
    assert (http, grpc, value) == (*(f.rsplit("=", 1)[0] for f in restricted_flags(value)), same)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for flag in ("http", "grpc", "metrics"):  # Triton listens where the pod and Service expect it
        assert f"--{flag}-port={ports[flag]}" in calls["tritonserver"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert ("pip" in calls) == (image is None)
    if image is None:  # the last install is the delivered wheel, without dependencies
        assert calls["pip"][-2:] == ["--no-deps", f"{APP_DIR}/{wheel_file()}"]
        # ... after the fetched lock was checked against the digest in the pod's own spec
        assert f"{APP_DIR}/wheelhouse/requirements.txt" in calls["verify"]
    bp = load_blueprint("llama2-triton-vllm-gpu")
    args = json.loads((repository / model_name(bp) / "1" / "model.json").read_text())
    weights = Path(args.pop("model"))
    assert weights.is_relative_to(aws["LLMCTL_MODEL_CACHE"]) and (weights / "config.json").is_file()
    expected = json.loads(render_model_repository(bp)[f"{model_name(bp)}/1/model.json"])
    assert args == {k: v for k, v in expected.items() if k not in ("model", "revision")}
    config = (repository / model_name(bp) / "config.pbtxt").read_text()
    assert config == render_model_repository(bp)[f"{model_name(bp)}/config.pbtxt"]


@pytest.mark.parametrize("image", [None, "registry.example/llmctl-ts:1"], ids=["base-image", "built-image"])
def test_torchserve_container_archives_the_handler_and_starts_torchserve(
    image: str | None, tmp_path: Path
) -> None:
    container = _container("llama2-torchserve-inf2", image)
    assert {"name": "model-store", "mountPath": MODEL_STORE} in container["volumeMounts"]  # start's default
    store, work = tmp_path / "store", tmp_path / "work"
    # the gateway start.py starts on the serving port listens on a free port here (and ends with the run)
    env = {"LLMCTL_TS_MODEL_STORE": str(store), "LLMCTL_TS_WORKDIR": str(work), "LLMCTL_TS_LISTEN_PORT": "0"}
    calls = _run(container, tmp_path, env)

    bp = load_blueprint("llama2-torchserve-inf2")
    archiver = calls["torch-model-archiver"]
    handler = Path(archiver[archiver.index("--handler") + 1])
    assert handler.name == "handler.py" and handler.parent.name == "torchserve_neuronx" and handler.is_file()
    assert archiver[archiver.index("--export-path") + 1] == str(store)
    assert archiver[archiver.index("--model-name") + 1] == archive_name(bp)
    served = calls["torchserve"]
    assert served[:2] == ["--start", "--foreground"]
    assert served[served.index("--models") + 1] == archive_name(bp)
    assert served[served.index("--model-store") + 1] == str(store)
    for file, text in render_model_config(bp).items():
        assert (work / file).read_text() == text
    properties = (work / "config.properties").read_text()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # TorchServe's inference API on loopback, behind llmctl's gateway on the inference port
    assert f"inference_address=http://127.0.0.1:{ports['inference'] + 3}" in properties
    # the management API (model registration) on loopback only: no container port, no Service port
    assert "management" not in ports
    assert f"management_address=http://127.0.0.1:{ports['inference'] + 1}" in properties
    assert f"metrics_address=http://0.0.0.0:{ports['metrics']}" in properties
    assert container["readinessProbe"]["httpGet"] == {"path": "/ping", "port": "inference"}
    handler_config = yaml.safe_load((work / "model-config.yaml").read_text())["handler"]
    assert handler_config["tp_degree"] == bp.compute.tensor_parallel
