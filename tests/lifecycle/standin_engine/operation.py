"""up / preview / destroy / refresh: lock, run the program through the SDK's gRPC path, save, report."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from .cli import Args, _stack
from .control import control
from .deploy import Deployment, name_of
from .events import EventLog
from .store import CliError, now, project_name

KIND = {"up": "update", "preview": "update", "destroy": "destroy", "refresh": "refresh"}
HEADER = {"up": "Updating", "preview": "Previewing update", "destroy": "Destroying", "refresh": "Refreshing"}
WORDS = {
    "create": "+ {} created",
    "update": "~ {} updated",
    "replace": "+-{} replaced",
    "delete": "- {} deleted",
}


def _provider_faults(project: str) -> None:
    ctl = control()
    if project in ctl.get("no_plugin", []):
        raise CliError(
            "error: could not load plugin for aws provider 'default_7_51_1': no resource plugin "
            "'pulumi-resource-aws' found in the workspace at version v7.51.1"
        )
    if project in ctl.get("no_credentials", []):
        raise CliError(
            "error: update failed",
            stdout="error: configuring Terraform AWS Provider: no valid credential sources for Terraform AWS Provider found.",
        )


def _report(command: str, stack: str, dep: Deployment, error: str) -> str:
    lines = [f"{HEADER[command]} ({stack}):", ""]
    if dep.errors or error:
        lines += [
            "Diagnostics:",
            *(f"  {e}" for e in dep.errors),
            *([f"  error: {error.strip()}"] if error else []),
            "",
        ]
    lines.append("Resources:")
    for op, text in WORDS.items():
        if dep.changes.get(op):
            lines.append("    " + text.format(dep.changes[op]))
    if dep.changes.get("same"):
        lines.append(f"    {dep.changes['same']} unchanged")
    lines += ["", "Duration: 1s"]
    return "\n".join(lines)


def operate(args: Args) -> int:
    command = args.command
    preview = command == "preview" or args.on("--preview-only")
    stack = _stack(args, project_name())
    stack.require()
    stack.unlock_secrets()
    _provider_faults(stack.project)
    lock = None if preview else stack.lock()
    events = EventLog(args.value("--event-log"))
    dep = Deployment(stack, KIND[command], preview, events)
    interrupts: list[int] = []

    def on_sigint(signum: int, frame: Any) -> None:
        interrupts.append(signum)
        if len(interrupts) > 1:
            print("^C received twice; terminating immediately", file=sys.stderr)
            os._exit(255)
        print("^C received; cancelling. If you would like to terminate immediately, press ^C again.")
        dep.canceled.set()

    signal.signal(signal.SIGINT, on_sigint)
    started = now()
    try:
        config, _ = stack.config_values()
        events.emit(preludeEvent={"config": {k: v for k, v in config.items()}})
        pending = dep.checkpoint.get("pending_operations") or []
        if pending and not preview:
            events.diagnostic(
                f"Attempting to deploy or update resources with {len(pending)} pending operations from previous deployment.\n"
                + "".join(f"  * {p['resource']['urn']}, interrupted while {p['type']}\n" for p in pending)
                + "These resources are in an unknown state because the Pulumi CLI was interrupted while waiting for "
                "changes to these resources to complete.",
                "warning",
            )
        if control().get("hang_on") == "*" and not preview:
            dep.hang("*")
        error = ""
        runs = command in ("up", "preview") or args.switches.get("--run-program") == "true"
        client = args.value("--client")
        if command == "refresh":
            if not dep.canceled.is_set():
                refresh(dep)
            finish_refresh(dep, started)
        else:
            if runs and not dep.canceled.is_set():
                if not client:
                    raise CliError("error: the stand-in engine runs only inline programs (--client ADDRESS)")
                error = dep.run_program(client)
            dep.finish(started, error)
        canceled = dep.canceled.is_set()
        if canceled:
            events.diagnostic("update canceled", "error")
        events.close()
        print(_report(command, stack.name, dep, error))
        if canceled:
            print("error: update canceled", file=sys.stderr)
            return 255
        if error or dep.errors:
            print(f"error: {'preview' if preview else 'update'} failed", file=sys.stderr)
            return 255
        return 0
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


def refresh(dep: Deployment) -> None:
    gone = set(control().get("gone") or [])
    for urn, res in dep.old.items():
        if name_of(urn) in gone:
            dep.step("delete", res, res)
            continue
        dep.new[urn] = res
        dep.events.emit(
            resourcePreEvent={
                "metadata": {"op": "refresh", "urn": urn, "type": res["type"], "provider": ""},
                "planning": dep.preview,
            }
        )
        dep.changes["same"] += 1


def finish_refresh(dep: Deployment, started: str) -> None:
    if not control().get("no_summary"):
        dep.events.emit(
            summaryEvent={
                "maybeCorrupt": False,
                "durationSeconds": 1,
                "resourceChanges": dict(dep.changes),
                "PolicyPacks": {},
            }
        )
    if dep.preview:
        return
    dep.stack.save_checkpoint(
        {**dep.checkpoint, "resources": list(dep.new.values()), "pending_operations": []}
    )
    dep.stack.record("refresh", "succeeded", started, dict(dep.changes))
