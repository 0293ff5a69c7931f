"""The target interface: the operations every target offers and what each one needs.

A target is where a blueprint runs: an EKS cluster llmctl builds (`eks`), a cluster it is given
(`kubeconfig`) or this machine (`local`). Each implements the same operations (up, down, status,
connect, and preview where it applies; the endpoint `up` records is one state record for all targets,
read by `llmctl endpoint`) and declares per operation what it needs
(:data:`~llmctl.infra.targets.needs.Need`): the preflight checks exactly that. An operation a target
does not offer fails with one clear line. The CLI only ever calls this interface.
"""

from __future__ import annotations

import inspect
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, cast

from llmctl.errors import BadInput, LlmctlError, NotDeployed
from llmctl.infra.names import TARGET_NAMES, TargetName, check_workload, is_workload_stack
from llmctl.infra.platform.regions import check_region_flag
from llmctl.infra.targets.needs import Need, NeedContext, check_needs
from llmctl.state import list_endpoints

if TYPE_CHECKING:
    from llmctl.blueprints.schema import Blueprint
    from llmctl.infra.lifecycle.drift_notes import DriftReader
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.lifecycle.reports import PreviewReport, UpResult
    from llmctl.state import Endpoint

Operation = Literal["up", "down", "preview", "status", "connect"]
# (question, items) -> go ahead?  The CLI answers with `--yes` or a terminal prompt.
Confirm = Callable[[str, list[str]], bool]


def needs_table(**operations: Iterable[Need]) -> Mapping[Operation, frozenset[Need]]:
    """A target's `needs`: operation -> what it needs (read-only)."""
    return MappingProxyType({cast(Operation, op): frozenset(needs) for op, needs in operations.items()})


@dataclass(frozen=True)
class UpRequest:
    """What `llmctl up` (and `preview`) asked for; target-specific fields stay None elsewhere."""

    blueprint: str
    stack: str = "dev"
    region: str | None = None
    backend: str | None = None
    hf_token_file: Path | None = None
    kubeconfig: Path | None = None
    pools: Path | None = None
    model: str | None = None
    port: int | None = None
    wait: bool = True
    wait_timeout_s: float = 3600
    workload: str | None = None  # a named workload of the environment (its own stack and namespace)
    reselect_azs: bool = False  # choose the platform's AZs again (replaces subnets)
    accept_moved_tags: bool = False  # move the stack onto the images its moved tags name now
    replace: bool = False  # this run replaces the serving pods instead of surging (issue 51, "Day two")

    def __post_init__(self) -> None:
        check_names(self.stack, self.workload)


@dataclass(frozen=True)
class DownRequest:
    """What `llmctl down` asked for."""

    stack: str = "dev"
    region: str | None = None
    backend: str | None = None
    blueprint: str | None = None
    all_workloads: bool = False
    keep_platform: bool = False
    workload: str | None = None
    force: bool = False  # destroy with delete-unreachable although the cluster may exist (asked for)

    def __post_init__(self) -> None:
        if (self.blueprint or self.workload) and self.all_workloads:
            raise BadInput("--blueprint/--workload and --all exclude each other", "pass one of them")
        check_names(self.stack, self.workload)


def check_names(stack: str, workload: str | None) -> None:
    """A bad --workload, or a workload stack given as --stack, fails before any preflight or Pulumi call."""

    if is_workload_stack(stack):
        env, _, name = stack.partition(".")
        raise BadInput(
            f"--stack {stack!r} names a workload stack, not an environment",
            f"pass --stack {env} --workload {name}",
        )
    if workload is not None:
        check_workload(workload)


@dataclass(frozen=True)
class OwnFlags:
    """Request fields only one target reads, and the error when another target is given them."""

    fields: tuple[str, ...]
    message: str
    hint: str

    def given(self, request: object) -> bool:
        return any(getattr(request, name, None) for name in self.fields)


class DownReport(Protocol):
    """What `down` returns on any target: JSON, text lines and a final verdict."""

    def to_dict(self) -> dict[str, Any]: ...

    def lines(self) -> list[str]: ...

    def check(self) -> None:
        """Raise when something is left behind."""


