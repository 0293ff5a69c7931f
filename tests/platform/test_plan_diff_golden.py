"""Golden tests of `llmctl plan diff`: offline plans of a blueprint before and after a change (replicas,
tensor parallelism, instance type, read from modified copies of the catalog file) and of a platform
change (among them one that makes Karpenter replace a pool's running nodes: `drift`), compared in every
output format with the files under golden/plan_diff/.

Regenerate the golden files after an intended change with `LLMCTL_UPDATE_GOLDEN=1` (then review
their diff like any other change)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.plan.run import offline_plan

# its module-scoped fixture is built once: every test of this file on the same xdist worker
pytestmark = pytest.mark.xdist_group("test_plan_diff_golden")

GOLDEN = Path(__file__).parent / "golden" / "plan_diff"
UPDATE = os.environ.get("LLMCTL_UPDATE_GOLDEN") == "1"
CATALOG = Path(__file__).parents[2] / "blueprints" / "catalog"
BASE = "llama2-70b-vllm-gpu"
FORMATS = {"text": "txt", "markdown": "md", "json": "json"}
runner = CliRunner()


def _blueprint_copy(folder: Path, name: str, change: dict[str, dict[str, Any]]) -> str:
    """A copy of the catalog blueprint with `change` ({section: {field: value}}) applied, as a file."""
    data = yaml.safe_load((CATALOG / f"{BASE}.yaml").read_text(encoding="utf-8"))
    for section, fields in change.items():
        data[section].update(fields)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def _write(path: Path, refs: list[str], **overrides: Any) -> Path:
    plan = offline_plan(refs, stack="ci", overrides=overrides or None)
    path.write_text(json.dumps(plan.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path


# case: (blueprint change, platform settings, more blueprints in the environment)
CASES: dict[str, tuple[dict[str, dict[str, Any]], dict[str, Any], list[str]]] = {
    "replicas": ({"scaling": {"replicas": 2}}, {}, []),
    "tensor-parallel": ({"compute": {"tensor_parallel": 8}}, {}, []),
    "instance-type": ({"compute": {"instance_type": "p5.48xlarge"}}, {}, []),
    # the API endpoint (private by default) opened to one range
    "platform-endpoint": ({}, {"endpoint": {"public": True, "public_cidrs": ["203.0.113.0/24"]}}, []),
    # a second workload joins the environment: the platform grows by its pool and the Neuron chart
    "platform-second-workload": ({}, {}, ["llama2-inf2"]),
    # a larger root volume on the GPU pool (issue 55's 405B): Karpenter replaces every GPU node (drift)
    "gpu-root-volume": ({}, {"root_volume_gib": {"gpu-nvidia": 1200}}, []),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, Path]]]:
    """(old, new) plan files per case; the user's catalog refresh overlay is kept out of the prices."""
    folder = tmp_path_factory.mktemp("plans")
    saved = os.environ.get("LLMCTL_STATE_DIR")
    os.environ["LLMCTL_STATE_DIR"] = str(folder / "state")
    try:
        base = _write(folder / "base.json", [_blueprint_copy(folder, "base", {})])
        pairs = {}
        for case, (change, overrides, more) in CASES.items():
            ref = _blueprint_copy(folder, case, change)
            pairs[case] = (base, _write(folder / f"{case}.json", [ref, *more], **overrides))
        yield pairs
    finally:
        if saved is None:
            os.environ.pop("LLMCTL_STATE_DIR", None)
        else:
            os.environ["LLMCTL_STATE_DIR"] = saved


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("case", list(CASES))
def test_plan_diff_matches_golden(plans: dict[str, tuple[Path, Path]], case: str, fmt: str) -> None:
    old, new = plans[case]
    result = runner.invoke(app, ["plan", "diff", str(old), str(new), "--format", fmt])
    assert result.exit_code == 1, result.output  # something changed
    golden = GOLDEN / f"{case}.{FORMATS[fmt]}"
    if UPDATE:
        golden.write_text(result.stdout, encoding="utf-8")
    assert result.stdout == golden.read_text(encoding="utf-8")


def test_same_plan_has_no_changes(plans: dict[str, tuple[Path, Path]]) -> None:
    base, _ = plans["replicas"]
    for fmt in FORMATS:
        result = runner.invoke(app, ["plan", "diff", str(base), str(base), "--format", fmt])
        assert result.exit_code == 0, result.output
    data = json.loads(runner.invoke(app, ["plan", "diff", str(base), str(base), "--format", "json"]).stdout)
    assert data["changed"] is False and data["resources"] == [] and data["cost"]["hourly_usd_delta"] == 0
