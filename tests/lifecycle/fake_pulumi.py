"""A stand-in for the `pulumi` CLI: just enough of the protocol the Automation API speaks.

It keeps stacks as JSON files under $FAKE_PULUMI_DIR/stacks/<project>/<stack>.json, records every
call to $FAKE_PULUMI_DIR/calls.jsonl, and follows $FAKE_PULUMI_DIR/control.json:
  {"fail_up": [project], "fail_destroy": [project], "lock": [project], "hang_up": [project],
   "no_plugin": [project], "no_credentials": [project], "outputs": {project: {...}}, "version": "3.210.0"}
Like the real CLI it refuses flags it does not have (FLAGS lists the ones the Automation API sends),
needs a passphrase for passphrase-encrypted stacks, and sends engine events the way the Automation
API asked for: over gRPC (`--event-log tcp://...`, CLIs newer than 3.205.0) or into a log file
(older CLIs; set "version": "3.205.0" to take that path). It never runs the inline program (the real
CLI would connect back to it over `--client`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(os.environ["FAKE_PULUMI_DIR"])
FMT = "%Y-%m-%dT%H:%M:%S.%fZ"
RESOURCES = ["pulumi:pulumi:Stack", "aws:ec2/vpc:Vpc", "aws:eks/cluster:Cluster"]
VERSION = "3.210.0"
_OP = ("--color", "--client", "--exec-kind", "--event-log", "--stack", "--parallel", "--message")
# Flags the real CLI accepts for each command, as the Automation API spells them (values follow).
FLAGS: dict[str, tuple[str, ...]] = {
    "up": ("--yes", "--skip-preview", *_OP),
    "preview": ("--json", *_OP),
    "destroy": ("--yes", "--skip-preview", "--remove", *_OP),
    "refresh": ("--yes", "--skip-preview", *_OP),
    "stack select": ("--stack", "--create"),
    "stack init": ("--secrets-provider", "--stack", "--no-select"),
    "stack rm": ("--yes", "--force", "--preserve-config", "--stack"),
    "stack ls": ("--json", "--all"),
    "stack output": ("--json", "--show-secrets", "--stack"),
    "stack history": ("--json", "--show-secrets", "--page-size", "--page", "--stack"),
    "config set-all": ("--stack", "--plaintext", "--secret", "--path", "--json"),
    "cancel": ("--yes", "--stack"),
}
NEEDS_PASSPHRASE = ("up", "preview", "destroy", "refresh", "stack init", "config set-all", "stack output")


def control() -> dict[str, Any]:
    path = ROOT / "control.json"
    return json.loads(path.read_text()) if path.exists() else {}


def project() -> str:
    for line in Path("Pulumi.yaml").read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    return "unknown"


def flag(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def stack_path(proj: str, stack: str) -> Path:
    return ROOT / "stacks" / proj / f"{stack}.json"


def load(proj: str, stack: str) -> dict[str, Any] | None:
    path = stack_path(proj, stack)
    return json.loads(path.read_text()) if path.exists() else None


def save(proj: str, stack: str, data: dict[str, Any]) -> None:
    path = stack_path(proj, stack)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def now() -> str:
    return datetime.now(timezone.utc).strftime(FMT)


class Events:
    """Engine events to where `--event-log` points: a gRPC Events service or a log file."""

    def __init__(self, target: str | None) -> None:
        self.grpc = target[len("tcp://") :] if target and target.startswith("tcp://") else None
        self.handle = open(target, "a", encoding="utf-8") if target and not self.grpc else None  # noqa: SIM115
        self.pending: list[str] = []
        self.seq = 0

    def emit(self, **event: Any) -> None:
        self.seq += 1
        line = json.dumps({"sequence": self.seq, "timestamp": int(time.time()), **event})
        if self.handle is not None:
            self.handle.write(line + "\n")
            self.handle.flush()
        elif self.grpc:
            self.pending.append(line)

    def close(self) -> None:
        self.emit(cancelEvent={})
        if self.handle:
            self.handle.close()
        if self.grpc:
            import grpc
            from pulumi.runtime.proto import events_pb2, events_pb2_grpc

            with grpc.insecure_channel(self.grpc) as channel:
                stub = events_pb2_grpc.EventsStub(channel)
                stub.StreamEvents(iter([events_pb2.EventRequest(event=line) for line in self.pending]))


def fail(message: str, code: int = 255, stdout: str = "") -> None:
    if stdout:
        print(stdout)
    print(message, file=sys.stderr)
    sys.exit(code)


def operation(op: str, args: list[str], proj: str, stack: str) -> None:
    ctl = control()
    data = load(proj, stack)
    if data is None:
        fail(f"error: no stack named '{stack}' found")
    assert data is not None
    events = Events(flag(args, "--event-log"))
    if proj in ctl.get("lock", []):
        events.close()
        fail(
            f"error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end "
            f"or delete the lock file with `pulumi cancel`.\n  file://x/.pulumi/locks/organization/{proj}/{stack}/abc.json"
        )
    if proj in ctl.get("no_plugin", []):
        events.close()
        fail(
            "error: could not load plugin for aws provider 'default_7_51_1': no resource plugin 'pulumi-resource-aws' found in the workspace at version v7.51.1"
        )
    if proj in ctl.get("no_credentials", []):
        events.close()
        fail(
            "",
            stdout="error: configuring Terraform AWS Provider: no valid credential sources for Terraform AWS Provider found.",
        )
    preview = op == "preview"
    if op == "up" and proj in ctl.get("hang_up", []):
        got: list[int] = []
        signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
        # written once the handler is in place, so a test that waits for it can interrupt at once
        (ROOT / "hanging").write_text(str(os.getpid()))
        deadline = time.time() + 20
        while not got and time.time() < deadline:
            time.sleep(0.05)
        record({"event": "sigint" if got else "timeout", "project": proj, "stack": stack})
        events.emit(diagnosticEvent={"message": "update canceled", "severity": "error", "color": "never"})
        events.close()
        fail("error: update canceled")
    kinds = RESOURCES if op != "destroy" else list(reversed(RESOURCES))
    step_op = "delete" if op == "destroy" else "create"
    for kind in kinds:
        meta = {"op": step_op, "urn": f"urn:pulumi:{stack}::{proj}::{kind}::r", "type": kind, "provider": ""}
        events.emit(resourcePreEvent={"metadata": meta, "planning": preview})
        if not preview:
            events.emit(resOutputsEvent={"metadata": meta})
    failing = (op == "up" and proj in ctl.get("fail_up", [])) or (
        op == "destroy" and proj in ctl.get("fail_destroy", [])
    )
    if failing:
        events.emit(
            diagnosticEvent={"message": "creating resource: boom", "severity": "error", "color": "never"}
        )
        data["history"].append(
            {
                "kind": op,
                "result": "failed",
                "startTime": now(),
                "endTime": now(),
                "message": "",
                "environment": {},
                "config": {},
                "version": len(data["history"]) + 1,
            }
        )
        save(proj, stack, data)
        events.close()
        fail("", stdout=f"Updating ({stack}):\n error: update failed\nResources:\n    {len(kinds)} unchanged")
    events.emit(
        summaryEvent={
            "maybeCorrupt": False,
            "durationSeconds": 1,
            "resourceChanges": {step_op: len(kinds)},
            "PolicyPacks": {},
        }
    )
    events.close()
    if preview:
        if "--json" in args:
            steps = [{"op": step_op, "urn": k} for k in kinds]
            print(json.dumps({"steps": steps, "changeSummary": {step_op: len(kinds)}}))
        else:
            print(f"Previewing update ({stack}):\nResources:\n    + {len(kinds)} to {step_op}")
        return
    if op == "up":
        data["outputs"] = ctl.get("outputs", {}).get(proj, {"cluster_name": f"llmctl-{stack}"})
        data["resources"] = len(kinds)
    else:
        data["outputs"] = {}
        data["resources"] = 0
    data["history"].append(
        {
            "kind": "update" if op == "up" else op,
            "result": "succeeded",
            "startTime": now(),
            "endTime": now(),
            "message": "",
            "environment": {},
            "config": {},
            "version": len(data["history"]) + 1,
            "resourceChanges": {step_op: len(kinds)},
        }
    )
    save(proj, stack, data)


def record(entry: dict[str, Any]) -> None:
    with open(ROOT / "calls.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def check_flags(op: str, args: list[str]) -> None:
    """Fail like the real CLI on a flag the command does not have."""
    known = FLAGS.get(op)
    if known is None:
        return
    words = args[: args.index("--")] if "--" in args else args
    for arg in words:
        if arg.startswith("-") and arg.split("=", 1)[0] not in known:
            fail(f"error: unknown flag: {arg.split('=', 1)[0]}", code=1)


def check_passphrase(op: str, proj: str) -> None:
    """Passphrase-encrypted stacks need PULUMI_CONFIG_PASSPHRASE(_FILE), as with the real CLI."""
    if op not in NEEDS_PASSPHRASE or os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None:
        return
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        return
    fail(
        'error: constructing secrets manager of type "passphrase": passphrase must be set with '
        "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--non-interactive"]
    if args[:1] == ["version"]:
        print("v" + control().get("version", VERSION))
        return
    proj = project() if Path("Pulumi.yaml").exists() else ""
    stack = flag(args, "--stack") or ""
    words = [a for a in args if not a.startswith("-")][:2]
    op = words[0] if words else ""
    if op in ("stack", "config") and len(words) > 1:
        op = f"{words[0]} {words[1]}"
    if op == "stack init":
        stack = args[args.index("init") + 1]
    if op == "stack rm":
        stack = [a for a in args if not a.startswith("-")][-1]
    record(
        {
            "op": op,
            "project": proj,
            "stack": stack,
            "args": args,
            "env_backend": os.environ.get("PULUMI_BACKEND_URL"),
            "passphrase_file": os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"),
            "delete_unreachable": os.environ.get("PULUMI_K8S_DELETE_UNREACHABLE"),
        }
    )
    check_flags(op, args)
    check_passphrase(op, proj)

    if op == "stack select":
        if load(proj, stack) is None:
            fail(f"error: no stack named '{stack}' found")
    elif op == "stack init":
        if load(proj, stack) is not None:
            fail(f"error: stack '{stack}' already exists")
        save(proj, stack, {"config": {}, "outputs": {}, "history": [], "resources": 0})
    elif op == "config set-all":
        data = load(proj, stack) or fail(f"error: no stack named '{stack}' found")
        assert data is not None
        for i, arg in enumerate(args):
            if arg in ("--plaintext", "--secret"):
                key, _, value = args[i + 1].partition("=")
                data["config"][key] = value
        save(proj, stack, data)
    elif op in ("up", "preview", "destroy"):
        operation(op, args, proj, stack)
    elif op == "stack history":
        data = load(proj, stack)
        if data is None:
            fail(f"error: no stack named '{stack}' found")
        assert data is not None
        print(json.dumps(list(reversed(data["history"]))[:1]))
    elif op == "stack output":
        data = load(proj, stack)
        if data is None:
            fail(f"error: no stack named '{stack}' found")
        assert data is not None
        print(json.dumps(data["outputs"]))
    elif op == "stack ls":
        rows = []
        base = ROOT / "stacks"
        for folder in sorted(base.iterdir()) if base.exists() else []:
            if "--all" not in args and folder.name != proj:
                continue
            for file in sorted(folder.glob("*.json")):
                data = json.loads(file.read_text())
                last = data["history"][-1]["endTime"] if data["history"] else None
                # Like the DIY backend: the current project's stacks by name, others fully qualified.
                row = {
                    "name": file.stem if folder.name == proj else f"organization/{folder.name}/{file.stem}",
                    "current": False,
                    "resourceCount": data["resources"],
                }
                # Like the real CLI: a stack being updated has no lastUpdate, only updateInProgress.
                if folder.name in control().get("in_progress", []):
                    row["updateInProgress"] = True
                elif last:
                    row["lastUpdate"] = last
                rows.append(row)
        print(json.dumps(rows))
    elif op == "stack rm":
        path = stack_path(proj, stack)
        if not path.exists():
            fail(f"error: no stack named '{stack}' found")
        path.unlink()
    elif op == "cancel":
        pass
    # anything else (config refresh, stack tag, ...) succeeds silently


if __name__ == "__main__":
    main()
