"""A thin wrapper over the Pulumi Automation API: inline programs, one workspace per project.

No business logic lives here: it creates or selects a stack, sets its config, runs
up/preview/destroy with an event callback, reads outputs, lists and removes stacks, and
translates every Automation API failure into an :class:`LlmctlError` with a hint.

Ctrl-C: the pulumi process runs in its own session, so the terminal's SIGINT reaches only
llmctl; llmctl forwards one SIGINT (Pulumi then stops the update cleanly and saves its state),
waits for it to exit and raises :class:`UserAbort` saying that the next run resumes. A second
Ctrl-C is forwarded too (Pulumi then stops at once).
"""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from llmctl.errors import CloudError, EngineError, LlmctlError, PrerequisiteError, UserAbort
from llmctl.infra.aws.preflight import PULUMI_INSTALL, min_pulumi
from llmctl.infra.lifecycle.backend import Backend
from llmctl.state import state_dir

PLATFORM_PROJECT = "llmctl-platform"
Program = Callable[[], None]
OnEvent = Callable[[Any], None]


def workload_project(blueprint: str) -> str:
    """The Pulumi project of a blueprint's workload stacks."""
    return f"llmctl-{blueprint}"


@dataclass(frozen=True)
class StackSpec:
    """Which stack to run, with which program, config and extra environment."""

    project: str
    stack: str
    program: Program | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.project}/{self.stack}"


@dataclass(frozen=True)
class PreviewResult:
    """A preview's change summary (op -> count) and its steps."""

    changes: dict[str, int]
    steps: list[dict[str, str]]

    def count(self, *ops: str) -> int:
        return sum(self.changes.get(op, 0) for op in ops)


@dataclass(frozen=True)
class StackInfo:
    """One stack in the backend."""

    project: str
    stack: str
    last_update: datetime | None
    resource_count: int | None
    update_in_progress: bool


def _noop_program() -> None:
    """Used to select a stack when only its outputs or lifecycle are needed."""


class _Interrupted(Exception):
    pass


class _Running:
    """The pulumi process of the current command, and whether llmctl asked the operation to stop."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.stopping = False
        self.lock = threading.Lock()

    def stop(self) -> None:
        """Stop the operation as a Ctrl-C would: SIGINT to the running process (Pulumi then ends the
        update cleanly and saves its state); the commands after it are not started."""
        with self.lock:
            self.stopping = True
            if self.proc is not None and self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.send_signal(signal.SIGINT)


def _make_command(on_interrupt: Callable[[int], None], running: _Running) -> Any:
    """A PulumiCommand whose processes run in their own session and get SIGINT forwarded once
    (from the terminal's Ctrl-C, or from :meth:`Engine.stop`)."""
    from pulumi.automation import PulumiCommand
    from pulumi.automation._cmd import CommandResult
    from pulumi.automation.errors import create_command_error

    class _Command(PulumiCommand):
        def run(
            self,
            args: list[str],
            cwd: str,
            additional_env: Mapping[str, str],
            on_output: Callable[[str], Any] | None = None,
            on_error: Callable[[str], Any] | None = None,
        ) -> Any:
            argv = [self.command, *(["--non-interactive"] if "--non-interactive" not in args else []), *args]
            env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
            with running.lock:
                if running.stopping:
                    raise _Interrupted(f"stopped before `pulumi {' '.join(args[:2])}`")
                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    encoding="utf-8",
                    start_new_session=True,
                )
                running.proc = proc
            out: list[str] = []
            err: list[str] = []

            def pump(stream: Any, sink: list[str], callback: Callable[[str], Any] | None) -> None:
                for line in stream:
                    text = line.rstrip("\n")
                    sink.append(text)
                    if callback:
                        callback(text)
                stream.close()

            readers = [
                threading.Thread(target=pump, args=(proc.stdout, out, on_output), daemon=True),
                threading.Thread(target=pump, args=(proc.stderr, err, on_error), daemon=True),
            ]
            for reader in readers:
                reader.start()
            interrupts = 0
            while True:
                try:
                    code = proc.wait()
                    break
                except KeyboardInterrupt:
                    interrupts += 1
                    on_interrupt(interrupts)
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGINT)
            for reader in readers:
                reader.join()
            with running.lock:
                running.proc = None
                stopped = running.stopping
            result = CommandResult(stdout="\n".join(out), stderr="\n".join(err), code=code)
            if interrupts or (stopped and code != 0):
                raise _Interrupted(str(result))
            if code != 0:
                raise create_command_error(result)
            return result

    return _Command


