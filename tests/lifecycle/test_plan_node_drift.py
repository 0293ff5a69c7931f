"""`llmctl plan` against a deployed platform stack: the Karpenter pools whose running nodes the next
`up` replaces (drift, infra/plan/node_drift.py), with the deployed workloads serving on them.

The deployed stacks are saved state in the local file backend, read through the stand-in engine
(tests/lifecycle/standin_engine) as `pulumi stack export` answers: the platform's and the workloads'
resources as this llmctl renders them offline, the platform's Karpenter objects then edited to what an
older llmctl deployed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.infra.plan.offline import Registered
from llmctl.infra.plan.run import offline_plan

runner = CliRunner()
BLUEPRINTS = ["llama2-inf2", "tiny-cpu"]
HEADING = "platform llmctl-platform/dev: the next `up` changes these Karpenter pools"
BUDGET = "Karpenter drift, within the NodePool's budget of 10% of nodes at a time"
NOTE = (
    "  (each replacement node is launched and ready before the drifted node drains; a node running a pod "
    "annotated karpenter.sh/do-not-disrupt (a Ray head) stays until that pod leaves)"
)


def _seed(engine: StandinEngine, project: str, resources: list[Registered]) -> None:
    """The stack `project/dev` saved in the backend with these resources (the stand-in's checkpoint)."""
    path = engine.backend / ".pulumi" / "stacks" / project / "dev.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    state = [{"urn": r.urn, "type": r.type, "custom": r.custom, "inputs": r.inputs} for r in resources]
    path.write_text(json.dumps({"resources": state, "pending_operations": [], "outputs": {}, "salt": None}))


def _object(resources: list[Registered], kind: str, name: str) -> dict[str, Any]:
    return next(
        r.inputs for r in resources if r.inputs.get("kind") == kind and r.inputs["metadata"]["name"] == name
    )


def _deploy(engine: StandinEngine, edit: Callable[[list[Registered]], None]) -> None:
    """The environment deployed: both workloads as rendered now, the platform as `edit` leaves it."""
    planned = offline_plan(BLUEPRINTS, stack="dev")
    for work in planned.workloads:
        _seed(engine, work.project, work.resources)
    edit(planned.resources)
    _seed(engine, "llmctl-platform", planned.resources)


def _older_platform(resources: list[Registered]) -> None:
    """What an older llmctl deployed: a 100 GiB root volume on the Neuron pool's nodes, another label
    and lower limits on the default pool's NodePool."""
    neuron = _object(resources, "EC2NodeClass", "inferentia-inf2")
    neuron["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] = "100Gi"
    default = _object(resources, "NodePool", "default")
    default["spec"]["template"]["metadata"]["labels"]["llmctl.dev/role"] = "general"
    default["spec"]["limits"]["cpu"] = "500"


def _plan(*args: str) -> Any:
    return runner.invoke(app, ["plan", *[a for bp in BLUEPRINTS for a in ("-b", bp)], *args])


def test_plan_says_which_deployed_pools_are_replaced_and_who_serves_on_them(engine: StandinEngine) -> None:
    _deploy(engine, _older_platform)
    text = _plan()
    assert text.exit_code == 0, text.output
    start = text.stdout.index(HEADING)
    assert text.stdout[start:].splitlines()[:5] == [
        HEADING,
        f"  pool default: every node is replaced (NodePool spec.template.metadata.labels changed; {BUDGET}); "
        "serving tiny-cpu restarts",
        "  pool default: NodePool spec.limits changed: no node is replaced (a behavioural field: "
        "NodePool.Hash() hashes spec.template only)",
        f"  pool inferentia-inf2: every node is replaced (EC2NodeClass spec.blockDeviceMappings changed; {BUDGET}); "
        "serving llama2-inf2 restarts",
        NOTE,
    ]
    data = json.loads(_plan("--json").stdout)
    assert [(d["pool"], d["nodes"], d["workloads"]) for d in data["drift"]] == [
        ("default", "every", ["tiny-cpu"]),
        ("inferentia-inf2", "every", ["llama2-inf2"]),
    ]
    assert data["drift"][0]["fields"] == [
        {
            "object": "NodePool",
            "path": "spec.limits",
            "change": "changed",
            "drift": "none",
            "nodes": "none",
            "reason": "",
            "detail": "a behavioural field: NodePool.Hash() hashes spec.template only",
        },
        {
            "object": "NodePool",
            "path": "spec.template.metadata.labels",
            "change": "changed",
            "drift": "static",
            "nodes": "every",
            "reason": "NodePoolDrifted",
            "detail": "",
        },
    ]
    assert data["rollout_notes"] == []


def test_a_platform_deployed_as_planned_has_no_drift(engine: StandinEngine) -> None:
    _deploy(engine, lambda _resources: None)
    data = json.loads(_plan("--json").stdout)
    assert data["drift"] == [] and data["rollout_notes"] == []
    assert HEADING not in _plan().stdout


def test_an_unreadable_platform_state_is_a_note(engine: StandinEngine) -> None:
    _deploy(engine, _older_platform)
    (engine.backend / ".pulumi" / "stacks" / "llmctl-platform" / "dev.json").write_text("{not json")
    result = _plan("--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["drift"] == []
    # (the workloads' day-two plans read the platform's outputs: notes of their own)
    platform = [note for note in data["rollout_notes"] if note.startswith("the platform")]
    assert len(platform) == 1 and platform[0].startswith(
        "the platform: not compared with the deployed stack llmctl-platform/dev: pulumi failed on "
        "llmctl-platform/dev: "
    )


def test_offline_reads_no_deployed_platform(engine: StandinEngine) -> None:
    _deploy(engine, _older_platform)
    data = json.loads(_plan("--offline", "--json").stdout)
    assert data["drift"] == [] and "stack export" not in {c["command"] for c in engine.calls()}
    assert json.loads(_plan("--json").stdout)["drift"]  # without --offline: read
    assert "stack export" in {c["command"] for c in engine.calls()}
