"""ray-vllm on Neuron: the Neuron image carries the Ray pinned for vLLM 0.13, with pyarrow; a wrong
Ray fails at start with an error that names the incompatibility."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.versions import versions
from llmctl.errors import ServingError
from llmctl.infra.aws.images import default_base, source_root
from llmctl.serving.ray_vllm.app import check_neuron_ray
from llmctl.serving.ray_vllm.image import neuron_ray_version, neuron_requirements

DOCKERFILE = source_root() / "serving" / "ray_vllm" / "Dockerfile"


def test_the_neuron_requirements_pin_the_versions_yaml_ray_and_add_pyarrow() -> None:
    assert neuron_ray_version() == "2.53.0"
    assert neuron_ray_version() != versions().python["ray"].value  # the GPU image keeps its own Ray
    reqs = neuron_requirements()
    assert f"ray[serve]=={neuron_ray_version()}" in reqs
    assert any(re.fullmatch(r"pyarrow==\d+\.\d+\.\d+", r) for r in reqs)
    assert any(r.startswith("jsonref==") for r in reqs) and any(r.startswith("boto3==") for r in reqs)
    # ray[llm] or vllm here would replace the Neuron vLLM with a CUDA build from PyPI
    assert not any(r.startswith(("vllm", "ray[llm", "ray[serve,llm")) for r in reqs)


def _install_step(base_image: str, tmp_path: Path) -> str:
    """Run the Dockerfile's requirements step (its COPYs, then serving/image.sh) with `python3 -m pip`
    recorded instead of run; returns the last install's arguments."""
    lines = DOCKERFILE.read_text().replace("\\\n", " ").splitlines()
    stage = tmp_path / "stage"
    for line in lines:
        if line.startswith("COPY "):
            *sources, dest = line.split()[1:]
            target = stage / dest.removeprefix("/tmp/llmctl/")
            target.mkdir(parents=True, exist_ok=True)
            for source in sources:
                shutil.copy(source_root() / source, target)
    step = next(line[4:] for line in lines if line.startswith("RUN ") and "image.sh requirements" in line)
    (tmp_path / "stdlib").mkdir()
    fake = tmp_path / "python3"
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo {tmp_path / "stdlib"}; exit 0; fi\nshift 2\necho "$@"\n'
    )
    fake.chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", step.replace("/tmp/llmctl/", f"{stage}/")],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "BASE_IMAGE": base_image},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1].replace(f"{stage}/", "/tmp/llmctl/")


def test_the_dockerfile_installs_the_neuron_lock_on_the_neuron_base(tmp_path: Path) -> None:
    neuron_base = versions().images["neuron_vllm_inf2"].image
    assert load_blueprint("llama3-vllm-inf2").image.base == neuron_base
    assert _install_step(neuron_base, tmp_path / "neuron").endswith(
        "--require-hashes -r /tmp/llmctl/locks/ray-vllm-neuron.txt"
    )
    assert _install_step(default_base("ray-vllm"), tmp_path / "gpu").endswith(
        "--require-hashes -r /tmp/llmctl/locks/ray-vllm-gpu.txt"
    )
    # AWS's EFA Ray LLM DLC (Python 3.13): its own lock, not the rayproject image's (Python 3.12)
    dlc = versions().images["ray_vllm_gpu_efa"].image
    assert _install_step(dlc, tmp_path / "dlc").endswith(
        "--require-hashes -r /tmp/llmctl/locks/ray-vllm-gpu-efa.txt"
    )
    copied = next(
        line for line in DOCKERFILE.read_text().splitlines() if line.startswith("COPY serving/locks/")
    )
    assert "serving/locks/ray-vllm-neuron.txt" in copied and "serving/locks/ray-vllm-gpu.txt" in copied
    assert "serving/locks/ray-vllm-gpu-efa.txt" in copied


def test_a_ray_other_than_the_pinned_one_fails_fast_on_neuron(monkeypatch: pytest.MonkeyPatch) -> None:
    neuron = load_blueprint("llama3-vllm-inf2")
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "2.58.0" if name == "ray" else real(name))
    with pytest.raises(ServingError, match=r"Ray 2\.58\.0 cannot serve vLLM 0\.13\.0 on Neuron") as caught:
        check_neuron_ray(neuron)
    assert "2.53.0" in str(caught.value) and caught.value.hint is not None
    assert "ray[serve]==2.53.0" in caught.value.hint
    check_neuron_ray(load_blueprint("llama2-70b-vllm-gpu"))  # GPU: the ray-llm image's own Ray is fine
    monkeypatch.setattr(metadata, "version", lambda name: "2.53.0" if name == "ray" else real(name))
    check_neuron_ray(neuron)  # the pinned Ray passes
