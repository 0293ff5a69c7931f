"""The cost of waking up beside the saving at zero: the last start timeline of each blueprint and
target, kept in llmctl's state, and the line `plan`, `cost` and `up` print from it for a blueprint
whose scaling allows zero replicas.

`llmctl up` records a start when its readiness wait is over and a serving pod's timeline is complete
(:mod:`llmctl.infra.lifecycle.timeline`, read from what the cluster recorded): the slowest such pod
of that `up`, one file per target and blueprint, ``<state>/starts/<target>/<blueprint>.json``, each
`up` replacing the last. A wake from zero is a replica's start (on a cluster: a node from Karpenter,
the image pull, the weights, the compile or its cache hit, the engine), so the last recorded start
is the cold start to expect. A recorded start that found its node up and the image on it says so:
from zero, the node and the pull come on top.

Only pydantic, llmctl's state and errors and the progress module's duration format are imported
here: `llmctl cost` reads these records without the cluster code (kubectl, Pulumi).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.progress import fmt_duration
from llmctl.state import check_name, state_dir

if TYPE_CHECKING:  # for the annotations only: the module brings kubectl's code with it
    from llmctl.infra.lifecycle.timeline import StartTimeline

# a recorded phase with one of these statuses cost nothing then, and would cost time from zero
_ALREADY_THERE = {"node": "existing", "image": "cached"}


class RecordedPhase(BaseModel):
    """One phase of a recorded start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The phase: node, image, weights, compile, engine or healthy.")
    status: str = Field(description="What happened, e.g. launched, pulled, cached, compiled, cache hit.")
    seconds: float | None = Field(description="How long the phase took; None when the cluster did not say.")
    detail: str = Field("", description="Where from: the node's name, the weights' source, the cache.")


class StartRecord(BaseModel):
    """The last completed start of a blueprint's serving pod on one target."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    blueprint: str = Field(description="The blueprint's name.")
    target: str = Field(description="Where it ran: eks, kubeconfig, ...")
    stack: str = Field(description="The environment (`--stack`) of the `up` that saw the start.")
    workload: str | None = Field(None, description="The named workload (`up --workload`), if any.")
    recorded_at: str = Field(description="When `up` saw the start complete (UTC, ISO 8601).")
    pod: str = Field(description="The pod whose start this is (the slowest of that `up`).")
    node: str | None = Field(description="The node the pod ran on.")
    total_seconds: float = Field(
        description="From the node's (or the pod's) creation to the first healthy answer."
    )
    phases: list[RecordedPhase] = Field(description="The phases in order, as `llmctl status` shows them.")

    def came_warm(self) -> list[str]:
        """The phases this start skipped that a wake from zero pays (its node was up, its image
        on the node)."""
        return [p.name for p in self.phases if _ALREADY_THERE.get(p.name) == p.status]


def _folder() -> Path:
    return state_dir() / "starts"


def _path(target: str, blueprint: str) -> Path:
    return _folder() / check_name("target", target) / f"{check_name('blueprint', blueprint)}.json"


def record_start(
    timelines: Sequence[StartTimeline],
    *,
    blueprint: str,
    target: str,
    stack: str,
    workload: str | None = None,
) -> StartRecord | None:
    """Keep the slowest completed start among `timelines` as the blueprint's last start on `target`
    (atomically); None, and the previous record kept, when no start completed."""
    complete = [t for t in timelines if t.total_seconds is not None]
    if not complete:
        return None
    slowest = max(complete, key=lambda t: t.total_seconds or 0.0)
    record = StartRecord(
        blueprint=blueprint,
        target=target,
        stack=stack,
        workload=workload,
        recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        pod=slowest.pod,
        node=slowest.node,
        total_seconds=round(float(slowest.total_seconds or 0.0), 1),
        phases=[
            RecordedPhase(
                name=p.name,
                status=p.status,
                seconds=None if p.seconds is None else round(p.seconds, 1),
                detail=p.detail,
            )
            for p in slowest.phases
        ],
    )
    path = _path(target, blueprint)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(record.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(path)
    return record


def _read(path: Path) -> StartRecord:
    try:
        return StartRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise LlmctlError(
            f"the start record {path} is damaged ({type(exc).__name__})",
            f"delete {path}; the next `llmctl up` of the blueprint records its start again",
        ) from None


def last_start(blueprint: str, target: str | None = None) -> StartRecord | None:
    """The blueprint's last recorded start on `target`, or on any target (the most recent) when
    `target` is None; None when there is none."""
    check_name("blueprint", blueprint)
    folders = [_folder() / check_name("target", target)] if target else sorted(_folder().glob("*"))
    found = [
        _read(folder / f"{blueprint}.json") for folder in folders if (folder / f"{blueprint}.json").is_file()
    ]
    return max(found, key=lambda r: r.recorded_at, default=None)


def at_zero(blueprint: Any, cost: Any, target: str | None = None) -> dict[str, Any] | None:
    """What scaling the blueprint to zero saves per hour and the cold start a wake is expected to
    take (its last recorded start, see :func:`last_start`); None when its `min_replicas` keeps a
    replica up. `cost` is its :class:`~llmctl.blueprints.pricing.CostReport`."""
    if blueprint.scaling.min_replicas > 0 or cost.zero_saving_hourly_usd is None:
        return None
    record = last_start(blueprint.name, target)
    return {
        "saving_hourly_usd": round(cost.zero_saving_hourly_usd, 4),
        "instance_type": cost.instance_type,
        "cold_start_seconds": record.total_seconds if record else None,
        "came_warm": record.came_warm() if record else [],
        "last_start": record.model_dump() if record else None,
    }


def render_at_zero(zero: dict[str, Any]) -> str:
    """The one line `plan`, `cost` and `up` print: the saving, then the cold start it costs."""
    head = f"at zero replicas: saves ${zero['saving_hourly_usd']:.2f}/h (the {zero['instance_type']} node)"
    start = zero.get("last_start")
    if not start:
        return (
            f"{head}; cold start unknown: no start of this blueprint recorded yet "
            "(`llmctl up` records one when its serving pods are ready)"
        )
    phases = ", ".join(
        p["name"]
        + (f" {p['status']}" if p["status"] != p["name"] else "")
        + (f" {fmt_duration(p['seconds'])}" if p["seconds"] is not None else "")
        for p in start["phases"]
    )
    when = start["recorded_at"].replace("T", " ")[:16] + " UTC"
    line = (
        f"{head}; a wake from zero waits for the cold start: {fmt_duration(start['total_seconds'])} at the "
        f"last start ({start['target']}, stack {start['stack']}, {when}: {phases})"
    )
    if zero["came_warm"]:
        line += (
            f"; that start found its {' and '.join(zero['came_warm'])} already there, "
            "which a wake from zero waits for too"
        )
    return line
