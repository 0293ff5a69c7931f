"""`Lifecycle` up/down/preview through the Automation API and the stand-in engine
(tests/lifecycle/standin_engine): our real platform and workload programs run over gRPC, the
engine keeps their state, diffs the next run against it and deletes in dependency order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from lifecycle_scenario import build, existing
from lifecycle_support import eks_cluster, lifecycle, ready_pod, short
from standin_engine.deploy import depends_on
from standin_support import StandinEngine

from llmctl.errors import BlueprintError, EngineError, UserAbort
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.state import list_endpoints, load_endpoint

BP = "tiny-cpu"
WL = f"llmctl-{BP}"
REGION = "us-west-2"


def non_same(steps: list[dict[str, str]]) -> list[tuple[str, str]]:
    return sorted((step["op"], short(step["urn"])) for step in steps if step["op"] != "same")


def test_up_reads_the_programs_real_outputs_then_twice_is_same_and_a_second_blueprint_adds_its_parts(
    engine: StandinEngine,
) -> None:
    engine.kube(ready_pod(BP))
    result = lifecycle().up(BP, region=REGION)
    ops = [op for op in engine.ops() if op[0] in ("preview", "up")]
    assert ops == [("preview", PLATFORM_PROJECT, "dev"), ("up", PLATFORM_PROJECT, "dev"), ("up", WL, "dev")]
    platform = engine.resources(PLATFORM_PROJECT, "dev")
    # the preview planned exactly what the update then saved
    assert result.plan is not None and result.plan.changes["platform"] == {"create": len(platform)}
    outputs = engine.outputs(PLATFORM_PROJECT, "dev")
    # the platform's kubeconfig output is what `up` saved and handed to kubectl for the readiness wait
    kubeconfig = Path(result.endpoint.extra["kubeconfig"])
    saved = json.loads(kubeconfig.read_text())
    assert saved == (
        json.loads(outputs["kubeconfig"]) if isinstance(outputs["kubeconfig"], str) else outputs["kubeconfig"]
    )
    assert saved["clusters"][0]["cluster"]["server"] == f"https://llmctl-dev.gr7.{REGION}.eks.amazonaws.com"
    calls = engine.kubectl_calls()
    *watch, readiness = calls[:-5]
    timeline = calls[-5:]
    # while the workload stack updated, `up` asked Karpenter (pods, NodeClaims, events; every 20 s)
    assert watch and len(watch) % 3 == 0
    for at in range(0, len(watch), 3):
        assert [call[2:4] for call in watch[at : at + 3]] == [
            ["get", "pods"],
            ["get", "nodeclaims.karpenter.sh"],
            ["get", "events"],
        ]
    assert readiness == ["--kubeconfig", str(kubeconfig), "get", "pods", "-n", BP, "-o", "json"]
    # then each serving pod's start timeline: pods, events, Karpenter's NodeClaims, nodes, logs
    assert [call[2:4] for call in timeline] == [
        ["get", "pods"],
        ["get", "events"],
        ["get", "nodeclaims.karpenter.sh"],
        ["get", "nodes"],
        ["logs", "-n"],
    ]
    # the endpoint comes from the workload program's own exports
    exports = engine.outputs(WL, "dev")
    endpoint = load_endpoint("dev", BP)
    assert endpoint.extra["service"] == exports["service"] == f"{BP}-serve-svc"
    assert endpoint.extra["namespace"] == exports["namespace"] == BP
    assert endpoint.base_url == f"http://localhost:{int(exports['port'])}/v1"
    assert [name for name, _ in result.timeline.phases] == ["plan", "platform", f"workload {BP}", "readiness"]
    # every call used the local file backend and the generated passphrase file
    calls = engine.calls()
    assert {c["backend"] for c in calls if c["command"] != "version"} == {f"file://{engine.backend}"}
    assert all(c["passphrase_file"].endswith("pulumi-passphrase") for c in calls if c["command"] == "up")

    # up twice: the engine finds nothing to change
    before = engine.resources(PLATFORM_PROJECT, "dev")
    again = lifecycle().up(BP, region=REGION)
    assert again.plan is not None and again.plan.changes["platform"] == {"same": len(before)}
    assert engine.resources(PLATFORM_PROJECT, "dev") == before
    assert engine.history(WL, "dev")[-1]["resourceChanges"] == {"same": len(engine.resources(WL, "dev"))}
    # a second blueprint in the same environment: the Neuron parts and its pool, nothing else
    report = lifecycle().preview("llama2-inf2", region=REGION)
    assert non_same(report.stacks[PLATFORM_PROJECT].steps) == [
        ("create", "kubernetes:helm.sh/v3:Release::neuron-release"),
        ("create", "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::nodepools-inferentia-inf2-nodeclass"),
        ("create", "kubernetes:karpenter.sh/v1:NodePool::nodepools-inferentia-inf2-nodepool"),
        ("create", "llmctl:platform:Neuron::neuron"),
    ]
    workload = report.stacks["llmctl-llama2-inf2"]
    assert set(workload.changes) == {"create"} and workload.changes["create"] == len(workload.steps)


def test_down_deletes_dependents_first_then_sweeps(engine: StandinEngine, aws: str) -> None:
    eks_cluster(aws)
    lifecycle().up(BP, region=aws, wait=False)
    saved = {PLATFORM_PROJECT: engine.resources(PLATFORM_PROJECT, "dev"), WL: engine.resources(WL, "dev")}
    scenario = build(aws)
    result = lifecycle().down(region=aws, confirm=lambda items: True, sweep_timeout_s=30)
    assert result.destroyed == [f"{WL}/dev", f"{PLATFORM_PROJECT}/dev"]
    runs = engine.deletes()
    assert [(run["project"], run["kind"]) for run in runs] == [(WL, "destroy"), (PLATFORM_PROJECT, "destroy")]
    for run in runs:
        resources = saved[run["project"]]
        position = {urn: i for i, wave in enumerate(run["waves"]) for urn in wave}
        assert set(position) == set(resources)  # everything went
        for urn, res in resources.items():  # ... each before whatever it depends on
            assert all(position[urn] < position[dep] for dep in depends_on(res) if dep in position), urn
        assert [short(u) for u in run["waves"][-1]] == [f"pulumi:pulumi:Stack::{run['project']}-dev"]
    waves = {short(u): i for i, wave in enumerate(runs[1]["waves"]) for u in wave}
    # Karpenter's NodePools go while its controller still runs (it terminates their instances)
    assert (
        waves["kubernetes:karpenter.sh/v1:NodePool::nodepools-default-nodepool"]
        < waves["kubernetes:helm.sh/v3:Release::karpenter-release"]
    )
    assert waves["aws:ec2/subnet:Subnet::network-nodes-usw2-az1"] < waves["aws:ec2/vpc:Vpc::network-vpc"]
    assert max(len(wave) for wave in runs[1]["waves"]) > 1  # independent deletes run together
    # the stacks are gone, DIY-backend style, and the sweep took only this cluster's leftovers
    assert engine.checkpoint(WL, "dev") is None and engine.checkpoint(PLATFORM_PROJECT, "dev") is None
    # the workload's own image repository went with its stack (a note), the rest with the sweep
    repo = "llmctl/dev/tiny-cpu"
    assert f"deleted image repository {repo}" in result.notes
    ours = {i for ids in scenario.ours.values() for i in ids}
    assert repo in ours
    assert {i.id for i in result.sweep.deleted} == ours - {repo}  # type: ignore[union-attr]
    now = existing(aws)
    assert all(ids <= now[kind] for kind, ids in scenario.others.items())
    assert list_endpoints("dev") == []
    assert [name for name, _ in result.timeline.phases] == [
        f"destroy workload {BP}",
        "destroy platform",
        "sweep",
        "leftover check",
    ]
    # the cluster exists and answers: nothing may be dropped from state, so no delete-unreachable
    calls = engine.calls()
    assert {c["delete_unreachable"] for c in calls if c["command"] in ("destroy", "up", "preview")} == {None}
    assert result.notes == [f"deleted image repository {repo}"]  # no delete-unreachable note
    again = lifecycle().down(region=aws)
    assert again.destroyed == [] and again.sweep is not None and again.sweep.found == []


def test_a_failed_workload_step_keeps_what_was_made_and_the_next_up_resumes(engine: StandinEngine) -> None:
    engine.control(
        fail={"tiny-cpu/tiny-cpu": "creating RayService tiny-cpu/tiny-cpu: admission webhook denied"}
    )
    with pytest.raises(EngineError) as info:
        lifecycle().up(BP, region=REGION, wait=False)
    assert WL in info.value.message and "admission webhook denied" in info.value.message
    assert "run the same command again" in (info.value.hint or "")
    assert list_endpoints("dev") == []
    made = {short(u) for u in engine.resources(WL, "dev")}
    assert "kubernetes:ray.io/v1:RayService::tiny-cpu/tiny-cpu" not in made
    assert "kubernetes:core/v1:Namespace::tiny-cpu" in made
    assert engine.history(WL, "dev")[-1]["result"] == "failed"
    engine.control(fail={})
    lifecycle().up(BP, region=REGION, wait=False)
    changes = engine.history(WL, "dev")[-1]["resourceChanges"]
    assert changes["create"] == 1 + (1 if "pulumi:pulumi:Stack::llmctl-tiny-cpu-dev" not in made else 0)
    assert load_endpoint("dev", BP).blueprint == BP


def test_blueprint_the_platform_cannot_schedule_is_refused_before_the_workload(
    engine: StandinEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.infra.platform import program

    real = program.node_pool_outputs
    # a platform whose exports lack the pool the blueprint needs (the program runs in this process)
    monkeypatch.setattr(
        program, "node_pool_outputs", lambda config: [p for p in real(config) if p["name"] == "core"]
    )
    with pytest.raises(BlueprintError) as info:
        lifecycle().up(BP, region=REGION, wait=False)
    assert info.value.problems and "no workload was deployed" in (info.value.hint or "")
    assert [op for op in engine.ops() if op[0] == "up"] == [("up", PLATFORM_PROJECT, "dev")]
    pools = engine.outputs(PLATFORM_PROJECT, "dev")["node_pools"]
    assert [pool["name"] for pool in pools] == ["core"]


def test_declined_confirmation_changes_nothing(engine: StandinEngine) -> None:
    seen = []

    def confirm(plan: object) -> bool:
        seen.append(plan.summary())  # type: ignore[attr-defined]
        return False

    with pytest.raises(UserAbort):
        lifecycle().up(BP, region=REGION, confirm=confirm)
    assert [op for op in engine.ops() if op[0] == "up"] == []
    assert engine.resources(PLATFORM_PROJECT, "dev") == {}
    [lines] = seen
    assert lines[0].startswith(f"blueprint {BP} on eks (stack dev")
    planned = [c for c in engine.calls() if c["command"] == "preview"]
    assert len(planned) == 1 and lines[1].startswith("platform changes: create ")
    assert lines[2].startswith("cost: about $") and "x m5.xlarge" in lines[2]


def test_invalid_blueprint_is_refused_before_any_pulumi_call(engine: StandinEngine, tmp_path: Path) -> None:
    from llmctl.blueprints._data import data_file

    data = yaml.safe_load(data_file("catalog", "tiny-cpu.yaml").read_text())
    text = (
        data_file("catalog", "tiny-cpu.yaml")
        .read_text()
        .replace("cpus_per_replica: 2", "cpus_per_replica: 64")
    )
    assert data and text != data_file("catalog", "tiny-cpu.yaml").read_text()
    path = tmp_path / "huge.yaml"
    path.write_text(text)
    with pytest.raises(BlueprintError):
        lifecycle().up(str(path), region=REGION)
    assert engine.calls() == []


def test_platform_destroy_failure_sweeps_and_retries_once(engine: StandinEngine, aws: str) -> None:
    lifecycle().up(BP, region=aws, wait=False)
    engine.control(
        fail={"network-vpc": "DependencyViolation: the vpc has dependencies and cannot be deleted"}
    )
    with pytest.raises(EngineError) as info:
        lifecycle().down(region=aws, sweep_timeout_s=5)
    assert "DependencyViolation" in info.value.message
    assert [op for op in engine.ops() if op[0] == "destroy"][-2:] == [
        ("destroy", PLATFORM_PROJECT, "dev")
    ] * 2
    left = {short(u) for u in engine.resources(PLATFORM_PROJECT, "dev")}
    assert (
        "aws:ec2/vpc:Vpc::network-vpc" in left and "aws:ec2/subnet:Subnet::network-nodes-usw2-az1" not in left
    )
    engine.control(fail={})
    assert lifecycle().down(region=aws).destroyed == [f"{PLATFORM_PROJECT}/dev"]


def test_down_after_a_failed_up_keeps_the_platform_on_request_then_removes_it(
    engine: StandinEngine, aws: str
) -> None:
    engine.control(fail={"tiny-cpu/tiny-cpu": "boom"})
    with pytest.raises(EngineError):
        lifecycle().up(BP, region=aws, wait=False)
    result = lifecycle().down(region=aws, keep_platform=True)
    assert result.destroyed == [f"{WL}/dev"] and result.sweep is None
    assert engine.checkpoint(WL, "dev") is None and len(engine.resources(PLATFORM_PROJECT, "dev")) > 50
    result = lifecycle().down(region=aws)
    assert result.destroyed == [f"{PLATFORM_PROJECT}/dev"]
    assert [op for op in engine.ops() if op[0] == "destroy"] == [
        ("destroy", WL, "dev"),
        ("destroy", PLATFORM_PROJECT, "dev"),
    ]
