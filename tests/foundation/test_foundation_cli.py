"""The foundation commands through Typer's CliRunner, including the error boundary."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from llmctl import __version__
from llmctl.cli.app import app

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_version() -> None:
    code, out, _ = invoke("--version")
    assert code == 0 and out.strip() == f"llmctl {__version__}"


def test_help_lists_commands() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    for command in ("blueprints", "size", "cost", "catalog"):
        assert command in out


def test_blueprints_list_json() -> None:
    code, out, _ = invoke("blueprints", "list", "--json")
    assert code == 0
    rows = json.loads(out)["blueprints"]
    assert {r["name"] for r in rows} >= {"llama2-inf2", "tiny-cpu", "llama2-triton-vllm-gpu"}
    assert all(r["hourly_usd"] > 0 for r in rows)


def test_blueprints_list_table() -> None:
    code, out, _ = invoke("blueprints", "list")
    assert code == 0 and "llama2-torchserve-inf2" in out and "inf2.48xlarge" in out


def test_blueprints_show() -> None:
    code, out, _ = invoke("blueprints", "show", "llama2-inf2", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["blueprint"]["compute"]["tensor_parallel"] == 24
    assert data["derived"]["engine"] == "transformers-neuronx"
    code, out, _ = invoke("blueprints", "show", "llama2-inf2")
    assert code == 0 and "tensor_parallel: 24" in out


def test_validate_catalog_passes() -> None:
    code, out, _ = invoke("blueprints", "validate")
    assert code == 0 and out.count("✓") == 8


def test_validate_broken_file_fails(write_blueprint: Callable[..., Path]) -> None:
    path = write_blueprint("llama2-inf2", {"compute.tensor_parallel": 32})
    code, out, err = invoke("blueprints", "validate", str(path), "tiny-cpu")
    assert code == 2
    assert "compute.tensor_parallel" in out and "tp 32 is not allowed" in out
    assert "1 of 2 blueprint(s) failed" in err
    code, out, _ = invoke("blueprints", "validate", str(path), "--json")
    data = json.loads(out)
    assert code == 2 and data["ok"] is False
    assert data["results"][0]["problems"][0]["path"] == "compute.tensor_parallel"


def test_schema_reference() -> None:
    code, out, _ = invoke("blueprints", "schema", "--json")
    schema = json.loads(out)
    assert code == 0 and "compute" in schema["properties"]
    code, out, _ = invoke("blueprints", "schema")
    assert code == 0 and "compute.tensor_parallel" in out and "exposure.api_key" in out


def test_size_json_keys() -> None:
    code, out, _ = invoke("size", "meta-llama/Llama-2-70b-chat-hf", "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["neuron_cores"], data["neuron_devices"]) == (9, 5)
    assert data["recommended"] == {"instance_type": "inf2.48xlarge", "tp_degree": 24}


def test_size_table_and_gpu() -> None:
    code, out, _ = invoke(
        "size", "llama-3-8b", "--accelerator", "nvidia", "--dtype", "bf16", "--context", "8192"
    )
    assert code == 0 and "recommended:" in out and "GPU" in out


def test_cost_reproduces_seed() -> None:
    code, out, _ = invoke(
        "cost", "--blueprint", "llama2-inf2", "--node-price", "5.15", "-t", "130", "-t", "90", "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert [round(row["usd_per_1k_output_tokens"], 3) for row in data["per_1k_tokens"]] == [0.011, 0.016]
    code, out, _ = invoke("cost", "--blueprint", "llama2-inf2", "--node-price", "5.15", "-t", "130")
    assert code == 0 and "0.011" in out


def test_cost_missing_price_is_a_clean_error() -> None:
    code, out, err = invoke("cost", "--blueprint", "llama2-inf2", "--pricing", "spot", "--json")
    assert code == 2
    assert "no spot price" in err and "--node-price" in err
    assert json.loads(out)["error"] == "CatalogError"


def test_error_boundary_debug_shows_traceback() -> None:
    code, _, err = invoke("size", "no-such-model")
    assert code == 2 and "Traceback" not in err and "unknown model" in err
    code, _, err = invoke("--debug", "size", "no-such-model")
    assert code == 2 and "Traceback" in err


def test_catalog_commands() -> None:
    code, out, _ = invoke("catalog", "instances", "--accelerator", "trainium", "--json")
    names = {r["name"] for r in json.loads(out)["instances"]}
    assert code == 0 and names == {"trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge"}
    code, _, err = invoke("catalog", "instances", "--accelerator", "gpu")
    assert code == 2 and "unknown accelerator" in err
    code, out, _ = invoke("catalog", "models", "--json")
    assert code == 0 and any(m["key"] == "mistral-7b" for m in json.loads(out)["models"])


def test_bad_option_value_is_a_usage_error() -> None:
    code, _, err = invoke("size", "llama-2-7b", "--batch", "0")
    assert code == 2 and "Invalid value" in err
