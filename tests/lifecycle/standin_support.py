"""Test-side handle on the stand-in engine (tests/lifecycle/standin_engine): its control file, its
records, the backend state it keeps, and the stand-in kubectl."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
#: the cache bucket the stand-in's platform exports (Pulumi mocks name a bucket after its resource)
STANDIN_BUCKET = "cache-bucket"


def _site_dirs() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


#: both scripts' first lines: the stand-in's folder and the site-packages folders on the path (`-S`)
_PATHS = """
import sys
sys.path.insert(0, {here!r})
sys.path.extend({site!r})
"""

#: the command in a Python process of its own (no fork server, or one that does not answer)
_LOCAL = (
    _PATHS
    + """
from standin_engine.{module} import main
main()
"""
)

#: the executable on PATH when a fork server runs: the compiled client, told its module and server
_FORKED = """#!/bin/sh
exec {client} {module} {server} {local} "$0" "$@"
"""

CLIENT_SOURCE = HERE / "standin_engine" / "client.c"


def build_client(folder: Path) -> Path | None:
    """standin_engine/client.c compiled into folder; None when no C compiler is there (the commands
    then run in their own Python processes: correct, slower)."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return None
    client = folder / "standin-client"
    done = subprocess.run(
        [compiler, "-O2", "-Wall", "-Werror", "-o", str(client), str(CLIENT_SOURCE)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"compiling {CLIENT_SOURCE} failed:\n{done.stderr}")
    return client


def install(bin_dir: Path, name: str, module: str, server: str = "") -> Path:
    """An executable `name` in bin_dir that runs standin_engine.<module>:main: in a child of the fork
    server at `server` when that one answers (standin_engine/forkserver.py, through its compiled client
    beside the socket), else in its own process."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / name
    local = bin_dir / f".{name}-local"
    # `-S`: no site processing at start-up (the .pth files, the editable finder), about half of a light
    # call's cost; the site-packages folders are on the path for yaml, and the commands that run a
    # program call `site.main()` before importing llmctl (standin_engine/cli.py).
    _executable(
        local, f"#!{sys.executable} -S" + _LOCAL.format(here=str(HERE), site=_site_dirs(), module=module)
    )
    client = Path(server).with_name("standin-client") if server else None
    if client is not None and client.exists():
        quoted = {
            key: shlex.quote(str(value))
            for key, value in (("client", client), ("module", module), ("server", server), ("local", local))
        }
        _executable(script, _FORKED.format(**quoted))
    else:
        _executable(script, local.read_text())
    return script


def replay_kubectl(tmp_path: Path, state: Path, monkeypatch: Any, sequence: Path) -> Path:
    """The stand-in kubectl first on PATH, replaying `sequence` (a recorded kube-sequence.json);
    returns the kubeconfig where `up` saves stack dev's."""
    bin_dir = tmp_path / "bin"
    install(bin_dir, "kubectl", "kubectl")
    data = tmp_path / "standin"
    data.mkdir()
    shutil.copy(sequence, data / "kube-sequence.json")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("STANDIN_PULUMI_DIR", str(data))
    monkeypatch.setenv("STANDIN_BACKEND", str(tmp_path / "no-backend"))
    kube = state / "kube" / "dev.yaml"
    kube.parent.mkdir(parents=True, exist_ok=True)
    kube.write_text("clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\n")
    return kube


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class ForkServer:
    """The warm parent of the stand-in commands (standin_engine/forkserver.py), one per test process."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / "standin.sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _SERVER.format(here=str(HERE), site=_site_dirs()), self.path],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline().strip()
        if ready != "ready":
            self.proc.kill()
            raise RuntimeError(f"the stand-in fork server did not start (said {ready!r})")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except (
            subprocess.TimeoutExpired
        ):  # a command still running (a hang the test left): not ours to wait for
            self.proc.kill()
            self.proc.wait(timeout=30)


_SERVER = (
    _PATHS
    + """
from standin_engine.forkserver import serve
serve(sys.argv[1])
"""
)


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class StandinEngine:
    """Controls and reads the stand-in `pulumi`."""

    def __init__(self, root: Path, backend: Path) -> None:
        self.root = root
        self.backend = backend
        self.control_file = root / "control.json"
        self.control_file.write_text("{}")

    def control(self, **settings: Any) -> None:
        """Faults and answers: fail={name: message}, hang_on=name, crash_on=name, version=..., offerings=..."""
        current = json.loads(self.control_file.read_text())
        current.update(settings)
        self.control_file.write_text(json.dumps(current))

    def calls(self) -> list[dict[str, Any]]:
        return _lines(self.root / "calls.jsonl")

    def ops(self) -> list[tuple[str, str, str]]:
        """(command, project, stack) of every up/preview/destroy/refresh/cancel/stack rm, in order."""
        found = []
        for call in self.calls():
            if call["command"] in ("up", "preview", "destroy", "refresh", "cancel", "stack rm"):
                args = call["args"]
                stack = args[args.index("--stack") + 1] if "--stack" in args else args[-1]
                found.append((call["command"], Path(call["cwd"]).name, stack))
        return found

    def deletes(self) -> list[dict[str, Any]]:
        """Every delete run: project, stack, kind (update/destroy) and the waves of URNs."""
        return _lines(self.root / "deletes.jsonl")

    def faults(self) -> list[dict[str, Any]]:
        return _lines(self.root / "faults.jsonl")

    def checkpoint(self, project: str, stack: str) -> dict[str, Any] | None:
        path = self.backend / ".pulumi" / "stacks" / project / f"{stack}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def resources(self, project: str, stack: str) -> dict[str, dict[str, Any]]:
        """The stack's saved resources by URN."""
        data = self.checkpoint(project, stack) or {"resources": []}
        return {res["urn"]: res for res in data["resources"]}

    def kube(self, *objects: dict[str, Any]) -> None:
        """Objects (or status overlays, keyed by kind, namespace and name) the stand-in kubectl serves."""
        path = self.root / "kube.json"
        current = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps([*current, *objects]))

    def kube_log(self, namespace: str, pod: str, text: str) -> None:
        """The log the stand-in kubectl prints for `kubectl logs -n NAMESPACE POD`."""
        path = self.root / "kube-logs.json"
        current = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**current, f"{namespace}/{pod}": text}))

    def kubectl_calls(self) -> list[list[str]]:
        path = self.root / "kubectl-calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def outputs(self, project: str, stack: str) -> dict[str, Any]:
        """The stack's saved outputs, secrets unwrapped."""
        from standin_engine.cli import _plain

        return dict(_plain((self.checkpoint(project, stack) or {}).get("outputs", {}), True))

    def history(self, project: str, stack: str) -> list[dict[str, Any]]:
        """The stack's update history, oldest first."""
        path = self.backend / ".pulumi" / "history" / project / f"{stack}.json"
        return list(json.loads(path.read_text())) if path.exists() else []

    def hold_lock(self, project: str, stack: str) -> Path:
        """A lock file as another running update leaves it."""
        folder = self.backend / ".pulumi" / "locks" / "organization" / project / stack
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "0b8b1c1e-other-update.json"
        path.write_text(json.dumps({"pid": 1, "username": "someone", "hostname": "elsewhere"}))
        return path


def stand_in_env(root: Path, bin_dir: Path) -> dict[str, str]:
    return {"STANDIN_PULUMI_DIR": str(root), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def kube_objects(resources: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The Kubernetes objects of a stack's saved resources, as their inputs (apiVersion, kind, ...)."""
    return [
        res["inputs"]
        for res in resources.values()
        if res["type"].startswith("kubernetes:") and res.get("custom") and "kind" in res["inputs"]
    ]
