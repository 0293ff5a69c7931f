"""`Engine` (the Automation API wrapper) against the stand-in engine, with a small inline program:
the step kinds a real engine reports, its event stream, and every error branch it translates."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pytest
from lifecycle_support import short
from standin_support import StandinEngine

from llmctl.errors import CloudError, EngineError, PrerequisiteError
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine, StackSpec
from llmctl.infra.lifecycle.progress import Progress

PROJECT = "llmctl-small"


def small(
    zone: str = "us-west-2a", tags: dict[str, str] | None = None, subnet: bool = True
) -> Callable[[], None]:
    """A VPC with one subnet inside a component; exports the VPC id."""

    def program() -> None:
        group = pulumi.ComponentResource("llmctl:test:Net", "net")
        vpc = aws.ec2.Vpc(
            "vpc", cidr_block="10.0.0.0/16", tags=tags, opts=pulumi.ResourceOptions(parent=group)
        )
        if subnet:
            aws.ec2.Subnet(
                "subnet",
                vpc_id=vpc.id,
                cidr_block="10.0.1.0/24",
                availability_zone=zone,
                opts=pulumi.ResourceOptions(parent=group),
            )
        pulumi.export("vpc_id", vpc.id)

    return program


def spec(program: Callable[[], None] | None = None) -> StackSpec:
    return StackSpec(PROJECT, "dev", program, {"aws:region": "us-west-2"})


def changes(engine: StandinEngine) -> dict[str, int]:
    return dict(engine.history(PROJECT, "dev")[-1]["resourceChanges"])


def test_create_same_update_replace_delete(engine: StandinEngine) -> None:
    eng = Engine(resolve_backend())
    assert eng.up(spec(small())) == {"vpc_id": "vpc-id"}  # the provider's id, as the program exported it
    assert changes(engine) == {"create": 4}  # the stack, the component, the VPC, the subnet
    eng.up(spec(small()))
    assert changes(engine) == {"same": 4}
    preview = eng.preview(spec(small(tags={"team": "ml"})))
    assert preview.changes == {"same": 3, "update": 1}
    assert [(s["op"], short(s["urn"])) for s in preview.steps if s["op"] != "same"] == [
        ("update", "aws:ec2/vpc:Vpc::vpc")
    ]
    seen: list[object] = []
    eng.up(spec(small(zone="us-west-2b")), on_event=seen.append)  # a subnet's zone forces a replacement
    assert changes(engine) == {"same": 3, "replace": 1}
    ops = [e.resource_pre_event.metadata.op.value for e in seen if e.resource_pre_event]  # type: ignore[attr-defined]
    assert [op for op in ops if op != "same"] == ["replace", "create-replacement", "delete-replaced"]
    subnet = next(r for u, r in engine.resources(PROJECT, "dev").items() if u.endswith("::subnet"))
    assert subnet["inputs"]["availabilityZone"] == "us-west-2b"
    # the subnet depends on the VPC through its vpcId input
    vpc_urn = next(u for u in engine.resources(PROJECT, "dev") if u.endswith("::vpc"))
    assert subnet["propertyDependencies"]["vpcId"] == [vpc_urn] and subnet["parent"].endswith("::net")
    eng.up(spec(small(subnet=False)))
    assert changes(engine) == {"same": 3, "delete": 1}
    [run] = engine.deletes()
    assert [[short(u) for u in wave] for wave in run["waves"]] == [["aws:ec2/subnet:Subnet::subnet"]]


@pytest.mark.parametrize("version", ["3.205.0", "3.210.0"])  # events in a log file / over gRPC
def test_engine_events_reach_the_progress_view(engine: StandinEngine, version: str) -> None:
    engine.control(version=version)
    stream = io.StringIO()
    progress = Progress("plain", stream=stream)
    with progress.phase("small", total=4):
        Engine(resolve_backend()).up(spec(small()), on_event=progress.on_event)
    log = stream.getvalue()
    assert (
        "[4/4] create" in log and "create aws:ec2/subnet:Subnet subnet" in log and "summary: create 4" in log
    )
    up = next(c for c in engine.calls() if c["command"] == "up")
    event_log = up["args"][up["args"].index("--event-log") + 1]
    assert event_log.startswith("tcp://") == (version != "3.205.0")


def test_a_failed_step_reaches_the_progress_view_and_the_error(engine: StandinEngine) -> None:
    engine.control(fail={"subnet": "creating EC2 Subnet: InvalidParameterValue: bad zone"})
    stream = io.StringIO()
    progress = Progress("plain", stream=stream)
    with pytest.raises(EngineError) as info, progress.phase("small"):
        Engine(resolve_backend()).up(spec(small()), on_event=progress.on_event)
    assert "bad zone" in info.value.message and "resumes from the saved state" in (info.value.hint or "")
    assert "error: aws:ec2/subnet:Subnet subnet failed" in stream.getvalue()
    assert {short(u) for u in engine.resources(PROJECT, "dev")} == {
        f"pulumi:pulumi:Stack::{PROJECT}-dev",
        "llmctl:test:Net::net",
        "aws:ec2/vpc:Vpc::vpc",
    }


def test_lock_of_another_update_is_translated_and_its_hint_clears_it(engine: StandinEngine) -> None:
    eng = Engine(resolve_backend())
    eng.up(spec(small()))
    lock = engine.hold_lock(PROJECT, "dev")
    with pytest.raises(EngineError) as info:
        eng.up(spec(small()))
    assert "locked by another update" in info.value.message
    hint = info.value.hint or ""
    command = hint[hint.index("`cd ") + 1 : hint.index("` clears")]
    assert command == f"cd {eng.workdir(PROJECT)} && pulumi cancel --yes --stack dev"
    env = {**os.environ, **resolve_backend().env}
    subprocess.run(
        command, shell=True, check=True, env=env, capture_output=True
    )  # the hint, as a user runs it
    assert not lock.exists()
    eng.up(spec(small()))
    assert changes(engine) == {"same": 4}


def test_crash_leaves_a_lock_and_a_pending_operation_that_the_next_run_recovers(
    engine: StandinEngine,
) -> None:
    eng = Engine(resolve_backend())
    engine.control(crash_on="subnet")
    with pytest.raises(EngineError):
        eng.up(spec(small()))
    saved = engine.checkpoint(PROJECT, "dev") or {}
    assert [p["resource"]["urn"].rsplit("::", 1)[-1] for p in saved["pending_operations"]] == ["subnet"]
    engine.control(crash_on=None)
    with pytest.raises(EngineError) as info:
        eng.up(spec(small()))
    assert "locked" in info.value.message
    subprocess.run(
        ["pulumi", "cancel", "--yes", "--stack", "dev"],
        cwd=eng.workdir(PROJECT),
        env={**os.environ, **resolve_backend().env},
        check=True,
        capture_output=True,
    )
    warnings: list[str] = []
    eng.up(
        spec(small()),
        on_event=lambda e: warnings.extend([e.diagnostic_event.message] if e.diagnostic_event else []),
    )
    assert any("1 pending operations" in w for w in warnings)
    assert changes(engine) == {"same": 3, "create": 1}
    assert (engine.checkpoint(PROJECT, "dev") or {})["pending_operations"] == []


def test_wrong_passphrase_is_translated(engine: StandinEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    Engine(resolve_backend()).up(spec(small()))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "not the one the stack was created with")
    with pytest.raises(EngineError) as info:
        Engine(resolve_backend()).up(spec(small()))
    assert "passphrase does not open" in info.value.message
    assert "PULUMI_CONFIG_PASSPHRASE" in (info.value.hint or "")


@pytest.mark.parametrize("where", ["variable", "file"])
def test_an_empty_passphrase_is_refused(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty passphrase would encrypt the stacks' secrets with no key: refused before any stack."""
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    if where == "variable":
        monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    else:
        (tmp_path / "pass").write_text(" \n")
        monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(tmp_path / "pass"))
    with pytest.raises(PrerequisiteError) as refused:
        resolve_backend(f"file://{tmp_path}/state")
    assert "empty" in refused.value.message and "no key at all" in refused.value.message
    assert "unset it" in (refused.value.hint or "")


