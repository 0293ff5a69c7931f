"""`llmctl up` says, before it asks, which of the deployed platform's Karpenter pools' running nodes the
platform it applies replaces (drift: infra/plan/node_drift.py), with the deployed workloads serving on
them, as `llmctl plan` does (tests/lifecycle/test_plan_node_drift.py). Through the stand-in engine:
the stacks a first `up` deployed are the saved state a second `up` reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import lifecycle
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.errors import Declined
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.plan.drift_reader import read_drift

REGION = "us-west-2"
runner = CliRunner()
HEADING = "platform llmctl-platform/dev: this `up` changes these Karpenter pools"


@pytest.fixture(autouse=True)
def hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The models are gated: a (dummy) token, which only ends up in a Secret of the stand-in."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)


def planned(blueprint: str) -> tuple[Any, ...]:
    """`up` of the blueprint on stack dev, declined at the confirmation: the plan it showed."""
    seen: list[Any] = []

    def confirm(plan: Any) -> bool:
        seen.append(plan)
        return False

    with pytest.raises(Declined):  # with the drift reader, as the `up` command runs it (cli/lifecycle.py)
        lifecycle(drift=read_drift).up(blueprint, region=REGION, wait=False, confirm=confirm)
    return tuple(seen)


def platform_exports(engine: StandinEngine) -> list[dict[str, Any]]:
    return [
        c
        for c in engine.calls()
        if c["command"] == "stack export" and Path(c["cwd"]).name == PLATFORM_PROJECT
    ]


def test_first_up_reads_no_platform_and_says_no_drift(engine: StandinEngine) -> None:
    """A first `up`: no platform stack yet, so no state is read (the preview inits the stack: read
    after it, the new empty stack would be exported and the platform rendered for nothing)."""
    [plan] = planned("llama2-70b-vllm-gpu")
    assert not any("Karpenter pools" in line for line in plan.summary())
    assert platform_exports(engine) == []


BUDGET = "Karpenter drift, within the NodePool's budget of 10% of nodes at a time"
DRIFT = [
    HEADING,
    "  pool gpu-nvidia: every node is replaced (EC2NodeClass spec.blockDeviceMappings changed; "
    f"{BUDGET}); serving llama2-70b-vllm-gpu restarts",
    "  (each replacement node is launched and ready before the drifted node drains; a node running a pod "
    "annotated karpenter.sh/do-not-disrupt (a Ray head) stays until that pod leaves)",
]


def gpu_root_of_1000_gib(engine: StandinEngine) -> None:
    """The deployed platform's GPU EC2NodeClass as a 405B on that pool made it before the 405B had
    its own pool (gpu-nvidia-efa, pools.pool_for_blueprint): a 1000 GiB root volume."""
    path = engine.backend / ".pulumi" / "stacks" / PLATFORM_PROJECT / "dev.json"
    state = json.loads(path.read_text())
    [node_class] = [
        res for res in state["resources"] if res["urn"].endswith("::nodepools-gpu-nvidia-nodeclass")
    ]
    node_class["inputs"]["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] = "1000Gi"
    path.write_text(json.dumps(state))


def test_up_of_the_405b_blueprint_leaves_the_gpu_nodes_of_the_deployed_workload_alone(
    engine: StandinEngine,
) -> None:
    """The 405B blueprint's 1000 GiB root volume goes to its own pool (gpu-nvidia-efa, new: no drift),
    so the 70B's GPU nodes are not replaced; a GPU pool that held the 405B before goes back to 500 GiB
    at the next `up`: every GPU node is replaced, the 70B workload's too."""
    lifecycle().up("llama2-70b-vllm-gpu", region=REGION, wait=False)
    [plan] = planned("llama31-405b-vllm-gpu")
    assert HEADING not in plan.summary()
    gpu_root_of_1000_gib(engine)
    [plan] = planned("llama2-70b-vllm-gpu")
    summary = plan.summary()
    assert summary[summary.index(HEADING) :] == DRIFT
    assert plan.to_dict()["notes"][-3:] == DRIFT  # `up --json` prints the plan's dict


