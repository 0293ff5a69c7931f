"""The runtime registry: every runtime has all its parts, and its name lives in three places only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from llmctl.blueprints.runtimes import RuntimeName, runtime, runtime_names, runtimes
from llmctl.errors import BlueprintError

ROOT = Path(__file__).resolve().parents[2]
NAMES = [spec.name for spec in runtimes()]
TODAY = {"ray-neuronx", "ray-vllm", "triton-vllm", "torchserve-neuronx", "ray-cpu"}  # when the registry came
# Files outside the three places that may still name a runtime, and why.
ALLOWED_ELSEWHERE = {
    # the --runtime help text: cli/ option declarations move to cli/options.py in the same issue
    "cli/images.py",
}


def test_the_schema_type_and_the_registry_list_the_same_runtimes() -> None:
    from llmctl.blueprints.schema import RUNTIMES as SCHEMA_RUNTIMES
    from llmctl.blueprints.schema import Blueprint

    assert tuple(get_args(RuntimeName)) == runtime_names() == SCHEMA_RUNTIMES
    assert len(set(NAMES)) == len(NAMES)
    assert Blueprint.model_json_schema()["properties"]["runtime"]["enum"] == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_runtime_has_a_builder(name: str) -> None:
    from llmctl.infra.workload.builders.registry import builder_for, module_name

    spec = runtime(name)
    builder = builder_for(name)
    assert builder.runtime == name and callable(builder.build)
    assert (builder.service is not None) == (spec.endpoint == "service")
    assert module_name(name) == f"llmctl.infra.workload.builders.{spec.package}"
    assert (ROOT / "infra" / "workload" / "builders" / f"{spec.package}.py").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_every_runtime_has_a_serving_package_with_a_dockerfile(name: str) -> None:
    folder = ROOT / "serving" / runtime(name).package
    assert (folder / "__init__.py").is_file()
    assert (folder / "Dockerfile").is_file()
    assert (folder / "requirements.txt").is_file()


@pytest.mark.parametrize("name", NAMES)
def test_every_runtime_has_a_versions_entry(name: str) -> None:
    from llmctl.blueprints.versions import versions

    assert versions().images[runtime(name).versions_key].image


@pytest.mark.parametrize("name", NAMES)
def test_every_serving_package_goes_into_the_wheel(name: str, built_packages: set[str]) -> None:
    assert f"llmctl.serving.{runtime(name).package}" in built_packages


def test_every_accelerator_has_a_runtime_and_every_runtime_a_known_accelerator() -> None:
    from llmctl.blueprints.hardware import hardware

    catalog = hardware()
    assert {a for spec in runtimes() for a in spec.accelerators} <= set(catalog.accelerators)
    assert all(catalog.accelerator(name).runtimes for name in catalog.accelerators)
    # the lists accelerators.yaml held before the registry (a runtime added later may join them)
    before = {
        "inferentia2": ["ray-neuronx", "ray-vllm", "torchserve-neuronx"],
        "trainium2": ["ray-vllm"],
        "nvidia": ["ray-vllm", "triton-vllm"],
        "cpu": ["ray-cpu"],
    }
    for accelerator, names in before.items():
        assert [n for n in catalog.accelerator(accelerator).runtimes if n in TODAY] == names


def test_capability_sets_read_from_the_registry() -> None:
    from llmctl.blueprints import rules

    def today(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(n for n in names if n in TODAY)

    # the sets rules.py spelled out before the registry
    assert today(rules.TRANSFORMERS_NEURONX) == ("ray-neuronx", "torchserve-neuronx")
    assert today(rules.INFER_ROUTE) == ("ray-neuronx", "ray-cpu")
    assert today(rules.OPENAI_API) == ("ray-neuronx", "ray-vllm", "ray-cpu")
    assert today(rules.API_KEY_CHECKED) == ("ray-neuronx", "torchserve-neuronx", "ray-cpu")
    assert runtime("ray-vllm").engine_on("inferentia2") == "vllm-neuron"
    assert runtime("ray-vllm").engine_on("nvidia") == "vllm-cuda"
    assert runtime("ray-cpu").uis == ("gradio", "open-webui", "none")
    assert runtime("triton-vllm").uis == ("none",)


def test_an_unknown_runtime_gets_a_did_you_mean() -> None:
    with pytest.raises(BlueprintError, match="unknown runtime 'ray-vlm'") as caught:
        runtime("ray-vlm")
    assert caught.value.hint == "did you mean 'ray-vllm'?"


def _python_files() -> list[Path]:
    """The project's .py files outside the tests (and the venvs, the typecheck tree, git, the GPU
    harness's ignored carry folder)."""
    skip = {"tests", ".venv", ".venv-checkov", "build", ".git", ".gpu"}
    tops = [path for path in ROOT.iterdir() if path.name not in skip]
    return [
        path
        for top in tops
        for path in ([top] if top.is_file() else top.rglob("*.py"))
        if path.suffix == ".py"
    ]


@pytest.mark.parametrize("name", NAMES)
def test_a_runtime_is_named_only_in_the_registry_its_builder_and_its_serving_folder(name: str) -> None:
    package = runtime(name).package
    allowed = {
        "blueprints/runtimes.py",
        f"infra/workload/builders/{package}.py",
        *ALLOWED_ELSEWHERE,
    }
    pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
    found = {
        str(path.relative_to(ROOT))
        for path in _python_files()
        if pattern.search(path.read_text(encoding="utf-8"))
    }
    stray = {f for f in found - allowed if not f.startswith(f"serving/{package}/")}
    assert not stray, (
        f"{name} is named outside its registry entry, builder and serving folder: {sorted(stray)}"
    )
    assert {"blueprints/runtimes.py", f"infra/workload/builders/{package}.py"} <= found