def test_missing_summary_event_is_translated(engine: StandinEngine) -> None:
    engine.control(no_summary=True)
    with pytest.raises(EngineError) as info:
        Engine(resolve_backend()).preview(spec(small()))
    assert "no change summary" in info.value.message


def test_stack_created_by_another_run_meanwhile_is_translated(engine: StandinEngine) -> None:
    engine.control(race_init=True)
    with pytest.raises(EngineError) as info:
        Engine(resolve_backend()).up(spec(small()))
    assert info.value.message == f"stack {PROJECT}/dev already exists"


def test_failing_pulumi_version_is_a_prerequisite_error(engine: StandinEngine) -> None:
    engine.control(version_fails=True)
    with pytest.raises(PrerequisiteError) as info:
        Engine(resolve_backend()).up(spec(small()))
    assert info.value.message == "`pulumi version` failed (1)"


@pytest.mark.parametrize(
    ("fault", "error", "words"),
    [("no_plugin", PrerequisiteError, "plugin install"), ("no_credentials", CloudError, "aws sso login")],
)
def test_provider_errors_are_translated(engine: StandinEngine, fault: str, error: type, words: str) -> None:
    engine.control(**{fault: [PROJECT]})
    with pytest.raises(error) as info:
        Engine(resolve_backend()).up(spec(small()))
    assert words in (info.value.hint or "")


