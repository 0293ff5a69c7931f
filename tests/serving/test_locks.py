"""The runtime locks against the interpreters they run on: every lock re-resolved with a real resolver
(`uv pip compile`) against the live package index, for its base image's Python and platform.

The index (PyPI) is reachable from developers' machines and CI; when it is not, these tests fail with
the resolver's words, they never skip. Offline tests below check the lock files' shape and coverage.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from packaging.version import Version

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.versions import versions
from llmctl.errors import LlmctlError
from llmctl.serving import lock_compile
from llmctl.serving.lockfiles import lock_for, locks, parse_lock, requirement_names


def test_every_lock_resolves_for_its_image_against_the_live_index() -> None:
    started = time.monotonic()
    problems = [problem for spec in locks().locks.values() for problem in lock_compile.check_lock(spec)]
    assert not problems, "\n".join(problems)
    assert time.monotonic() - started < 120  # the suite's budget for this check (usually a few seconds)


def test_the_model_mirror_jobs_lock_resolves_for_its_image() -> None:
    """The Job holding the HF token installs its packages from this lock only (hash-pinned)."""
    spec = lock_for("model-mirror", versions().images["python_slim"].image, kind="job")
    assert spec.label == "the model-mirror job"
    assert lock_compile.check_lock(spec) == []
    assert {"huggingface-hub", "boto3"} <= set(parse_lock(spec.path.read_text()))


def test_a_pin_whose_requires_python_excludes_the_image_is_named_with_the_fix(tmp_path: Path) -> None:
    """Today's (before this lock) ray-neuronx file: fastapi 0.165.0 needs Python >= 3.11, the DLC runs 3.10."""
    broken = tmp_path / "requirements.txt"
    broken.write_text("ray[serve]==2.58.0\nfastapi==0.165.0\npydantic==2.14.4\n")
    spec = locks().locks["ray-neuronx"].model_copy(update={"requirements": str(broken)})
    with pytest.raises(LlmctlError) as caught:
        lock_compile.compile_lock(spec)
    message, hint = caught.value.message, caught.value.hint or ""
    assert "fastapi==0.165.0 requires Python >=3.11" in message
    assert "neuron_transformers_neuronx image runs Python 3.10" in message
    pin = re.search(r"pin fastapi==(\S+) in ", hint)
    assert pin is not None, hint
    assert Version(pin.group(1)) < Version("0.165.0") and hint.endswith("then run `make locks`")


def test_the_check_reports_a_lock_that_drifted_from_its_requirements(tmp_path: Path) -> None:
    """A lock whose pin differs from what its requirements now resolve to fails with the package."""
    spec = locks().locks["triton-vllm"]
    lock = tmp_path / "triton-vllm.txt"
    text = spec.path.read_text()
    pinned = parse_lock(text)
    version = pinned["pyyaml"][0]
    lock.write_text(text.replace(f"pyyaml=={version}", "pyyaml==6.0.1"))
    problems = lock_compile.check_lock(spec, lock)
    assert problems and "pyyaml" in problems[0].lower() and "make locks" in problems[0]


def test_an_unreachable_index_fails_the_check_in_plain_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(lock_compile, "PYPI", "http://127.0.0.1:9")
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # nothing cached: the index must answer
    problems = lock_compile.check_lock(locks().locks["triton-vllm"])
    assert len(problems) == 1
    assert "could not reach the package index http://127.0.0.1:9" in problems[0]
    assert "check the network" in problems[0]


# --- offline -------------------------------------------------------------------------------------


def test_every_catalog_blueprint_has_a_lock_for_its_runtime_and_base_image() -> None:
    for bp in map(load_blueprint, catalog_names()):
        spec = lock_for(bp.runtime, bp.image.base)
        assert spec.path.is_file(), spec.name


def test_a_base_image_without_a_lock_is_refused_with_the_fix() -> None:
    with pytest.raises(LlmctlError) as caught:
        lock_for("ray-neuronx", "public.ecr.aws/neuron/pytorch-inference-neuronx:9.9.9-neuronx-py310")
    assert "no dependency lock for the ray-neuronx runtime" in caught.value.message
    assert caught.value.hint is not None and "make locks" in caught.value.hint


def test_every_lock_is_hashed_and_leaves_out_what_its_image_provides() -> None:
    table = locks()
    for spec in table.locks.values():
        pinned = parse_lock(spec.path.read_text())  # raises on a pin without a hash
        provided = set(requirement_names(table.constraints_path(spec)))
        # empty only where the image provides every requirement (AWS's Ray LLM DLC: pydantic, PyYAML)
        assert pinned or set(requirement_names(spec.requirements_path)) <= provided, spec.name
        assert not provided & set(pinned), spec.name
        assert not set(spec.outside_lock) & set(pinned), spec.name
        assert table.base(spec).python in spec.path.read_text().splitlines()[0]


def test_every_lock_names_a_pinned_image_and_a_runtime_folder() -> None:
    pinned = versions().images
    for spec in locks().locks.values():
        assert spec.image in pinned and spec.requirements_path.is_file(), spec.name


def test_the_neuron_dlc_constraints_hold_protobuf_and_numpy_where_the_dockerfile_does() -> None:
    """Ray or a dependency upgrading protobuf/numpy over the DLC's would break neuronx-cc."""
    text = (locks().constraints_path(locks().locks["ray-neuronx"])).read_text()
    assert "protobuf>=3.18.3,<4" in text and "numpy>1.21,<1.24" in text
    pinned = parse_lock(locks().locks["ray-neuronx"].path.read_text())
    assert "protobuf" not in pinned and "numpy" not in pinned


def test_the_efa_dlc_lock_is_the_one_its_image_gets_and_adds_nothing_over_the_images_packages() -> None:
    """AWS's Ray LLM DLC (Python 3.13, Amazon Linux 2023) already ships what the app builder needs, at
    versions inside llmctl's floors: its lock resolves to them and installs nothing over the image."""
    pinned = versions().images["ray_vllm_gpu_efa"]
    spec = lock_for("ray-vllm", pinned.image)
    assert spec.name == "ray-vllm-gpu-efa" and locks().base(spec).python == "3.13"
    assert locks().base(spec).platform == "x86_64-manylinux_2_34"  # Amazon Linux 2023: glibc 2.34
    assert parse_lock(spec.path.read_text()) == {}
    text = locks().constraints_path(spec).read_text()
    # the image's own uv.lock: the Ray, vLLM and NCCL versions.yaml records for it
    for line in (
        f"ray=={pinned.ray}",
        f"vllm=={pinned.vllm}",
        "nvidia-nccl-cu13==2.28.9",
        "pydantic==2.13.5",
    ):
        assert line in text.splitlines(), line
    assert {"pydantic", "pyyaml"} <= set(requirement_names(spec.requirements_path))
