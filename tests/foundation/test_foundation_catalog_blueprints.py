"""Every catalog blueprint validates, and every kind of broken blueprint fails with the right message."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmctl.blueprints.catalog import catalog_names, load_blueprint, validate_ref
from llmctl.blueprints.rules import engine_of, is_gated
from llmctl.errors import BlueprintError

SEED_BLUEPRINTS = {
    # name: (runtime, instance, tp, model id)
    "llama2-inf2": ("ray-neuronx", "inf2.48xlarge", 24, "NousResearch/Llama-2-13b-chat-hf"),
    "llama2-torchserve-inf2": ("torchserve-neuronx", "inf2.24xlarge", 12, "meta-llama/Llama-2-13b-hf"),
    "llama3-vllm-inf2": ("ray-vllm", "inf2.8xlarge", 2, "NousResearch/Meta-Llama-3-8B-Instruct"),
    "llama2-70b-vllm-gpu": ("ray-vllm", "p4de.24xlarge", 4, "meta-llama/Llama-2-70b-chat-hf"),
    "llama2-7b-cpu": ("ray-cpu", "m7i.8xlarge", 1, "meta-llama/Llama-2-7b-chat-hf"),
    "llama2-triton-vllm-gpu": ("triton-vllm", "g5.2xlarge", 1, "meta-llama/Llama-2-7b-chat-hf"),
    "tiny-cpu": ("ray-cpu", "m5.xlarge", 1, "HuggingFaceTB/SmolLM2-135M-Instruct"),
    # not a seed's: the first model beyond one node (issue 55), tp 8 on each of two nodes
    "llama31-405b-vllm-gpu": ("ray-vllm", "p5.48xlarge", 8, "meta-llama/Llama-3.1-405B-Instruct"),
}


def test_catalog_holds_every_seed_system() -> None:
    assert set(catalog_names()) == set(SEED_BLUEPRINTS)


@pytest.mark.parametrize("name", sorted(SEED_BLUEPRINTS))
def test_catalog_blueprint_is_valid_and_matches_its_seed(name: str) -> None:
    bp = load_blueprint(name)
    runtime, instance, tp, model = SEED_BLUEPRINTS[name]
    assert bp.name == name
    assert (bp.runtime, bp.compute.instance_type, bp.compute.tensor_parallel, bp.model.id) == (
        runtime,
        instance,
        tp,
        model,
    )


def test_seed_specific_settings() -> None:
    assert load_blueprint("llama2-inf2").ui == "gradio"
    assert load_blueprint("llama3-vllm-inf2").ui == "open-webui"
    torchserve = load_blueprint("llama2-torchserve-inf2")
    assert torchserve.serving.streaming and torchserve.serving.micro_batch_size > 1
    assert load_blueprint("llama2-7b-cpu").model.dtype == "int8"
    triton = load_blueprint("llama2-triton-vllm-gpu").scaling
    assert (triton.min_replicas, triton.max_replicas) == (1, 5)
    assert load_blueprint("llama2-70b-vllm-gpu").scaling.replicas > 1
    # every Neuron runtime reuses compiled artifacts through the S3 cache by default (vLLM included)
    neuron = [load_blueprint(name) for name in SEED_BLUEPRINTS if load_blueprint(name).is_neuron]
    assert {bp.runtime for bp in neuron} == {"ray-neuronx", "torchserve-neuronx", "ray-vllm"}
    assert all(bp.caches.compile_cache for bp in neuron)


def test_engines_and_gating() -> None:
    assert engine_of(load_blueprint("llama2-inf2")) == "transformers-neuronx"
    assert engine_of(load_blueprint("llama3-vllm-inf2")) == "vllm-neuron"
    assert engine_of(load_blueprint("llama2-70b-vllm-gpu")) == "vllm-cuda"
    assert engine_of(load_blueprint("tiny-cpu")) == "transformers-cpu"
    assert is_gated(load_blueprint("llama2-70b-vllm-gpu")) is True
    assert is_gated(load_blueprint("llama2-inf2")) is False  # the blueprint overrides the catalog (mirror)
    assert is_gated(load_blueprint("tiny-cpu")) is False


def test_a_user_file_path_is_accepted(write_blueprint: Callable[..., Path]) -> None:
    path = write_blueprint("tiny-cpu", {"name": "my-tiny"})
    assert load_blueprint(str(path)).name == "my-tiny"


def _problems(path: Path) -> list[tuple[str, str]]:
    with pytest.raises(BlueprintError) as info:
        load_blueprint(str(path))
    assert info.value.source == str(path)
    assert str(path) in info.value.message
    return info.value.problems


def _one(problems: list[tuple[str, str]], field: str) -> str:
    matches = [message for path, message in problems if path == field]
    assert matches, f"no problem at {field}: {problems}"
    return matches[0]


BROKEN: list[tuple[str, dict[str, Any], str, str]] = [
    # base, changes, field path, text the message must contain
    ("llama2-inf2", {"runtime": "triton-vllm"}, "runtime", "does not run on inferentia2"),
    (
        "llama2-inf2",
        {
            "image.base": "public.ecr.aws/neuron/pytorch-inference-neuronx:2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04",
            "image.neuron_sdk": "2.26.1",
        },
        "image.neuron_sdk",
        "transformers-neuronx does not run on Neuron SDK 2.26.1",
    ),
    (
        # the SDK named twice: a tag moved to SDK 2.30 alone must not keep transformers-neuronx "valid"
        "llama2-inf2",
        {
            "image.base": "public.ecr.aws/neuron/pytorch-inference-neuronx:2.7.0-neuronx-py310-sdk2.30.0-ubuntu22.04"
        },
        "image.neuron_sdk",
        "carries Neuron SDK 2.30.0",
    ),
    (
        "llama3-vllm-inf2",
        {"image.neuron_sdk": "2.31.1", "image.vllm": "0.21.0"},
        "image.neuron_sdk",
        "does not support inf2",
    ),
    (
        "llama3-vllm-inf2",
        {"image.neuron_sdk": "2.20.0"},
        "image.neuron_sdk",
        "vllm-neuron does not run on Neuron SDK 2.20.0",
    ),
    (
        "llama3-vllm-inf2",
        {"compute.tensor_parallel": 12},
        "compute.tensor_parallel",
        "tp 12 is not allowed on inferentia2",
    ),
    (
        "llama2-inf2",
        {"compute.instance_type": "inf2.24xlarge"},
        "compute.tensor_parallel",
        "larger than the 12 NeuronCores of inf2.24xlarge",
    ),
    (
        "llama2-70b-vllm-gpu",
        {"compute.instance_type": "g5.12xlarge"},
        "compute",
        "does not fit g5.12xlarge at tp 4",
    ),
    (
        "llama2-70b-vllm-gpu",
        {"compute.instance_type": "p4de.24xl"},
        "compute.instance_type",
        "did you mean 'p4de.24xlarge'",
    ),
    (
        "tiny-cpu",
        {"compute.instance_type": "inf2.xlarge"},
        "compute.instance_type",
        "carries inferentia2, not cpu",
    ),
    (
        "tiny-cpu",
        {"ui": "gradio", "runtime": "ray-cpu", "model.max_context": 9000},
        "model.max_context",
        "exceeds the 8192 tokens",
    ),
    ("llama2-triton-vllm-gpu", {"ui": "gradio"}, "ui", "gradio talks to the /infer route"),
    ("llama2-triton-vllm-gpu", {"caches.compile_cache": True}, "caches.compile_cache", "Neuron artifacts"),
    (
        "llama2-70b-vllm-gpu",
        {"compute.tensor_parallel": 2, "model.id": "HuggingFaceTB/SmolLM2-135M-Instruct"},
        "compute",
        "9 attention heads do not divide by tp 2",
    ),
]


@pytest.mark.parametrize(
    ("base", "changes", "field", "text"), BROKEN, ids=[f"{b[2]}:{b[3][:30]}" for b in BROKEN]
)
def test_rules_reject_what_cannot_run(
    write_blueprint: Callable[..., Path], base: str, changes: dict[str, Any], field: str, text: str
) -> None:
    assert text in _one(_problems(write_blueprint(base, changes)), field)


SCHEMA_BROKEN: list[tuple[str, dict[str, Any], str, str]] = [
    ("tiny-cpu", {"model.dtyp": "bf16"}, "model.dtyp", "did you mean 'dtype'"),
    ("tiny-cpu", {"runtime": "ray-cpus"}, "runtime", "did you mean 'ray-cpu'"),
    ("tiny-cpu", {"image.base": "rayproject/ray:latest"}, "image.base", "uses 'latest'"),
    ("tiny-cpu", {"image.base": "rayproject/ray"}, "image.base", "has no tag"),
    ("tiny-cpu", {"exposure": {"mode": "public"}}, "exposure", "must set api_key: true"),
    # issue 45: a public endpoint names its client networks and terminates TLS at the load balancer
    ("tiny-cpu", {"exposure": {"mode": "public", "api_key": True}}, "exposure", "must list allowed_cidrs"),
    (
        "tiny-cpu",
        {"exposure": {"mode": "public", "api_key": True, "allowed_cidrs": ["203.0.113.0/24"]}},
        "exposure",
        "must set tls_certificate_arn",
    ),
    (
        "tiny-cpu",
        {
            "exposure": {
                "mode": "internal-lb",
                "tls_certificate_arn": "arn:aws:iam::123456789012:server-certificate/x",
            }
        },
        "exposure.tls_certificate_arn",
        "is not an ACM certificate ARN",
    ),
    (
        "tiny-cpu",
        {"scaling": {"replicas": 3, "min_replicas": 1, "max_replicas": 2}},
        "scaling",
        "must lie between",
    ),
    ("tiny-cpu", {"name": "Tiny_CPU"}, "name", "lowercase"),
    ("tiny-cpu", {"compute.tensor_parallel": 0}, "compute.tensor_parallel", "greater than or equal to 1"),
]


@pytest.mark.parametrize(
    ("base", "changes", "field", "text"), SCHEMA_BROKEN, ids=[s[2] for s in SCHEMA_BROKEN]
)
def test_schema_errors_name_the_field(
    write_blueprint: Callable[..., Path], base: str, changes: dict[str, Any], field: str, text: str
) -> None:
    assert text in _one(_problems(write_blueprint(base, changes)), field)


def test_missing_required_field(write_blueprint: Callable[..., Path], delete: object) -> None:
    assert "Field required" in _one(
        _problems(write_blueprint("tiny-cpu", {"compute.instance_type": delete})), "compute.instance_type"
    )


def test_yaml_syntax_error_names_the_line(write_blueprint: Callable[..., Path]) -> None:
    path = write_blueprint("tiny-cpu", raw="name: x\nmodel: [unclosed\n")
    with pytest.raises(BlueprintError, match="not valid YAML at line"):
        load_blueprint(str(path))


def test_not_a_mapping(write_blueprint: Callable[..., Path]) -> None:
    with pytest.raises(BlueprintError, match="must be a YAML mapping"):
        load_blueprint(str(write_blueprint("tiny-cpu", raw="- a\n- b\n")))


def test_unknown_name_suggests_closest() -> None:
    with pytest.raises(BlueprintError, match="did you mean 'llama2-inf2'"):
        load_blueprint("llama2-inf")


def test_missing_file() -> None:
    with pytest.raises(BlueprintError, match="does not exist"):
        load_blueprint("./nowhere/blueprint.yaml")


def test_validate_ref_collects_without_raising(write_blueprint: Callable[..., Path]) -> None:
    report = validate_ref(str(write_blueprint("tiny-cpu", {"runtime": "ray-vllm"})))
    assert not report.ok and report.problems and report.problems[0][0] == "runtime"
    assert validate_ref("tiny-cpu").ok
