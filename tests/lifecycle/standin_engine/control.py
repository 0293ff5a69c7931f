"""Faults and records: the stand-in reads $STANDIN_PULUMI_DIR/control.json and appends to its logs.

control.json keys (all optional):
  version: "3.210.0"          what `pulumi version` prints;  version_fails: true -> it exits 1
  fail: {name: message}        the step of the resource with that logical name fails
  hang_on: name | "*"          hang (until SIGINT) when that resource registers ("*": before the program runs)
  crash_on: name               the process dies while creating that resource (pending operation, lock left)
  no_summary: true             no summary event (as a broken CLI would)
  no_plugin / no_credentials: [project]   the provider errors the real CLI prints
  race_init: true              another run creates the stack between `stack select` and `stack init`
  gone: [name]                 `refresh` finds these resources deleted out of band
  offerings: {instance_type: [zone names]}   the EC2 offerings invoke's answer (default: every zone)
  kube_unreachable: true       the API server does not answer (kube_faults.py, the stand-in kubectl)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def root() -> Path:
    return Path(os.environ["STANDIN_PULUMI_DIR"])


def control() -> dict[str, Any]:
    path = root() / "control.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def append(log: str, entry: dict[str, Any]) -> None:
    with open(root() / log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
