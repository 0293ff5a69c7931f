"""The stand-in's fork server runs a command as the executable itself would (exit status, output, cwd,
environment, stdin, signals), and the executable falls back to its own process without it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from standin_support import install

COMMANDS = [
    ["version"],
    ["bogus"],
    ["stack", "ls", "--json"],
    ["up", "--unknown-flag"],
    ["stack", "output", "--json"],
]


def _run(exe: Path, args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, input=""
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def standin_env(tmp_path: Path) -> dict[str, str]:
    data = tmp_path / "standin"
    data.mkdir()
    (data / "control.json").write_text('{"version": "9.9.9"}')
    backend = tmp_path / "backend"
    return {
        **os.environ,
        "STANDIN_PULUMI_DIR": str(data),
        "STANDIN_BACKEND": str(backend),
        "PULUMI_BACKEND_URL": f"file://{backend}",
    }


def test_a_forked_command_answers_exactly_as_its_own_process(
    tmp_path: Path, fork_server: str, standin_env: dict[str, str]
) -> None:
    assert fork_server, "the session's fork server runs (STANDIN_FORKSERVER=0 turns it off)"
    forked = install(tmp_path / "forked", "pulumi", "cli", fork_server)
    alone = install(tmp_path / "alone", "pulumi", "cli")
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: demo\nruntime: python\n")
    answers = {
        tuple(args): (_run(forked, args, project, standin_env), _run(alone, args, project, standin_env))
        for args in COMMANDS
    }
    for args, (mine, theirs) in answers.items():
        assert mine == theirs, args
    assert answers[("version",)][0] == (0, "v9.9.9\n", "")
    assert answers[("bogus",)][0][0] != 0  # an exit status other than 0 comes through
    # the records the command wrote name the caller's working directory, from both
    calls = (tmp_path / "standin" / "calls.jsonl").read_text().splitlines()
    # version, stack ls and stack output are recorded (the other two fail to parse), twice each
    assert len(calls) == 2 * 3 and all(f'"cwd": "{project}"' in line for line in calls)


def _hanging_up(exe: Path, project: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """`pulumi up` held by the control file's hang_on="*", and the pid the stand-in says is hanging."""
    marker = Path(env["STANDIN_PULUMI_DIR"]) / "hanging"
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [str(exe), "up", "--stack", "dev", "--yes", "--client", "127.0.0.1:9"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120  # a bound for a busy machine; it ends as soon as the marker is there
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=60)
    return proc, int(marker.read_text().split()[0])


@pytest.mark.parametrize("how", ["forked", "alone"])
def test_sigint_reaches_the_command_and_a_killed_command_kills_the_caller(
    how: str, tmp_path: Path, fork_server: str, standin_env: dict[str, str]
) -> None:
    exe = install(tmp_path / how, "pulumi", "cli", fork_server if how == "forked" else "")
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: demo\nruntime: python\n")
    env = {**standin_env, "PULUMI_CONFIG_PASSPHRASE": "pass"}
    assert _run(exe, ["stack", "init", "dev"], project, env)[0] == 0
    (Path(env["STANDIN_PULUMI_DIR"]) / "control.json").write_text('{"hang_on": "*"}')

    proc, runner = _hanging_up(exe, project, env)
    assert (runner == proc.pid) == (how == "alone")  # forked: the command runs in the server's child
    proc.send_signal(signal.SIGINT)  # to the executable, as llmctl's Engine.stop does
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 255 and "update canceled" in err, (out, err)
    assert "^C received; cancelling" in out

    proc, runner = _hanging_up(exe, project, env)
    os.kill(runner, signal.SIGKILL)  # the command itself dies, as a killed CLI does
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL


HERE = Path(__file__).resolve().parent


def test_the_parent_has_imported_the_modules_a_child_would_import_from_two_threads() -> None:
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from standin_engine import forkserver\n"
        "forkserver.preload()\n"
        "print(','.join(m for m in forkserver.LAZY if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().split(",") == [
        "grpc._channel",
        "grpc.experimental",
        "pulumi.runtime.proto.events_pb2_grpc",
    ]
    # grpc.insecure_channel imports grpc._channel on its first call: the module the hang was in
    source = Path(__import__("grpc").__file__).read_text()
    assert "from grpc import _channel" in source
