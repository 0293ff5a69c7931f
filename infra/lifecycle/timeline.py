"""The start timeline of each serving pod: where the minutes of a (cold or warm) start went.

Read from what the cluster recorded, never measured by llmctl itself:

- node: the Karpenter NodeClaim of the pod's node, from its creation to its ``Ready`` condition
  (``existing`` when the node was there before the pod);
- image: the pod's ``Pulling`` / ``Pulled`` events (the kubelet's own pull time from the message;
  ``cached`` when the image was already on the node; ``failed`` on a failed pull);
- weights, compile, engine, healthy: the serving app's phase lines (``LLMCTL_PHASE {...}``, see
  :mod:`llmctl.serving.phases`) in the pod's log; ``compile: cache hit`` when the compiled
  artifacts were restored instead of compiled. Without a ``healthy`` line the pod's ``Ready``
  condition stands in.

:func:`build_timeline` works on plain kubectl JSON and log text (tested on recorded sequences);
:func:`start_timelines` fetches them with kubectl. Kubernetes keeps events for about an hour, so
an older start shows ``unknown`` node and image phases.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from llmctl.errors import ServingError
from llmctl.infra.lifecycle.kube import kubectl_json, kubectl_text
from llmctl.infra.lifecycle.progress import fmt_duration
from llmctl.serving.phases import parse_phase_line

PHASE_ORDER = ("node", "image", "weights", "compile", "engine", "healthy")
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|µs|us|ns)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Phase:
    """One phase of a start: its name, what happened (``status``) and how long it took."""

    name: str
    status: str
    seconds: float | None = None
    detail: str = ""


@dataclass
class StartTimeline:
    """The phases of one pod's start, and the time from the first to the last."""

    pod: str
    node: str | None
    phases: list[Phase] = field(default_factory=list)
    total_seconds: float | None = None

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for item in data["phases"]:
            if item["seconds"] is not None:
                item["seconds"] = round(item["seconds"], 1)
        if self.total_seconds is not None:
            data["total_seconds"] = round(self.total_seconds, 1)
        return data

    def render(self) -> str:
        total = fmt_duration(self.total_seconds) if self.total_seconds is not None else "not ready"
        rows = [f"{self.pod} on {self.node or 'no node yet'} (total {total})"]
        for p in self.phases:
            took = fmt_duration(p.seconds) if p.seconds is not None else "-"
            rows.append(f"  {p.name + ':':<9}{p.status:<11}{took:>8}" + (f"  {p.detail}" if p.detail else ""))
        return "\n".join(rows)


def parse_time(value: Any) -> float | None:
    """Unix seconds of a Kubernetes timestamp (RFC 3339, with or without fractions), else None."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def go_duration(text: str) -> float | None:
    """Seconds of a Go duration such as ``1m41.234s`` or ``512ms``, else None."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _event_time(event: dict[str, Any], first: bool = True) -> float | None:
    keys = ("firstTimestamp", "eventTime", "lastTimestamp") if first else ("lastTimestamp", "eventTime")
    return next((t for t in (parse_time(event.get(k)) for k in keys) if t is not None), None)