def test_an_unreadable_deployed_state_is_a_note(engine: StandinEngine) -> None:
    lifecycle().up("llama2-70b-vllm-gpu", region=REGION, wait=False)
    gpu_root_of_1000_gib(engine)
    """`pulumi stack export` of the 70B workload's stack fails (its checkpoint lacks a field the
    export prints): the drift is not said, a note says why, and `up` goes on to ask."""
    path = engine.backend / ".pulumi" / "stacks" / "llmctl-llama2-70b-vllm-gpu" / "dev.json"
    state = json.loads(path.read_text())
    del state["pending_operations"]
    path.write_text(json.dumps(state))
    [plan] = planned("llama31-405b-vllm-gpu")
    summary = plan.summary()
    assert HEADING not in summary
    [note] = [line for line in summary if line.startswith("the platform: ")]
    assert note.startswith(
        "the platform: not compared with the deployed stack llmctl-platform/dev: pulumi failed on "
        "llmctl-llama2-70b-vllm-gpu/dev: "
    ), note


def test_the_up_command_prints_the_drift_in_its_plan(engine: StandinEngine, aws: str) -> None:
    """Through the CLI (`up --yes --json`): the plan it printed carries the lines."""
    assert runner.invoke(app, ["up", "-b", "llama2-70b-vllm-gpu", "--yes", "--no-wait"]).exit_code == 0
    gpu_root_of_1000_gib(engine)
    result = runner.invoke(app, ["up", "-b", "llama2-triton-vllm-gpu", "--yes", "--no-wait", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["plan"]["notes"][-3:] == DRIFT


def test_preview_says_the_drift_up_would_cause(engine: StandinEngine, aws: str) -> None:
    """`llmctl preview` carries the lines `up` says (same heading: it previews that `up`), in its text,
    its --json (`drift_notes`) and its markdown; read before its preview inits any stack."""
    lifecycle().up("llama2-70b-vllm-gpu", region=REGION, wait=False)
    # the platform it previews replaces no node (the 405B's goes to a pool of its own): nothing said
    assert lifecycle(drift=read_drift).preview("llama2-70b-vllm-gpu", region=REGION).drift == []
    assert lifecycle(drift=read_drift).preview("llama31-405b-vllm-gpu", region=REGION).drift == []
    gpu_root_of_1000_gib(engine)  # a GPU pool the 405B enlarged before it had its own
    report = lifecycle(drift=read_drift).preview("llama2-70b-vllm-gpu", region=REGION)
    assert report.drift == DRIFT and report.lines()[-3:] == DRIFT
    assert report.to_dict()["drift_notes"] == DRIFT
    assert "\n".join(["```text", *DRIFT, "```"]) in report.to_markdown()
    result = runner.invoke(app, ["preview", "-b", "llama2-70b-vllm-gpu", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["drift_notes"] == DRIFT
    text = runner.invoke(app, ["preview", "-b", "llama2-70b-vllm-gpu"])
    assert text.exit_code == 0, text.output
    assert " ".join(" ".join(DRIFT).split()) in " ".join(text.stdout.split())  # the terminal wraps them


def test_a_preview_leaves_no_stack_that_later_commands_count(engine: StandinEngine, aws: str) -> None:
    """A preview of a blueprint never deployed creates its stacks to preview them and removes them
    again: `stacks list` shows nothing of it, so no later command reads its config's record as a
    deployed workload (its pools and root volume in the platform). A deployed workload's stack
    outlives a preview of it: test_preview_says_the_drift_up_would_cause reads the 70B's deployed
    state after previewing it."""
    assert lifecycle(drift=read_drift).preview("llama31-405b-vllm-gpu", region=REGION).drift == []
    removed = {(project, stack) for command, project, stack in engine.ops() if command == "stack rm"}
    assert removed == {("llmctl-platform", "dev"), ("llmctl-llama31-405b-vllm-gpu", "dev")}
    listed = runner.invoke(app, ["stacks", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    assert "405b" not in listed.stdout