def _tail(text: str, lines: int = 6) -> str:
    keep = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in keep if "error" in line.lower()]
    return "\n".join((errors or keep)[-lines:])


def translate(exc: BaseException, spec: StackSpec, workdir: Path) -> LlmctlError:
    """An Automation API failure as an LlmctlError with the next step in the hint."""
    from pulumi.automation.errors import (
        CommandError,
        ConcurrentUpdateError,
        InvalidVersionError,
        StackAlreadyExistsError,
        StackNotFoundError,
    )

    where = f"cd {workdir} && "
    if isinstance(exc, LlmctlError):
        return exc
    if isinstance(exc, _Interrupted):
        return UserAbort(
            f"interrupted: Pulumi stopped the update of {spec.label} and saved its state",
            f"run the same command again to resume (if it reports a lock: `{where}pulumi cancel --yes --stack {spec.stack}`)",
        )
    if isinstance(exc, FileNotFoundError):
        return PrerequisiteError("the pulumi CLI is not installed", PULUMI_INSTALL.format(min=min_pulumi()))
    if isinstance(exc, InvalidVersionError):
        return PrerequisiteError(
            f"the pulumi CLI is too old or unreadable: {exc}",
            "upgrade: " + PULUMI_INSTALL.format(min=min_pulumi()),
        )
    if isinstance(exc, subprocess.CalledProcessError):
        return PrerequisiteError(
            f"`pulumi version` failed ({exc.returncode})", PULUMI_INSTALL.format(min=min_pulumi())
        )
    text = str(exc)
    if isinstance(exc, ConcurrentUpdateError):
        return EngineError(
            f"stack {spec.label} is locked by another update",
            "wait for the other `llmctl`/`pulumi` run to finish; if none is running the lock is stale: "
            f"`{where}pulumi cancel --yes --stack {spec.stack}` clears it (with the same PULUMI_BACKEND_URL), and "
            f"`pulumi stack export --stack {spec.stack} | pulumi stack import --stack {spec.stack}` repairs pending operations",
        )
    if isinstance(exc, StackNotFoundError):
        return EngineError(
            f"stack {spec.label} does not exist in this backend",
            "run `llmctl stacks list` to see the stacks, or `llmctl up` to create it",
        )
    if isinstance(exc, StackAlreadyExistsError):
        return EngineError(f"stack {spec.label} already exists", "use `llmctl stacks list`")
    if isinstance(exc, CommandError):
        lowered = text.lower()
        if "plugin" in lowered and (
            "no resource plugin" in lowered or "could not" in lowered or "not found" in lowered
        ):
            return PrerequisiteError(
                f"a Pulumi provider plugin is missing for {spec.label}",
                "run `pulumi plugin install resource aws` (and kubernetes, eks) or let Pulumi download it: check network access to get.pulumi.com",
            )
        if "credential" in lowered or "expiredtoken" in lowered or "security token" in lowered:
            return CloudError(
                f"the AWS provider has no valid credentials for {spec.label}",
                "refresh them (`aws sso login`, `aws configure`), check AWS_PROFILE, then run the command again",
            )
        if "passphrase" in lowered and ("incorrect" in lowered or "decrypt" in lowered):
            return EngineError(
                f"the secrets passphrase does not open {spec.label}",
                "use the passphrase the stack was created with (PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE)",
            )
        return EngineError(
            f"pulumi failed on {spec.label}: {_tail(text) or type(exc).__name__}",
            "fix the cause above and run the same command again: Pulumi resumes from the saved state "
            "(add --debug for the full output)",
        )
    if isinstance(exc, RuntimeError) and "summary event" in text:
        return EngineError(
            f"pulumi returned no change summary for {spec.label}", "run the command again with --debug"
        )
    return EngineError(f"pulumi failed on {spec.label}: {exc}", "run the command again with --debug")


