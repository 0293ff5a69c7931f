"""Sizing reproduces the seed's Llama-2 table; cost reproduces the seed blog's $/1k tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.hardware import hardware, in_range
from llmctl.blueprints.models import catalog_models, from_config, lookup_model
from llmctl.blueprints.pricing import blueprint_cost, node_plan, usd_per_1k_tokens
from llmctl.blueprints.sizing import size_model
from llmctl.errors import CatalogError


@pytest.mark.parametrize(
    ("model", "cores", "devices"),
    [
        ("meta-llama/Llama-2-7b-hf", 1, 1),
        ("meta-llama/Llama-2-13b-hf", 2, 1),
        ("meta-llama/Llama-2-70b-hf", 9, 5),
    ],
)
def test_seed_neuron_table(model: str, cores: int, devices: int) -> None:
    arch = lookup_model(model)
    report = size_model(
        arch, hardware(), accelerator="inferentia2", dtype="fp16", context=arch.max_context, batch=1
    )
    assert (report.neuron_cores, report.neuron_devices) == (cores, devices)


def test_weights_and_kv_match_facts() -> None:
    models = catalog_models()
    assert round(models["llama-2-7b"].weights_gb("bf16"), 1) == 13.5
    assert round(models["llama-2-70b"].weights_gb("bf16")) == 138
    assert round(models["llama-3-8b"].weights_gb("bf16"), 1) == 16.1
    # KV bytes per token: 512 KiB, 800 KiB, 320 KiB, 128 KiB
    assert models["llama-2-7b"].kv_bytes_per_token("bf16") == 512 * 1024
    assert models["llama-2-13b"].kv_bytes_per_token("bf16") == 800 * 1024
    assert models["llama-2-70b"].kv_bytes_per_token("bf16") == 320 * 1024
    assert models["llama-3-8b"].kv_bytes_per_token("bf16") == 128 * 1024


def test_gqa_kv_is_replicated_up_to_tp() -> None:
    arch = catalog_models()["llama-2-70b"]  # 8 KV heads
    assert arch.kv_cache_gb("bf16", 4096, 1, tp=24) == pytest.approx(
        3 * arch.kv_cache_gb("bf16", 4096, 1, tp=8)
    )


def test_options_and_recommendation() -> None:
    arch = lookup_model("llama-2-13b")
    report = size_model(arch, hardware(), accelerator="inferentia2", dtype="fp16", context=4096, batch=1)
    by_type = {o.instance_type: o for o in report.options}
    # the host check is Karpenter's allocatable less the DaemonSets: inf2.xlarge (16 GiB) lets a pod
    # request (14162 - 385) MiB = 14.4 GB, too little for two copies of 26 GB of weights + runtime
    assert not by_type["inf2.xlarge"].fits
    assert (
        "needs 72.8 GB of host memory; inf2.xlarge lets a pod request 14.4 GB"
        in by_type["inf2.xlarge"].reason
    )
    assert by_type["inf2.8xlarge"].fits and by_type["inf2.8xlarge"].tp_degree == 2
    assert report.recommended is not None and report.recommended.instance_type == "inf2.8xlarge"
    data = report.to_dict()
    assert set(data) >= {
        "weights_gb",
        "kv_cache_gb",
        "neuron_cores",
        "neuron_devices",
        "gpus",
        "options",
        "recommended",
    }
    assert data["recommended"] == {"instance_type": "inf2.8xlarge", "tp_degree": 2}
    assert set(data["options"][0]) >= {"instance_type", "tp_degree", "fits", "hourly_usd"}


def test_gpu_sizing_counts_gpus_and_heads() -> None:
    arch = lookup_model("llama-2-70b")
    report = size_model(arch, hardware(), accelerator="nvidia", dtype="bf16", context=4096, batch=1)
    assert report.gpus is not None and report.gpus >= 2
    assert report.recommended is not None
    assert report.neuron_cores is None


def test_nothing_fits_gives_no_recommendation() -> None:
    arch = lookup_model("llama-3.1-70b")
    report = size_model(arch, hardware(), accelerator="cpu", dtype="fp32", context=131072, batch=8)
    assert report.recommended is None and not any(o.fits for o in report.options)


def test_params_from_config_json(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = lookup_model(str(tmp_path))
    assert arch.params_b == pytest.approx(catalog_models()["llama-2-7b"].params_b, rel=0.001)
    with pytest.raises(CatalogError, match="lacks decoder fields"):
        from_config({"hidden_size": 8}, "broken")


def test_unknown_model_offline() -> None:
    with pytest.raises(CatalogError, match="did you mean 'llama-2-13b'"):
        lookup_model("llama-2-13", allow_hub=False)


def test_version_ranges() -> None:
    assert in_range("2.25.0", None, "2.25")
    assert not in_range("2.26.1", None, "2.25")
    assert in_range("2.27.1", "2.27", "2.31")
    assert not in_range("2.20.0", "2.27", "2.31")


def test_seed_cost_per_1k_tokens() -> None:
    # The blog: inf2.48xlarge at about $5.15/h, 130 tok/s (7B) and 90 tok/s (13B).
    report = blueprint_cost(load_blueprint("llama2-inf2"), hardware(), node_price=5.15, throughputs=[130, 90])
    assert [round(r.usd_per_1k_output_tokens, 3) for r in report.per_1k_tokens] == [0.011, 0.016]
    assert (
        report.per_1k_tokens[0].usd_per_1k_output_tokens_with_platform
        > report.per_1k_tokens[0].usd_per_1k_output_tokens
    )
    assert usd_per_1k_tokens(3.6, 1.0) == pytest.approx(1.0)


def test_node_plan_packs_replicas() -> None:
    plan = node_plan(load_blueprint("llama2-70b-vllm-gpu"), hardware())  # tp 4 on 8 GPUs, 4 replicas
    assert (plan.replicas_per_node, plan.nodes, plan.nodes_max) == (2, 2, 2)
    cpu = node_plan(load_blueprint("llama2-7b-cpu"), hardware())  # 30 of 32 vCPUs per replica
    assert (cpu.replicas_per_node, cpu.nodes, cpu.nodes_max) == (1, 2, 3)


def test_pricing_models() -> None:
    catalog = hardware()
    bp = load_blueprint("llama2-inf2")
    on_demand = blueprint_cost(bp, catalog)
    reserved = blueprint_cost(bp, catalog, pricing="reserved-3y")
    assert on_demand.serving_hourly_usd == pytest.approx(12.981)
    assert reserved.serving_hourly_usd == pytest.approx(5.608)
    assert on_demand.total_hourly_usd == pytest.approx(12.981 + catalog.platform_hourly())
    # EKS control plane + one NAT gateway + the platform's two m5.xlarge core nodes
    assert catalog.platform_hourly() == pytest.approx(0.10 + 0.045 + 2 * 0.192)
    with pytest.raises(CatalogError, match="no spot price"):
        blueprint_cost(bp, catalog, pricing="spot")


def test_quota_codes() -> None:
    catalog = hardware()
    assert catalog.quota_for(catalog.instance("inf2.48xlarge")).code == "L-1945791B"  # type: ignore[union-attr]
    assert catalog.quota_for(catalog.instance("trn1.32xlarge")).code == "L-2C3B7624"  # type: ignore[union-attr]
    assert catalog.quota_for(catalog.instance("g5.2xlarge")).code == "L-DB2E81BA"  # type: ignore[union-attr]
    assert catalog.quota_for(catalog.instance("p5.48xlarge")).code == "L-417A185B"  # type: ignore[union-attr]
    assert catalog.quota_for(catalog.instance("inf2.xlarge"), spot=True).code == "L-B5D1601B"  # type: ignore[union-attr]


def test_hub_unreachable_says_how_to_continue(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    # huggingface_hub reads HF_HUB_OFFLINE once, at import: set the flag itself so no request leaves
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(CatalogError) as info:
        lookup_model("some-org/some-unknown-model")
    assert "could not be fetched" in info.value.message
    assert info.value.hint is not None and "local directory" in info.value.hint