def _ready_at(obj: dict[str, Any]) -> float | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def _node_phase(
    pod: dict[str, Any], nodeclaims: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> tuple[Phase, float | None]:
    """The node phase, and when the start began (NodeClaim creation for a launched node)."""
    created = parse_time(pod.get("metadata", {}).get("creationTimestamp"))
    node_name = pod.get("spec", {}).get("nodeName")
    if not node_name:
        return Phase("node", "pending", detail="waiting for a node"), created
    claim = next((c for c in nodeclaims if c.get("status", {}).get("nodeName") == node_name), None)
    node = next((n for n in nodes if n.get("metadata", {}).get("name") == node_name), None)
    source = claim or node
    if source is None:
        return Phase("node", "unknown", detail=node_name), created
    born = parse_time(source.get("metadata", {}).get("creationTimestamp"))
    ready = _ready_at(claim) if claim is not None else None
    ready = ready if ready is not None else (_ready_at(node) if node is not None else None)
    if born is None or created is None or born < created:
        return Phase("node", "existing", 0.0, detail=node_name), created
    if ready is None:
        return Phase("node", "launching", detail="NodeClaim created, node not Ready"), born
    kind = "NodeClaim" if claim is not None else "node"
    return Phase("node", "launched", ready - born, detail=f"{kind} created -> Ready"), born


def _image_phase(name: str, events: list[dict[str, Any]], known: bool) -> Phase:
    mine = [
        e
        for e in events
        if e.get("involvedObject", {}).get("kind") == "Pod"
        and e.get("involvedObject", {}).get("name") == name
    ]
    mine.sort(key=lambda e: _event_time(e) or 0.0)
    pulling = [e for e in mine if e.get("reason") == "Pulling"]
    pulled = [e for e in mine if e.get("reason") == "Pulled"]
    failed = [
        e
        for e in mine
        if e.get("reason") in ("Failed", "ErrImagePull", "BackOff")
        and "pull" in str(e.get("message", "")).lower()
    ]
    last_ok = max((_event_time(e, first=False) or 0.0 for e in pulled), default=None)
    last_bad = max((_event_time(e, first=False) or 0.0 for e in failed), default=None)
    if last_bad is not None and (last_ok is None or last_bad >= last_ok):
        start = _event_time(pulling[0]) if pulling else None
        first_bad = min(_event_time(e) or last_bad for e in failed)
        took = first_bad - start if start is not None else None
        message = next((str(e.get("message", "")) for e in failed if e.get("reason") != "BackOff"), "")
        return Phase("image", "failed", took, detail=(message or str(failed[-1].get("message", "")))[:400])
    if pulled:
        message = str(pulled[-1].get("message", ""))
        if "already present" in message:
            return Phase("image", "cached", 0.0, detail="already on the node")
        match = re.search(r" in (\S+?)(?: \(|\.?$)", message)
        took = go_duration(match.group(1)) if match else None
        if took is None and pulling:
            start, end = _event_time(pulling[0]), _event_time(pulled[-1], first=False)
            took = end - start if start is not None and end is not None else None
        return Phase("image", "pulled", took)
    if pulling:
        return Phase("image", "pulling")
    return Phase("image", "unknown" if known else "pending", detail="no pull events (expired after ~1h)")


def _records(log_text: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The last record of each (phase, status) in the log (a restarted replica logs again)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for line in log_text.splitlines():
        record = parse_phase_line(line)
        if record is not None:
            found[(record["phase"], record["status"])] = record
    return found


def _at(records: dict[tuple[str, str], dict[str, Any]], phase: str, status: str) -> float | None:
    record = records.get((phase, status))
    return float(record["at"]) if record is not None else None


def _app_phases(
    records: dict[tuple[str, str], dict[str, Any]], ready: float | None, running: bool
) -> list[Phase]:
    phases: list[Phase] = []
    w_start, w_done = _at(records, "weights", "start"), _at(records, "weights", "done")
    source = str((records.get(("weights", "start")) or {}).get("source", ""))
    kind = "mirror" if source.startswith("s3://") else ("local" if source.startswith("/") else "downloaded")
    if w_done is not None:
        took = w_done - w_start if w_start is not None else None
        phases.append(Phase("weights", kind, took, detail=source))
    else:
        phases.append(Phase("weights", "running" if w_start is not None else "pending", detail=source))
    mark = w_done
    c_start, c_done = _at(records, "compile", "start"), _at(records, "compile", "done")
    c_hit, c_failed = _at(records, "compile", "hit"), _at(records, "compile", "failed")
    hit = records.get(("compile", "hit")) or {}
    if c_hit is not None and (c_start is None or c_hit >= c_start):
        took = c_hit - mark if mark is not None else None
        phases.append(Phase("compile", "cache hit", took, detail=f"from {hit.get('source', '?')}"))
        mark = c_hit
    elif c_failed is not None:
        phases.append(Phase("compile", "failed", c_failed - c_start if c_start is not None else None))
    elif c_done is not None:
        took = c_done - c_start if c_start is not None else None
        record = records.get(("compile", "done")) or {}
        phases.append(
            Phase("compile", "compiled", took, detail="published" if record.get("published") else "")
        )
        mark = c_done
    elif c_start is not None:
        phases.append(Phase("compile", "running"))
    elif _at(records, "engine", "done") is not None:
        phases.append(Phase("compile", "none", detail="this engine does not compile"))
    else:
        phases.append(Phase("compile", "pending"))
    e_done, e_failed = _at(records, "engine", "done"), _at(records, "engine", "failed")
    if e_done is not None:
        phases.append(Phase("engine", "loaded", e_done - mark if mark is not None else None))
        mark = e_done
    elif e_failed is not None:
        phases.append(Phase("engine", "failed", e_failed - mark if mark is not None else None))
    else:
        compiled = phases[-1].status in ("cache hit", "compiled", "none")
        phases.append(Phase("engine", "loading" if running and compiled else "pending"))
    healthy = _at(records, "healthy", "done")
    healthy = healthy if healthy is not None else ready
    if healthy is not None:
        phases.append(Phase("healthy", "healthy", healthy - mark if mark is not None else None))
    else:
        phases.append(Phase("healthy", "pending"))
    return phases


def build_timeline(
    pod: dict[str, Any],
    events: list[dict[str, Any]],
    nodeclaims: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    log_text: str,
) -> StartTimeline:
    """The timeline of one pod from recorded kubectl JSON and its log."""
    name = str(pod.get("metadata", {}).get("name", "?"))
    node, began = _node_phase(pod, nodeclaims, nodes)
    scheduled = node.status not in ("pending",)
    image = _image_phase(name, events, known=scheduled)
    ready = _ready_at(pod)
    running = any(
        "running" in cs.get("state", {}) for cs in pod.get("status", {}).get("containerStatuses", [])
    )
    records = _records(log_text)
    phases = [node, image, *_app_phases(records, ready, running)]
    if image.status == "failed":
        phases = [node, image, *(Phase(p.name, "pending") for p in phases[2:])]
    end = _at(records, "healthy", "done")
    end = end if end is not None else ready
    total = end - began if end is not None and began is not None and image.status != "failed" else None
    return StartTimeline(
        pod=name, node=pod.get("spec", {}).get("nodeName"), phases=phases, total_seconds=total
    )


def serving_pods(pods: list[dict[str, Any]], logs: dict[str, str]) -> list[dict[str, Any]]:
    """The pods whose start is worth a timeline: those that logged phases, and those not Ready
    (a failed pull logs nothing); Jobs that finished are left out."""
    chosen = []
    for pod in pods:
        name = pod.get("metadata", {}).get("name", "")
        if pod.get("status", {}).get("phase") == "Succeeded":
            continue
        if _records(logs.get(name, "")) or _ready_at(pod) is None:
            chosen.append(pod)
    return chosen


def start_timelines(kubeconfig: Path | str | None, namespace: str) -> list[StartTimeline]:
    """The timelines of the namespace's serving pods, fetched with kubectl."""

    pods = kubectl_json(kubeconfig, "get", "pods", "-n", namespace).get("items", [])
    events = kubectl_json(kubeconfig, "get", "events", "-n", namespace).get("items", [])
    try:
        nodeclaims = kubectl_json(kubeconfig, "get", "nodeclaims.karpenter.sh").get("items", [])
    except ServingError:
        nodeclaims = []  # an existing cluster without Karpenter: the Node objects stand in
    nodes = kubectl_json(kubeconfig, "get", "nodes").get("items", [])
    logs: dict[str, str] = {}
    for pod in pods:
        name = pod.get("metadata", {}).get("name", "")
        try:
            logs[name] = kubectl_text(kubeconfig, "logs", "-n", namespace, name, "--all-containers=true")
        except ServingError:
            logs[name] = ""  # a container that never started has no log
    return [
        build_timeline(p, events, nodeclaims, nodes, logs.get(p["metadata"]["name"], ""))
        for p in serving_pods(pods, logs)
    ]


def render_all(timelines: list[StartTimeline]) -> str:
    """Every pod's timeline, or a line saying there is none."""
    if not timelines:
        return "  no serving pod has logged a start yet"
    return "\n".join("  " + line for t in timelines for line in t.render().splitlines())


def render_start_status(starts: dict[str, Any]) -> str:
    """`llmctl status --blueprint`'s section: the pods' timelines (as data) or why there are none."""
    head = f"start of {starts.get('blueprint')}'s serving pods"
    if starts.get("error"):
        return f"{head}: {starts['error']}"
    timelines = [
        StartTimeline(
            pod=p["pod"],
            node=p["node"],
            phases=[Phase(**phase) for phase in p["phases"]],
            total_seconds=p["total_seconds"],
        )
        for p in starts.get("pods", [])
    ]
    return f"{head}:\n" + render_all(timelines)
