"""Engine + orchestration against a stand-in `pulumi` (tests/lifecycle/fake_pulumi.py) and moto."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from lifecycle_scenario import CLUSTER, build, existing
from lifecycle_support import FakePulumi

from llmctl.errors import BlueprintError, CloudError, EngineError, PrerequisiteError, UserAbort
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress
from llmctl.state import list_endpoints, load_endpoint

BP = "tiny-cpu"
WL = f"llmctl-{BP}"


def platform_outputs(region: str = "us-west-2") -> dict[str, Any]:
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.infra.workload.config import PlatformFacts

    facts = PlatformFacts.for_blueprint(load_blueprint(BP), stack="dev", region=region)
    data = facts.model_dump(mode="json")
    return {"cluster_name": CLUSTER, "region": region, "node_pools": data["pools"], "cache_bucket": None}


def lifecycle() -> Lifecycle:
    return Lifecycle(Engine(resolve_backend()), Progress("quiet"), stack="dev")


@pytest.fixture
def outputs(fake_pulumi: FakePulumi) -> FakePulumi:
    fake_pulumi.control(
        outputs={
            PLATFORM_PROJECT: platform_outputs(),
            WL: {"namespace": BP, "service": f"{BP}-serve-svc", "port": 8000},
        }
    )
    return fake_pulumi


def test_up_runs_platform_then_workload_and_records_the_endpoint(outputs: FakePulumi) -> None:
    result = lifecycle().up(BP, region="us-west-2", confirm=lambda plan: True)
    ops = [op for op in outputs.ops() if op[0] in ("preview", "up")]
    assert ops == [("preview", PLATFORM_PROJECT, "dev"), ("up", PLATFORM_PROJECT, "dev"), ("up", WL, "dev")]
    endpoint = load_endpoint("dev", BP)
    assert endpoint.base_url == "http://localhost:8000/v1" and endpoint.extra["service"] == f"{BP}-serve-svc"
    assert [name for name, _ in result.timeline.phases] == ["plan", "platform", f"workload {BP}"]
    assert result.plan is not None and result.plan.changes["platform"] == {"create": 3}
    # every call used the local file backend and the generated passphrase file
    calls = outputs.calls()
    assert all(c["env_backend"].startswith("file://") for c in calls if c["op"] != "version")
    assert all(
        c["passphrase_file"] and c["passphrase_file"].endswith("pulumi-passphrase")
        for c in calls
        if c["op"] in ("up", "preview")
    )
    config = next(c for c in calls if c["op"] == "config set-all" and c["project"] == PLATFORM_PROJECT)
    assert "aws:region=us-west-2" in config["args"]


def test_declined_confirmation_changes_nothing(outputs: FakePulumi) -> None:
    with pytest.raises(UserAbort):
        lifecycle().up(BP, region="us-west-2", confirm=lambda plan: False)
    assert [op for op in outputs.ops() if op[0] == "up"] == []


def test_resume_after_a_failed_workload_up(outputs: FakePulumi) -> None:
    outputs.control(fail_up=[WL])
    with pytest.raises(EngineError) as info:
        lifecycle().up(BP, region="us-west-2")
    assert WL in info.value.message and "run the same command again" in (info.value.hint or "")
    assert list_endpoints("dev") == []
    outputs.control(fail_up=[])
    lifecycle().up(BP, region="us-west-2")
    ups = [op for op in outputs.ops() if op[0] == "up"]
    assert ups == [
        ("up", PLATFORM_PROJECT, "dev"),
        ("up", WL, "dev"),
        ("up", PLATFORM_PROJECT, "dev"),
        ("up", WL, "dev"),
    ]
    assert load_endpoint("dev", BP).blueprint == BP


def test_blueprint_the_platform_cannot_schedule_is_refused_before_the_workload(outputs: FakePulumi) -> None:
    data = platform_outputs()
    data["node_pools"] = [pool for pool in data["node_pools"] if pool["name"] == "core"]
    outputs.control(outputs={PLATFORM_PROJECT: data})
    with pytest.raises(BlueprintError) as info:
        lifecycle().up(BP, region="us-west-2")
    assert info.value.problems and "no workload was deployed" in (info.value.hint or "")
    assert [op for op in outputs.ops() if op[0] == "up"] == [("up", PLATFORM_PROJECT, "dev")]


def test_invalid_blueprint_is_refused_before_any_pulumi_call(outputs: FakePulumi, tmp_path: Any) -> None:
    from llmctl.blueprints._data import data_file

    text = (
        data_file("catalog", "tiny-cpu.yaml")
        .read_text()
        .replace("cpus_per_replica: 2", "cpus_per_replica: 64")
    )
    path = tmp_path / "huge.yaml"
    path.write_text(text)
    with pytest.raises(BlueprintError):
        lifecycle().up(str(path), region="us-west-2")
    assert outputs.ops() == []


def test_down_destroys_workloads_then_platform_then_sweeps(outputs: FakePulumi, aws: str) -> None:
    lc = lifecycle()
    lc.up(BP, region=aws)
    sc = build(aws)
    result = lifecycle().down(region=aws, confirm=lambda items: True, sweep_timeout_s=30)
    destroys = [op for op in outputs.ops() if op[0] == "destroy"]
    assert destroys == [("destroy", WL, "dev"), ("destroy", PLATFORM_PROJECT, "dev")]
    # destroys may drop Kubernetes objects of a cluster that is already gone; updates may not
    calls = outputs.calls()
    assert {c["delete_unreachable"] for c in calls if c.get("op") == "destroy"} == {"true"}
    assert {c["delete_unreachable"] for c in calls if c.get("op") in ("up", "preview")} == {None}
    assert result.destroyed == [f"{WL}/dev", f"{PLATFORM_PROJECT}/dev"]
    assert {i.id for i in result.sweep.deleted} == {i for ids in sc.ours.values() for i in ids}
    assert result.leftovers == []
    now = existing(aws)
    assert all(ids <= now[kind] for kind, ids in sc.others.items())
    assert list_endpoints("dev") == []
    assert [name for name, _ in result.timeline.phases] == [
        f"destroy workload {BP}",
        "destroy platform",
        "sweep",
        "leftover check",
    ]
    # twice is safe: nothing to destroy, nothing to sweep
    again = lifecycle().down(region=aws)
    assert again.destroyed == [] and again.sweep.found == [] and again.leftovers == []


def test_down_keep_platform_destroys_only_workloads(outputs: FakePulumi, aws: str) -> None:
    lifecycle().up(BP, region=aws)
    result = lifecycle().down(region=aws, keep_platform=True)
    assert [op for op in outputs.ops() if op[0] == "destroy"] == [("destroy", WL, "dev")]
    assert result.sweep is None


def test_platform_destroy_failure_sweeps_and_retries_once(outputs: FakePulumi, aws: str) -> None:
    lifecycle().up(BP, region=aws)
    outputs.control(fail_destroy=[PLATFORM_PROJECT])
    with pytest.raises(EngineError):
        lifecycle().down(region=aws, sweep_timeout_s=5)
    assert [op for op in outputs.ops() if op[0] == "destroy"][-2:] == [
        ("destroy", PLATFORM_PROJECT, "dev")
    ] * 2


def test_down_after_failed_up_is_safe(outputs: FakePulumi, aws: str) -> None:
    outputs.control(fail_up=[WL])
    with pytest.raises(EngineError):
        lifecycle().up(BP, region=aws)
    result = lifecycle().down(region=aws)
    assert result.destroyed == [f"{WL}/dev", f"{PLATFORM_PROJECT}/dev"]


def test_preview_covers_both_stacks_and_renders_markdown(outputs: FakePulumi) -> None:
    report = lifecycle().preview(BP, region="us-west-2")
    assert set(report.stacks) == {PLATFORM_PROJECT, WL}
    md = report.to_markdown()
    assert "| llmctl-platform | 3 | 0 | 0 | 0 |" in md and "/h" in md
    assert report.to_dict()["stacks"][WL]["changes"] == {"create": 3}


def test_lock_is_translated_with_the_command_to_clear_it(outputs: FakePulumi) -> None:
    outputs.control(lock=[PLATFORM_PROJECT])
    with pytest.raises(EngineError) as info:
        Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"))
    assert "locked" in info.value.message
    assert "pulumi cancel --yes --stack dev" in (info.value.hint or "")
    assert "pulumi stack export" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("control", "error", "words"),
    [("no_plugin", PrerequisiteError, "plugin install"), ("no_credentials", CloudError, "aws sso login")],
)
def test_command_errors_are_translated(outputs: FakePulumi, control: str, error: type, words: str) -> None:
    outputs.control(**{control: [PLATFORM_PROJECT]})
    with pytest.raises(error) as info:
        Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"))
    assert words in (info.value.hint or "")


def test_missing_stack_for_destroy_and_outputs_is_not_an_error(fake_pulumi: FakePulumi) -> None:
    engine = Engine(resolve_backend())
    assert engine.destroy(StackSpec(PLATFORM_PROJECT, "nope")) is False
    assert engine.outputs(StackSpec(PLATFORM_PROJECT, "nope")) is None


def test_missing_pulumi_is_a_prerequisite_error(no_pulumi: None) -> None:
    with pytest.raises(PrerequisiteError) as info:
        Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"))
    assert "get.pulumi.com" in (info.value.hint or "")


def test_too_old_pulumi_is_a_prerequisite_error(fake_pulumi: FakePulumi) -> None:
    fake_pulumi.control(version="2.9.0")
    with pytest.raises(PrerequisiteError):
        Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"))


def test_preflight_refuses_a_cli_that_cannot_destroy_inline_programs(fake_pulumi: FakePulumi) -> None:
    """The Automation API destroys an inline program with `--client`, which needs pulumi 3.181."""
    from llmctl.infra.aws.preflight import require_pulumi

    fake_pulumi.control(version="3.180.0")
    with pytest.raises(PrerequisiteError) as info:
        require_pulumi()
    assert "older than 3.181.0" in info.value.message
    fake_pulumi.control(version="3.181.0")
    assert "3.181.0" in require_pulumi()


@pytest.mark.parametrize("version", ["3.205.0", "3.210.0"])  # events in a log file / over gRPC
def test_engine_events_reach_the_progress_view(outputs: FakePulumi, version: str) -> None:
    import io

    outputs.control(version=version)
    stream = io.StringIO()
    progress = Progress("plain", stream=stream)
    with progress.phase("platform", total=3):
        Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"), on_event=progress.on_event)
    log = stream.getvalue()
    assert "[3/3] create aws:eks/cluster:Cluster r done" in log and "summary: create 3" in log
    up = next(c for c in outputs.calls() if c["op"] == "up")
    event_log = up["args"][up["args"].index("--event-log") + 1]
    assert event_log.startswith("tcp://") == (version != "3.205.0")


def test_ctrl_c_forwards_sigint_and_the_next_up_resumes(outputs: FakePulumi) -> None:
    outputs.control(hang_up=[PLATFORM_PROJECT])
    marker = outputs.root / "hanging"

    def interrupt() -> None:
        deadline = time.time() + 15
        while not marker.exists() and time.time() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(UserAbort) as info:
        Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"))
    assert "run the same command again" in (info.value.hint or "")
    assert {"event": "sigint", "project": PLATFORM_PROJECT, "stack": "dev"} in outputs.calls()
    outputs.control(hang_up=[])
    assert Engine(resolve_backend()).up(StackSpec(PLATFORM_PROJECT, "dev"))["cluster_name"] == CLUSTER


def test_confirmation_shows_target_changes_and_cost(outputs: FakePulumi) -> None:
    seen: list[list[str]] = []

    def confirm(plan: Any) -> bool:
        seen.append(plan.summary())
        return False

    with pytest.raises(UserAbort):
        lifecycle().up(BP, region="us-west-2", confirm=confirm)
    [lines] = seen
    assert lines[0].startswith(f"blueprint {BP} on eks (stack dev")
    assert lines[1] == "platform changes: create 3"
    assert lines[2].startswith("cost: about $") and "x m5.xlarge" in lines[2]
