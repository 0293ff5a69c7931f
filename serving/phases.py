"""One structured log line per start phase of a serving replica, read back by ``llmctl``'s timeline.

A line is ``LLMCTL_PHASE {"at": <unix seconds>, "phase": ..., "status": ..., ...}``: the fixed
prefix, then compact JSON. Phases, in start order: ``weights`` (download or mirror sync),
``compile`` (neuronx-cc, or a cache hit), ``engine`` (loaded onto the device) and ``healthy`` (the
first health check that passed). Statuses: ``start``, ``done``, ``hit`` (compile cache) and
``failed``. :mod:`llmctl.infra.lifecycle.timeline` pairs them with pod and node events.

Each line goes to stdout and, when ``$LLMCTL_PHASE_LOG`` names a file, is appended there too: Ray
sends actor output to files under ``/tmp/ray``, so the workload points Ray pods at
``/proc/1/fd/1`` (the container's own stdout) to make the lines reach ``kubectl logs``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

PHASE_PREFIX = "LLMCTL_PHASE "
PHASE_LOG_ENV = "LLMCTL_PHASE_LOG"
PHASES = ("weights", "compile", "engine", "healthy")
STATUSES = ("start", "done", "hit", "failed")


def phase_line(phase: str, status: str, *, at: float | None = None, **detail: Any) -> str:
    """The log line of one phase event (``detail``: JSON-able extras such as ``source``)."""
    if phase not in PHASES or status not in STATUSES:
        raise ValueError(f"unknown phase event {phase}/{status}")
    record = {"at": round(time.time() if at is None else at, 3), "phase": phase, "status": status, **detail}
    return PHASE_PREFIX + json.dumps(record, sort_keys=True, separators=(",", ":"))


def log_phase(phase: str, status: str, **detail: Any) -> str:
    """Print the phase line (stdout, and ``$LLMCTL_PHASE_LOG`` when set); returns it."""
    line = phase_line(phase, status, **detail)
    print(line, file=sys.stdout, flush=True)
    target = os.environ.get(PHASE_LOG_ENV, "").strip()
    if target:
        try:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError:
            pass  # a log line must never stop a replica from starting
    return line


def parse_phase_line(line: str) -> dict[str, Any] | None:
    """The record of a phase line (anywhere in ``line``, after e.g. a Ray log prefix), else None."""
    index = line.find(PHASE_PREFIX)
    if index < 0:
        return None
    try:
        record = json.loads(line[index + len(PHASE_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("phase") not in PHASES:
        return None
    if record.get("status") not in STATUSES or not isinstance(record.get("at"), int | float):
        return None
    return record
