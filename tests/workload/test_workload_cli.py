"""`llmctl render` and `llmctl validate` through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from llmctl.cli.app import app

runner = CliRunner()


def test_render_prints_a_stream_with_secrets_redacted(monkeypatch: object) -> None:
    result = runner.invoke(app, ["render", "--blueprint", "llama2-7b-cpu"])
    assert result.exit_code == 0, result.output
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = [d["kind"] for d in documents]
    assert [k for k in kinds if k != "NetworkPolicy"] == [
        "Namespace",
        "ServiceAccount",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",  # the tenant guard (builders/admission.py, issue 53 finding 2)
        "ValidatingAdmissionPolicyBinding",
        "Secret",
        "RayService",
    ]
    assert find_secret(documents)["stringData"] == {"HF_TOKEN": "<redacted>"}


def find_secret(documents: list[dict[str, object]]) -> dict[str, object]:
    return next(d for d in documents if d["kind"] == "Secret")


def test_render_out_dir_and_json(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", "-b", "llama3-vllm-inf2", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report) == {
        "blueprint",
        "namespace",
        "endpoint",
        "objects",
        "files",
        "yaml",
        "unpinned_images",
    }
    assert (
        report["endpoint"]["service"] == "llama3-vllm-inf2-serve-svc" and report["endpoint"]["port"] == 8000
    )
    assert report["endpoint"]["dashboard_service"] == "llama3-vllm-inf2-head-svc"
    assert len(report["files"]) == len(report["objects"]) == len(list(tmp_path.iterdir()))


def test_validate_ok_and_json() -> None:
    result = runner.invoke(app, ["validate", "--blueprint", "llama2-inf2"])
    assert result.exit_code == 0, result.output
    assert "ok llama2-inf2" in result.stdout
    report = json.loads(runner.invoke(app, ["validate", "-b", "llama2-inf2", "--json"]).stdout)
    assert report["ok"] is True and report["problems"] == []
    assert "RayService/llama2-inf2 (worker group inf2)" in report["pods"]
    assert {p["name"] for p in report["pools"]} == {"core", "default", "ray-head", "inferentia-inf2"}


def test_validate_runs_blueprint_rules(tmp_path: Path) -> None:
    from llmctl.blueprints.catalog import load_blueprint

    data = load_blueprint("llama2-inf2").model_dump(mode="json")
    data["compute"]["tensor_parallel"] = 48  # more cores than inf2.48xlarge has
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["validate", "-b", str(path)])
    assert result.exit_code == 2
    assert "compute.tensor_parallel" in result.stderr


def test_validate_unknown_blueprint_is_a_clean_error() -> None:
    result = runner.invoke(app, ["validate", "-b", "llama2-inf3"])
    assert result.exit_code != 0
    assert "did you mean 'llama2-inf2'" in result.stderr
    assert "Traceback" not in result.output


def test_validate_lists_every_problem_and_exits_non_zero(tmp_path: Path) -> None:
    from llmctl.blueprints.catalog import load_blueprint

    data = load_blueprint("tiny-cpu").model_dump(mode="json")
    data["compute"]["cpus_per_replica"] = (
        4  # the whole m5.xlarge: allowed by the rules, no room for daemonsets
    )
    path = tmp_path / "whole-node.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["validate", "-b", str(path)])
    assert result.exit_code == 2
    assert "RayService/tiny-cpu (worker group cpu)" in result.stderr
    assert "cpu 4 > 3.44" in result.stderr and "fix:" in result.stderr
    report = json.loads(runner.invoke(app, ["validate", "-b", str(path), "--json"]).stdout)
    assert report["ok"] is False
    assert report["problems"][0]["where"] == "worker group cpu"


def test_validate_reports_the_serving_replicas_need_margin_and_node() -> None:
    result = runner.invoke(app, ["validate", "-b", "llama3-vllm-inf2"])
    assert result.exit_code == 0, result.output
    # Llama-3-8B bf16 on inf2.8xlarge: two 14.96 GiB copies + 8 GiB runtime, + 20 %; the node offers
    # (118312 - 385) MiB = 115.2 GiB to a pod
    assert "memory 46.0 GiB = need 37.9 GiB (weights 29.9, runtime 8.0) + margin 8.1 GiB" in result.stdout
    assert "inf2.8xlarge offers a pod 31.114 vCPU / 115.2 GiB" in result.stdout
    report = json.loads(runner.invoke(app, ["validate", "-b", "llama3-vllm-inf2", "--json"]).stdout)
    serving = report["serving"]
    assert serving["requests"]["memory_gib"] == 46.0 and serving["margin"]["memory_gib"] == 8.09
    assert serving["need"]["total_gib"] == 37.91 and serving["node"]["memory_gib"] == 115.16
    assert serving["limits"]["memory_gib"] == 115.0
