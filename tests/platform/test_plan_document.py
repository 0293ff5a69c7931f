"""The offline plan document: every input (Helm values, policy documents), secrets redacted, the
workload stacks, the cost, and byte-identical output for the same inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pricing import blueprint_cost
from llmctl.cli.app import app
from llmctl.infra.plan.run import offline_plan
from llmctl.infra.plan.workload import PLACEHOLDER_HF_TOKEN

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_plan_document")

runner = CliRunner()


def _by_type(stack: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r for r in stack["resources"] if r["type"] == type_]


@pytest.fixture(scope="module")
def two_blueprints() -> dict[str, Any]:
    return offline_plan(["llama2-inf2", "llama2-70b-vllm-gpu"], stack="ci").to_dict()


def test_every_input_of_every_resource(two_blueprints: dict[str, Any]) -> None:
    platform = two_blueprints["stacks"][0]
    karpenter = next(
        r for r in _by_type(platform, "kubernetes:helm.sh/v3:Release") if r["name"] == "karpenter-release"
    )
    assert karpenter["inputs"]["values"]["settings"]["clusterName"] == "llmctl-ci"  # Helm values
    role = _by_type(platform, "aws:iam/role:Role")[0]
    assert "Statement" in role["inputs"]["assumeRolePolicy"]  # inputs the tree leaves out
    assert all("__defaults" not in r["inputs"] for r in platform["resources"])


def test_workload_stacks_and_union_platform(two_blueprints: dict[str, Any]) -> None:
    ids = [s["id"] for s in two_blueprints["stacks"]]
    assert ids == ["llmctl-platform/ci", "llmctl-llama2-70b-vllm-gpu/ci", "llmctl-llama2-inf2/ci"]
    assert {"inferentia-inf2", "gpu-nvidia"} <= set(two_blueprints["pools"])
    gpu = two_blueprints["stacks"][1]
    [service] = _by_type(gpu, "kubernetes:ray.io/v1:RayService")
    worker = service["inputs"]["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    assert worker["replicas"] == 4  # a whole number, not the engine protocol's 4.0
    # the gated model's token Secret: present, its data redacted, no token in the whole document
    [secret] = _by_type(gpu, "kubernetes:core/v1:Secret")
    assert secret["inputs"]["stringData"] == "[secret]"
    assert PLACEHOLDER_HF_TOKEN not in json.dumps(two_blueprints)


def test_cost_is_the_platform_once_plus_each_workload(two_blueprints: dict[str, Any]) -> None:
    catalog = hardware()
    cost = two_blueprints["cost"]
    serving = [
        blueprint_cost(load_blueprint(n), catalog).serving_hourly_usd for n in two_blueprints["blueprints"]
    ]
    assert [row["blueprint"] for row in cost["workloads"]] == ["llama2-70b-vllm-gpu", "llama2-inf2"]
    assert cost["hourly_usd"] == round(catalog.platform_hourly() + sum(serving), 4)
    assert cost["platform_hourly_usd"] == round(catalog.platform_hourly(), 4)


def test_same_inputs_give_identical_bytes_whatever_the_blueprint_order() -> None:
    args = ["plan", "--offline", "--json", "--stack", "ci"]
    first = runner.invoke(app, [*args, "-b", "tiny-cpu", "-b", "llama2-inf2"])
    second = runner.invoke(app, [*args, "-b", "llama2-inf2", "-b", "tiny-cpu"])
    assert first.exit_code == 0 and second.exit_code == 0, first.output
    assert first.stdout == second.stdout
    data = json.loads(first.stdout)
    assert list(data) == sorted(data)  # sorted keys


def test_generated_api_key_stays_secret(tmp_path: Any) -> None:
    import yaml

    from llmctl.blueprints._data import data_file
    from llmctl.blueprints.catalog import CATALOG_DIR

    raw = yaml.safe_load(data_file(CATALOG_DIR, "tiny-cpu.yaml").read_text(encoding="utf-8"))
    raw["exposure"] = {
        "mode": "public",
        "api_key": True,
        "allowed_cidrs": ["203.0.113.0/24"],
        "tls_certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
    }
    path = tmp_path / "keyed.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    data = offline_plan([str(path)]).to_dict()
    workload = data["stacks"][1]
    [secret] = _by_type(workload, "kubernetes:core/v1:Secret")
    assert secret["inputs"]["stringData"] == "[secret]"


def test_secrets_are_redacted_at_their_exact_path() -> None:
    from llmctl.infra.plan.doc import full_inputs
    from llmctl.infra.plan.offline import Registered

    res = Registered(
        urn="urn:pulumi:dev::p::t::n",
        type="t",
        name="n",
        parent=None,
        inputs={
            "values": {"token": "s3cr3t", "replicas": 2.0},
            "args": ["a", "s3cr3t"],
            "__defaults": [],
        },
        secret_inputs={"values.token", "args[1]"},
    )
    assert full_inputs(res) == {"args": ["a", "[secret]"], "values": {"replicas": 2, "token": "[secret]"}}