class Engine:
    """Runs stacks in one backend. Each project keeps a workspace dir under the state dir."""

    def __init__(self, backend: Backend, *, on_interrupt: Callable[[int], None] | None = None) -> None:
        self.backend = backend
        self.on_interrupt = on_interrupt or (lambda _count: None)
        self._command: Any = None
        self._running = _Running()
        # Stack outputs read during this command, by (project, stack). Only up and destroy change them,
        # and both go through this object: up stores what it returned, destroy forgets. Each read
        # otherwise costs three pulumi runs (workspace version check, stack select, stack output).
        self._outputs: dict[tuple[str, str], dict[str, Any] | None] = {}

    def workdir(self, project: str) -> Path:
        folder = state_dir() / "workspaces" / project
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return folder

    @contextlib.contextmanager
    def _translated(self, spec: StackSpec) -> Iterator[None]:
        try:
            yield
        except KeyboardInterrupt:
            raise UserAbort("interrupted", "run the same command again to resume") from None
        except Exception as exc:
            raise translate(exc, spec, self.workdir(spec.project)) from exc

    def _pulumi_command(self) -> Any:
        if self._command is None:
            self._command = _make_command(self.on_interrupt, self._running)(skip_version_check=False)
        return self._command

    def _workspace_options(self, spec: StackSpec) -> Any:
        from pulumi.automation import LocalWorkspaceOptions, ProjectBackend, ProjectSettings

        settings = ProjectSettings(
            name=spec.project, runtime="python", backend=ProjectBackend(url=self.backend.url)
        )
        return LocalWorkspaceOptions(
            work_dir=str(self.workdir(spec.project)),
            project_settings=settings,
            env_vars={**self.backend.env, **spec.env},
            secrets_provider=self.backend.secrets_provider,
            pulumi_command=self._pulumi_command(),
        )

    def _stack(self, spec: StackSpec, *, create: bool = True) -> Any:
        from pulumi import automation as auto

        program = spec.program or _noop_program
        opts = self._workspace_options(spec)
        if create:
            stack = auto.create_or_select_stack(
                stack_name=spec.stack, project_name=spec.project, program=program, opts=opts
            )
        else:
            stack = auto.select_stack(
                stack_name=spec.stack, project_name=spec.project, program=program, opts=opts
            )
        if spec.config:
            stack.set_all_config({key: auto.ConfigValue(value=value) for key, value in spec.config.items()})
        return stack

    def stop(self) -> None:
        """Stop the running operation from another thread (as Ctrl-C would); it then raises."""
        self._running.stop()

    def up(self, spec: StackSpec, on_event: OnEvent | None = None) -> dict[str, Any]:
        """Create or update the stack; returns its outputs as plain values."""
        self._running.stopping = False
        key = (spec.project, spec.stack)
        self._outputs.pop(key, None)
        with self._translated(spec):
            result = self._stack(spec).up(on_event=on_event, color="never")
            outputs = {name: value.value for name, value in result.outputs.items()}
        self._outputs[key] = copy.deepcopy(outputs)
        return outputs

    def preview(self, spec: StackSpec, on_event: OnEvent | None = None) -> PreviewResult:
        """A real preview: the change summary and the planned steps."""
        steps: list[dict[str, str]] = []

        def collect(event: Any) -> None:
            pre = getattr(event, "resource_pre_event", None)
            if pre is not None:
                meta = pre.metadata
                steps.append(
                    {"op": str(getattr(meta.op, "value", meta.op)), "urn": meta.urn, "type": meta.type}
                )
            if on_event:
                on_event(event)

        self._outputs.pop((spec.project, spec.stack), None)
        with self._translated(spec):
            existed = self._existing(spec) is not None
            stack = self._stack(spec)
            try:
                result = stack.preview(on_event=collect, color="never")
            finally:
                # a stack the preview made is removed again (it has no resources): left behind, its
                # config's record would count as a deployed workload in the environment's next `up`,
                # `down` or `preview` (infra/lifecycle/environment.py reads a record from the config
                # when there is no output, for a first `up` that failed before saving one)
                if not existed:
                    stack.workspace.remove_stack(spec.stack)
            changes = {
                str(getattr(op, "value", op)): int(n) for op, n in (result.change_summary or {}).items()
            }
            return PreviewResult(changes=changes, steps=steps)

    def destroy(self, spec: StackSpec, on_event: OnEvent | None = None, *, remove: bool = False) -> bool:
        """Destroy the stack's resources (and optionally remove the stack). False when it did not exist."""
        from pulumi.automation.errors import StackNotFoundError

        self._outputs.pop((spec.project, spec.stack), None)
        with self._translated(spec):
            try:
                stack = self._stack(spec, create=False)
            except StackNotFoundError:
                return False
            stack.destroy(on_event=on_event, color="never")
            if remove:
                stack.workspace.remove_stack(spec.stack)
            return True

    def outputs(self, spec: StackSpec) -> dict[str, Any] | None:
        """The stack's outputs as plain values, or None when the stack does not exist (read once per
        command unless an up or destroy of that stack ran since)."""
        from pulumi.automation.errors import StackNotFoundError

        key = (spec.project, spec.stack)
        if key in self._outputs:
            return copy.deepcopy(self._outputs[key])
        with self._translated(spec):
            try:
                stack = self._stack(StackSpec(spec.project, spec.stack), create=False)
            except StackNotFoundError:
                found = None
            else:
                found = {name: value.value for name, value in stack.outputs().items()}
        self._outputs[key] = copy.deepcopy(found)
        return found

    def config(self, spec: StackSpec) -> dict[str, str]:
        """The stack's config as plain values (empty when the stack does not exist)."""
        with self._translated(spec):
            stack = self._existing(spec)
            if stack is None:
                return {}
            return {key: str(value.value) for key, value in stack.get_all_config().items()}

    def state_resources(self, spec: StackSpec) -> list[dict[str, Any]]:
        """The resources in the stack's saved state (`pulumi stack export`); [] when it does not exist."""
        with self._translated(spec):
            stack = self._existing(spec)
            if stack is None:
                return []
            deployment = stack.export_stack().deployment or {}
            return list(deployment.get("resources") or [])

    def _existing(self, spec: StackSpec) -> Any:
        """The stack when it exists, else None (call inside `_translated`)."""
        from pulumi.automation.errors import StackNotFoundError

        try:
            return self._stack(StackSpec(spec.project, spec.stack), create=False)
        except StackNotFoundError:
            return None

    def list_stacks(self) -> list[StackInfo]:
        """Every stack of every llmctl project in the backend."""
        from pulumi import automation as auto

        spec = StackSpec(PLATFORM_PROJECT, "-")
        with self._translated(spec):
            workspace = auto.LocalWorkspace(**self._workspace_options(spec).__dict__)
            found = []
            for summary in workspace.list_stacks(include_all=True):
                parts = summary.name.split("/")
                project = parts[-2] if len(parts) >= 2 else PLATFORM_PROJECT
                found.append(
                    StackInfo(
                        project=project,
                        stack=parts[-1],
                        last_update=summary.last_update,
                        resource_count=summary.resource_count,
                        update_in_progress=bool(summary.update_in_progress),
                    )
                )
            return [info for info in found if info.project.startswith("llmctl-")]