@dataclass
class Connection:
    """`llmctl connect`: lines to print and the port-forwards running (none: nothing to wait for)."""

    lines: list[str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def forwarding(self) -> bool:
        return bool(self.procs)

    def run(self, show: Callable[[str], None]) -> None:
        """Show the lines, then (when forwarding) block until the forwards end or Ctrl-C; then stop
        them all. A Ctrl-C at any point after the forwards started is the normal way to stop."""
        try:
            for line in self.lines:
                show(line)
            if self.forwarding:
                show("forwarding; Ctrl-C to stop")
                for proc in self.procs:
                    proc.wait()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()


class Target(ABC):
    """One deployment target. Subclasses declare `name`, `summary` and `needs`."""

    name: ClassVar[TargetName]
    summary: ClassVar[str]  # a few words for `--target`'s help
    # Operation -> what it needs; an operation missing here is not offered by the target.
    needs: ClassVar[Mapping[Operation, frozenset[Need]]]
    own_flags: ClassVar[tuple[OwnFlags, ...]] = ()
    # Whether the target runs workload stacks, so it takes `--workload` (the cluster targets).
    takes_workloads: ClassVar[bool] = False

    def preflight(
        self,
        operation: Operation,
        *,
        region: str | None = None,
        kubeconfig: Path | None = None,
        look_offline: str | None = None,
        instead: str | None = None,
        blueprint: str | None = None,
        hf_token_file: Path | None = None,
    ) -> list[str]:
        """Check what `operation` needs on this target (one error listing everything missing, each
        with its fix; `look_offline`: the command that shows the plan without them; `instead`: the
        command that runs the blueprint on this machine, for one that can)."""
        return check_needs(
            self.needs_for(operation),
            NeedContext(
                region=region, kubeconfig=kubeconfig, blueprint=blueprint, hf_token_file=hf_token_file
            ),
            look_offline=look_offline,
            instead=instead,
        )

    def check_offline(self, request: UpRequest) -> Blueprint:
        """What `up` checks before any prerequisite, with no tool or account: the blueprint loads and
        validates, and a `--region` given is a real region (botocore's list)."""
        from llmctl.blueprints.catalog import (
            load_blueprint,  # lazy: pydantic and YAML, off the CLI start-up path
        )

        blueprint = load_blueprint(request.blueprint)
        if request.region:
            check_region_flag(request.region)
        return blueprint

    def needs_for(self, operation: Operation) -> frozenset[Need]:
        if operation not in self.needs:
            raise self.unsupported(operation)
        return self.needs[operation]

    def unsupported(self, operation: Operation) -> LlmctlError:
        offering = sorted(_targets_offering(operation))
        return LlmctlError(
            f"`llmctl {operation}` does not apply to --target {self.name}",
            f"it applies to --target {' or '.join(offering)}" if offering else None,
        )

    @abstractmethod
    def up(
        self, request: UpRequest, progress: Progress, confirm: Confirm, *, drift: DriftReader | None = None
    ) -> UpResult:
        """Deploy the blueprint and record its endpoint; `drift` reads which running nodes the
        platform change replaces (said before it asks; a target without a platform ignores it)."""

    @abstractmethod
    def down(
        self, request: DownRequest, progress: Progress, confirm: Confirm, *, drift: DriftReader | None = None
    ) -> DownReport:
        """Remove what `up` made on this target (`drift`: as for :meth:`up`, when the platform stays)."""

    @abstractmethod
    def status_sections(self, stack: str, engine: Any = None, blueprint: str | None = None) -> dict[str, Any]:
        """This target's part of `llmctl status --json` (the stack and endpoints are common); with
        ``blueprint``, what it can tell of that blueprint's serving pods' starts."""

    @abstractmethod
    def status(
        self, stack: str, *, backend: str | None = None, blueprint: str | None = None
    ) -> dict[str, Any]:
        """Everything `llmctl status --json` prints for this target."""

    def status_data(self, stack: str, engine: Any = None, blueprint: str | None = None) -> dict[str, Any]:
        """`llmctl status --json`: the common keys (stack, target, endpoints) around this target's
        :meth:`status_sections`."""
        data: dict[str, Any] = {"stack": stack, "target": self.name}
        data.update(self.status_sections(stack, engine, blueprint))
        data["endpoints"] = [asdict(e) for e in list_endpoints(stack)]
        return data

    @abstractmethod
    def connect(self, endpoint: Endpoint, port: int) -> Connection:
        """Reach a recorded endpoint from this machine (`port`: the local port for the serving one)."""

    def preview(self, request: UpRequest, *, drift: DriftReader | None = None) -> PreviewReport:
        """A real preview of the changes `up` would make (where the target has stacks to preview);
        `drift`: as for :meth:`up`."""
        raise self.unsupported("preview")


def _targets_offering(operation: Operation) -> list[str]:
    """The names of the concrete targets (the registry's classes, all subclasses of Target) that
    offer `operation`; read from the classes so this module need not import the registry."""
    found: set[str] = set()
    pending: list[type[Target]] = list(Target.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        concrete = not inspect.isabstract(cls) and getattr(cls, "name", None) in TARGET_NAMES
        if concrete and operation in cls.needs:
            found.add(cls.name)
    return sorted(found)


def nothing_deployed(stack: str, blueprint: str | None) -> NotDeployed:
    """The error for a stack (or a blueprint in it) with no endpoint, local server or Pulumi stack."""
    elsewhere = sorted({e.stack for e in list_endpoints() if blueprint is None or e.blueprint == blueprint})
    what = f"blueprint {blueprint!r} is not" if blueprint else "nothing is"
    hint = (
        f"it is deployed in stack {' and '.join(elsewhere)}: pass --stack"
        if elsewhere
        else f"deploy with `llmctl up --blueprint {blueprint or 'NAME'}` (`--target local` runs on this "
        "machine); state in another backend: pass --backend or set PULUMI_BACKEND_URL"
    )
    return NotDeployed(
        f"{what} deployed in stack {stack!r} (no endpoint, local server or Pulumi stack)", hint
    )
