"""The `local` target: a CPU blueprint served on this machine by Ray Serve. The work is done by
:mod:`llmctl.serving.client.local`; this wraps it in the target interface."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmctl.errors import Declined
from llmctl.infra.names import TARGET_SUMMARIES
from llmctl.infra.targets.base import (
    Confirm,
    Connection,
    DownRequest,
    OwnFlags,
    Target,
    UpRequest,
    needs_table,
    nothing_deployed,
)

if TYPE_CHECKING:
    from llmctl.infra.lifecycle.drift_notes import DriftReader
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.lifecycle.reports import UpResult
    from llmctl.state import Endpoint


@dataclass
class StopResult:
    """`down --target local`: the blueprints whose local server was stopped."""

    stack: str
    stopped: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"stack": self.stack, "stopped": self.stopped}

    def lines(self) -> list[str]:
        return [f"stopped: {', '.join(self.stopped)}"]

    def check(self) -> None:
        """Nothing can be left behind: stopping is verified process by process."""


class LocalTarget(Target):
    name = "local"
    summary = TARGET_SUMMARIES["local"]
    needs = needs_table(
        up={"ray"},
        down=(),
        status=(),
        connect=(),
    )
    own_flags = (
        OwnFlags(
            ("model", "port"),
            "--model and --port apply to --target local only",
            "on a cluster, set model.id (and serving.port) in a copy of the blueprint and pass its path",
        ),
    )

    def up(
        self, request: UpRequest, progress: Progress, confirm: Confirm, *, drift: DriftReader | None = None
    ) -> UpResult:
        """Start the local server (`drift` is not read: no platform here)."""
        from llmctl.blueprints.catalog import load_blueprint  # lazy: off the CLI start-up path
        from llmctl.infra.lifecycle.reports import UpResult  # lazy: off the CLI start-up path
        from llmctl.serving.client.local import start_local  # lazy: off the CLI start-up path

        self.check_offline(request)
        self.preflight("up")
        with progress.phase("local", resources=False):
            endpoint = start_local(
                load_blueprint(request.blueprint),
                stack=request.stack,
                model=request.model,
                port=request.port,
                on_progress=progress.wait,
                timeout_s=request.wait_timeout_s,
            )
        return UpResult(endpoint, None, progress.timeline)

    def down(
        self, request: DownRequest, progress: Progress, confirm: Confirm, *, drift: DriftReader | None = None
    ) -> StopResult:
        from llmctl.serving.client.local import stop_local  # lazy: off the CLI start-up path

        self.preflight("down")
        from llmctl.serving.client.local import local_status  # lazy: off the CLI start-up path

        recorded = [row["blueprint"] for row in local_status(request.stack)]
        names = [request.blueprint] if request.blueprint else recorded
        if not recorded or (request.blueprint and request.blueprint not in recorded):
            # the one rule of `down` on every target: nothing to take down is "not deployed" (exit 8),
            # said before any confirmation (docs/getting-started.md, "Taking it down")
            raise nothing_deployed(request.stack, request.blueprint)
        what = f"local serving of {', '.join(names)} in stack {request.stack}"
        if not confirm("Stop?", [what]):
            raise Declined("nothing was changed", None)
        return StopResult(request.stack, stop_local(stack=request.stack, blueprint=request.blueprint))

    def status_sections(self, stack: str, engine: Any = None, blueprint: str | None = None) -> dict[str, Any]:
        from llmctl.serving.client.local import local_status  # lazy: off the CLI start-up path

        # No pods here: a local start has no node, image or compile phases to show.
        return {"local": local_status(stack=stack)}

    def status(
        self, stack: str, *, backend: str | None = None, blueprint: str | None = None
    ) -> dict[str, Any]:
        self.preflight("status")
        return self.status_data(stack)

    def connect(self, endpoint: Endpoint, port: int) -> Connection:
        return Connection(lines=[f"local target: already at {endpoint.base_url}"])
