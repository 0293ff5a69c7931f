"""The cold start beside the saving at zero (issue 28): the store of the last start timeline per
blueprint and target, the line `plan`, `cost` and `up` print from it, and a scenario through the
stand-in engine where an `up` on a cluster records the start that `cost` and `plan` then print.

The start is the recorded cold start of tests/lifecycle/data/timeline/cold.json (a Karpenter node,
an image pull, weights from the S3 mirror, a Neuron compile: 11m 29s in all)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from standin_support import StandinEngine
from test_existing_cluster import complete_cluster, files, lifecycle  # noqa: F401 (files: a fixture)
from test_timeline import recorded, timelines
from typer.testing import CliRunner

from llmctl.blueprints.catalog import load_blueprint, parse_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pricing import blueprint_cost
from llmctl.cli.app import app
from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.cold_start import at_zero, last_start, record_start, render_at_zero
from llmctl.infra.lifecycle.timeline import Phase, StartTimeline

BP = "llama2-inf2"
CATALOG_FILE = Path(__file__).parents[2] / "blueprints" / "catalog" / f"{BP}.yaml"


def to_zero(text: str) -> str:
    """The catalog blueprint with `min_replicas: 0` (Ray runtimes may scale to zero)."""
    changed = text.replace("  min_replicas: 1\n", "  min_replicas: 0\n")
    assert changed != text
    return changed


def zero_blueprint(tmp_path: Path) -> Path:
    path = tmp_path / f"{BP}.yaml"
    path.write_text(to_zero(CATALOG_FILE.read_text()))
    return path


def pending_start(pod: str) -> StartTimeline:
    return StartTimeline(pod=pod, node=None, phases=[Phase("node", "pending")], total_seconds=None)


def test_the_slowest_complete_start_is_kept_per_target_and_an_incomplete_up_keeps_the_last() -> None:
    (cold,) = timelines("cold")
    (warm,) = timelines("warm")
    assert last_start(BP) is None
    kept = record_start([warm, cold, pending_start("p")], blueprint=BP, target="eks", stack="dev")
    assert kept is not None and kept.pod == cold.pod and kept.total_seconds == 689.0
    assert [(p.name, p.status, p.seconds) for p in kept.phases][:2] == [
        ("node", "launched", 284.0),
        ("image", "pulled", 101.2),
    ]
    assert last_start(BP, "eks") == kept
    # an `up` whose pods never completed a start records nothing and keeps the last one
    assert record_start([pending_start("q")], blueprint=BP, target="eks", stack="dev") is None
    assert last_start(BP, "eks") == kept
    # per target: the kubeconfig record does not replace the eks one; without a target, the newest
    other = record_start([warm], blueprint=BP, target="kubeconfig", stack="lab", workload="pr-1")
    assert other is not None and other.workload == "pr-1"
    assert last_start(BP, "eks") == kept and last_start(BP, "kubeconfig") == other
    assert last_start(BP) in (kept, other) and last_start("llama3-vllm-inf2") is None


def test_a_damaged_record_is_a_clear_error_naming_the_file(state: Path) -> None:
    path = state / "starts" / "eks" / f"{BP}.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"blueprint": "llama2-inf2"}')
    with pytest.raises(LlmctlError) as info:
        last_start(BP)
    assert info.value.message == f"the start record {path} is damaged (ValidationError)"
    assert f"delete {path}" in (info.value.hint or "")


def test_saving_and_cold_start_only_where_scaling_allows_zero(tmp_path: Path) -> None:
    catalog = hardware()
    kept = load_blueprint(BP, catalog)
    assert blueprint_cost(kept, catalog).zero_saving_hourly_usd is None
    assert at_zero(kept, blueprint_cost(kept, catalog)) is None  # min_replicas 1: nothing to print
    zero = parse_blueprint(to_zero(CATALOG_FILE.read_text()), "zero.yaml", catalog)
    cost = blueprint_cost(zero, catalog, node_price=13.0)
    assert cost.zero_saving_hourly_usd == 13.0 and cost.to_dict()["zero_saving_hourly_usd"] == 13.0
    found = at_zero(zero, cost)
    assert found == {
        "saving_hourly_usd": 13.0,
        "instance_type": "inf2.48xlarge",
        "cold_start_seconds": None,
        "came_warm": [],
        "last_start": None,
    }
    assert render_at_zero(found) == (
        "at zero replicas: saves $13.00/h (the inf2.48xlarge node); cold start unknown: no start of this "
        "blueprint recorded yet (`llmctl up` records one when its serving pods are ready)"
    )


def test_the_line_names_each_phase_and_what_a_warm_start_did_not_pay(tmp_path: Path) -> None:
    catalog = hardware()
    zero = parse_blueprint(to_zero(CATALOG_FILE.read_text()), "zero.yaml", catalog)
    cost = blueprint_cost(zero, catalog, node_price=13.0)
    record_start(timelines("cold"), blueprint=BP, target="eks", stack="dev")
    line = render_at_zero(at_zero(zero, cost, "eks") or {})
    assert re.fullmatch(
        r"at zero replicas: saves \$13\.00/h \(the inf2\.48xlarge node\); a wake from zero waits for the "
        r"cold start: 11m 29s at the last start \(eks, stack dev, \d{4}-\d\d-\d\d \d\d:\d\d UTC: node launched "
        r"4m 44s, image pulled 1m 41s, weights mirror 1m 02s, compile compiled 3m 15s, engine loaded 20s, "
        r"healthy 4s\)",
        line,
    ), line
    record_start(timelines("warm"), blueprint=BP, target="eks", stack="dev")
    warm = at_zero(zero, cost, "eks") or {}
    assert warm["cold_start_seconds"] == 89.0 and warm["came_warm"] == ["node", "image"]
    assert "compile cache hit 8s" in render_at_zero(warm)
    assert render_at_zero(warm).endswith(
        "; that start found its node and image already there, which a wake from zero waits for too"
    )


def in_namespace(data: Any, namespace: str) -> Any:
    """The recorded objects moved to another namespace (as kubectl would show them there)."""
    text = re.sub(r'"namespace":\s*"llama3-vllm-inf2"', f'"namespace": "{namespace}"', json.dumps(data))
    return json.loads(text)


def test_after_an_up_cost_and_plan_print_the_recorded_cold_start(
    engine: StandinEngine,
    files: tuple[Path, Path],  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    kubeconfig, pools = files
    bp_file = zero_blueprint(tmp_path)
    complete_cluster(engine)
    cold = in_namespace(recorded("cold"), BP)
    engine.kube(*cold["pods"], *cold["events"], *cold["nodeclaims"], *cold["nodes"])
    for pod, text in cold["logs"].items():
        engine.kube_log(BP, pod, text)

    def up() -> Any:
        return lifecycle().up(
            str(bp_file), region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools
        )

    first = up()
    # before this up nothing was recorded; after its readiness wait the worker's start is
    assert first.plan.at_zero["last_start"] is None and first.plan.at_zero["saving_hourly_usd"] > 0
    # (complete_cluster's head pod has a Ready condition without a time: listed, never complete)
    (start,) = [s for s in first.starts if s.total_seconds is not None]
    assert start.total_seconds == 689.0
    saved = last_start(BP, "kubeconfig")
    assert saved is not None and saved.pod == start.pod and saved.stack == "dev"

    result = CliRunner().invoke(app, ["cost", "--blueprint", str(bp_file), "--json"])
    assert result.exit_code == 0, result.stderr
    zero = json.loads(result.stdout)["at_zero"]
    assert zero["cold_start_seconds"] == 689.0 and zero["last_start"]["target"] == "kubeconfig"
    assert [p["status"] for p in zero["last_start"]["phases"]] == [
        "launched",
        "pulled",
        "mirror",
        "compiled",
        "loaded",
        "healthy",
    ]
    text = CliRunner().invoke(app, ["cost", "--blueprint", str(bp_file)]).stdout
    assert "a wake from zero waits for the cold start: 11m 29s at the last start (kubeconfig" in text
    result = CliRunner().invoke(app, ["plan", "--offline", "--blueprint", str(bp_file)])
    assert result.exit_code == 0, result.stderr
    assert f"  {BP}: at zero replicas: saves $" in result.stdout
    assert "compile compiled 3m 15s" in result.stdout

    # the next `up` shows the recorded cold start in its plan before it deploys
    again = up()
    assert again.plan.at_zero["cold_start_seconds"] == 689.0
    assert again.plan.to_dict()["at_zero"]["last_start"]["pod"] == start.pod
    assert any("waits for the cold start: 11m 29s" in line for line in again.plan.summary())
    # and `llmctl up --yes` (no confirmation shown) prints it with the endpoint
    args = ["up", "-b", str(bp_file), "--target", "kubeconfig", "--kubeconfig", str(kubeconfig)]
    result = CliRunner().invoke(app, [*args, "--pools", str(pools), "--yes", "--progress", "plain"])
    assert result.exit_code == 0, result.stderr
    assert "  at zero replicas: saves $" in result.stdout
    assert "a wake from zero waits for the cold start: 11m 29s" in result.stdout