def test_missing_stack_for_destroy_and_outputs_is_not_an_error(engine: StandinEngine) -> None:
    eng = Engine(resolve_backend())
    assert eng.destroy(StackSpec(PROJECT, "nope")) is False
    assert eng.outputs(StackSpec(PROJECT, "nope")) is None


def test_missing_pulumi_is_a_prerequisite_error(no_pulumi: None) -> None:
    with pytest.raises(PrerequisiteError) as info:
        Engine(resolve_backend()).up(spec())
    assert "get.pulumi.com" in (info.value.hint or "")


def test_too_old_pulumi_is_a_prerequisite_error(engine: StandinEngine) -> None:
    engine.control(version="2.9.0")
    with pytest.raises(PrerequisiteError) as info:
        Engine(resolve_backend()).up(spec())
    assert "too old" in info.value.message


def test_preflight_refuses_a_cli_that_cannot_destroy_inline_programs(engine: StandinEngine) -> None:
    """The Automation API destroys an inline program with `--client`, which needs pulumi 3.181."""
    from llmctl.infra.aws.preflight import require_pulumi

    engine.control(version="3.180.0")
    with pytest.raises(PrerequisiteError) as info:
        require_pulumi()
    assert "older than 3.181.0" in info.value.message
    engine.control(version="3.181.0")
    assert "3.181.0" in require_pulumi()


def _pulumi(eng: Engine, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pulumi", *args],
        cwd=eng.workdir(PROJECT),
        env={**os.environ, **resolve_backend().env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_stand_in_refuses_what_the_real_cli_refuses(engine: StandinEngine) -> None:
    eng = Engine(resolve_backend())
    eng.up(spec(small()))
    removed = _pulumi(eng, "stack", "rm", "--yes", "dev")
    assert removed.returncode == 255 and "still has resources; removal rejected" in removed.stderr
    assert _pulumi(eng, "upp").stderr.startswith('error: unknown command "upp" for "pulumi"')
    flag = _pulumi(eng, "up", "--yes", "--stack", "dev", "--colour", "never")
    assert flag.returncode == 255 and flag.stderr.strip() == "error: unknown flag: --colour"
    # refresh finds a resource deleted out of band and drops it from the state
    engine.control(gone=["subnet"])
    assert _pulumi(eng, "refresh", "--yes", "--skip-preview", "--stack", "dev").returncode == 0
    assert not any(u.endswith("::subnet") for u in engine.resources(PROJECT, "dev"))
    assert _pulumi(eng, "stack", "rm", "--yes", "--force", "dev").returncode == 0
    assert engine.checkpoint(PROJECT, "dev") is None


def test_outputs_are_read_once_per_command_and_follow_up_and_destroy(engine: StandinEngine) -> None:
    """One Engine is one llmctl command: a stack's outputs cost one `stack output` run, then up and
    destroy of that stack (which go through the same Engine) replace or forget them."""
    eng = Engine(resolve_backend())

    def reads() -> int:
        return sum(1 for c in engine.calls() if c["command"] == "stack output")

    assert eng.outputs(spec()) is None and eng.outputs(spec()) is None  # no stack yet
    assert eng.up(spec(small())) == {"vpc_id": "vpc-id"}
    before = reads()
    first = eng.outputs(spec())
    assert first == {"vpc_id": "vpc-id"} and reads() == before  # what up returned, no new run
    first["vpc_id"] = "changed by the caller"
    assert eng.outputs(spec()) == {"vpc_id": "vpc-id"}  # callers get copies
    assert reads() == before
    fresh = Engine(resolve_backend())  # another command reads the backend
    assert fresh.outputs(spec()) == {"vpc_id": "vpc-id"}
    one_read = reads() - before  # `stack output --json`, then again with --show-secrets
    assert one_read == 2
    assert fresh.outputs(spec()) == {"vpc_id": "vpc-id"} and reads() == before + one_read
    assert eng.destroy(spec(), remove=True)
    assert eng.outputs(spec()) is None
    assert fresh.outputs(spec()) == {"vpc_id": "vpc-id"}  # a cached read of another command: stale by design
    assert Engine(resolve_backend()).outputs(spec()) is None
