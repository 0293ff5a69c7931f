"""Progress of a lifecycle run, fed by Pulumi engine events.

Two views share one model: a Rich live view (phase, resources done / total from the preview's
change summary, the current step, elapsed time) and a plain log for CI (`--progress plain`),
one line per event worth reading. A `Timeline` records how long each phase took.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO, cast

from llmctl.errors import BadInput

Mode = Literal["rich", "plain", "quiet"]


@dataclass
class Timeline:
    """Phase name -> seconds, in the order the phases ran."""

    phases: list[tuple[str, float]] = field(default_factory=list)

    def add(self, name: str, seconds: float) -> None:
        self.phases.append((name, seconds))

    def to_dict(self) -> list[dict[str, Any]]:
        return [{"phase": name, "seconds": round(seconds, 1)} for name, seconds in self.phases]

    def render(self) -> str:
        width = max((len(name) for name, _ in self.phases), default=0)
        rows = [f"  {name.ljust(width)}  {fmt_duration(seconds)}" for name, seconds in self.phases]
        total = sum(seconds for _, seconds in self.phases)
        return "\n".join([*rows, f"  {'total'.ljust(width)}  {fmt_duration(total)}"])


def fmt_duration(seconds: float) -> str:
    """'4m 05s' / '12s'."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _short(urn: str) -> str:
    """'urn:pulumi:dev::proj::aws:ec2/vpc:Vpc::main' -> 'aws:ec2/vpc:Vpc main'."""
    parts = urn.split("::")
    return f"{parts[-2].split('$')[-1]} {parts[-1]}" if len(parts) >= 2 else urn


class Progress:
    """Receives engine events (from Pulumi's event thread) and renders them."""

    def __init__(self, mode: Mode = "rich", stream: TextIO | None = None) -> None:
        self.mode: Mode = mode if mode != "rich" or (stream or sys.stderr).isatty() else "plain"
        self.stream = stream or sys.stderr
        self.timeline = Timeline()
        self.phase_name = ""
        self.total = 0
        self.done = 0
        self.failed = 0
        self.current = ""
        self.waiting = ""
        self.counts_resources = True
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._live: Any = None

    # ---- rendering ----------------------------------------------------------------------
    def _line(self, text: str) -> None:
        if self.mode == "quiet":
            return
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _renderable(self) -> Any:
        from rich.markup import escape
        from rich.table import Table

        table = Table.grid(padding=(0, 1))
        elapsed = fmt_duration(time.monotonic() - self.started)
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        counted = f"resources {count}" if self.counts_resources else ""
        table.add_row(f"[bold cyan]{self.phase_name}[/]", counted, f"[dim]{elapsed}[/]")
        if self.waiting:
            # a step's own words ("starting Ray Serve ...") where no resources are counted
            said = f"waiting for {self.waiting}" if self.counts_resources else self.waiting
            table.add_row("", f"[yellow]{escape(said)}[/]", "")
        elif self.current:
            table.add_row("", f"[dim]{self.current}[/]", "")
        return table

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable())

    @contextlib.contextmanager
    def phase(self, name: str, *, total: int = 0, resources: bool = True) -> Iterator[None]:
        """Time a phase; the live view shows it while it runs (`resources`: whether the phase
        creates resources to count; the local target has none)."""
        with self._lock:
            self.phase_name, self.total, self.done, self.failed = name, total, 0, 0
            self.counts_resources = resources
            self.current = self.waiting = ""
            self.started = time.monotonic()
        self._line(f"==> {name}" + (f" ({total} changes planned)" if total else ""))
        if self.mode == "rich":
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                self._renderable(), console=Console(file=self.stream), refresh_per_second=4, transient=True
            )
            self._live.start()
        status = "failed"
        try:
            yield
            status = "done"
        finally:
            if self._live is not None:
                self._live.stop()
                self._live = None
            seconds = time.monotonic() - self.started
            self.timeline.add(name, seconds)
            self._line(f"    {name}: {status} in {fmt_duration(seconds)}")

    def wait(self, what: str) -> None:
        """Say what a long wait is waiting for (model download, compilation, ...)."""
        with self._lock:
            self.waiting = what
        if self.mode == "plain":
            self._line(f"    waiting for {what}" if self.counts_resources else f"    {what}")
        self._refresh()

    def note(self, text: str) -> None:
        """A line that always shows (warnings, notices)."""
        self._line(text)

    # ---- engine events ------------------------------------------------------------------
    def on_event(self, event: Any) -> None:
        """Pulumi engine event callback (called from the Automation API's event thread)."""
        with self._lock:
            line = self._consume(event)
        if (line and self.mode == "plain") or (line and line.startswith(("error", "warning"))):
            self._line(line)
        self._refresh()

    def _consume(self, event: Any) -> str | None:
        pre = getattr(event, "resource_pre_event", None)
        if pre is not None and not pre.planning:
            op = str(getattr(pre.metadata.op, "value", pre.metadata.op))
            if op == "same":
                return None
            self.current = f"{op} {_short(pre.metadata.urn)}"
            return f"    {self.current} ..."
        outputs = getattr(event, "res_outputs_event", None)
        if outputs is not None:
            op = str(getattr(outputs.metadata.op, "value", outputs.metadata.op))
            if op == "same":
                return None
            self.done += 1
            count = f"{self.done}/{self.total}" if self.total else str(self.done)
            return f"    [{count}] {op} {_short(outputs.metadata.urn)} done"
        failed = getattr(event, "res_op_failed_event", None)
        if failed is not None:
            self.failed += 1
            return f"error: {_short(failed.metadata.urn)} failed"
        diag = getattr(event, "diagnostic_event", None)
        if diag is not None and diag.severity in ("error", "warning") and diag.message.strip():
            return f"{diag.severity}: {diag.message.strip()}"
        summary = getattr(event, "summary_event", None)
        if summary is not None:
            changes = ", ".join(
                f"{k} {v}" for k, v in (summary.resource_changes or {}).items() if k != "same"
            )
            return f"    summary: {changes or 'no changes'}"
        return None


def open_progress(mode: str, *, quiet: bool = False) -> Progress:
    """The view `--progress` names (rich or plain); quiet when the command prints JSON."""
    if mode not in ("rich", "plain"):
        raise BadInput(f"unknown --progress {mode!r}", "use rich or plain")
    return Progress("quiet" if quiet else cast(Mode, mode))
