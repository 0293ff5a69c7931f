"""Program runs the stand-in has already answered, replayed instead of run again.

A scenario's `up` runs three programs (platform preview, platform, workload) and most lifecycle tests
start with the same `up` of the same blueprint from an empty state: the same project, stack, config,
checkpoint and faults give the same registrations, outputs and events every time. The engine fixture
points $STANDIN_MEMO_DIR at one folder per test run; a run whose inputs were seen before replays the
recorded result (its events again, in order, with new sequence numbers and times) instead of calling
the program. The first run of each shape still runs the real program; a test whose subject is the
program itself, or that changes program code inside the test process (a monkeypatch the stand-in
cannot see), asks for `fresh_programs`.

The key holds operation, project, stack, config, the checkpoint's resources and outputs,
control.json, and $STANDIN_MEMO_PROGRAM: a digest the engine fixture makes in the test process of
what the program closes over (llmctl's programs are closures over their platform or workload config;
the stack config holds only part of it). Without that digest nothing is replayed. Runs with a fault (fail, hang, crash), a program error or a
cancel are never recorded. Names the provider makes unique at create time (`unique_name`) are made
anew on each replay, so two creates never share one. $STANDIN_MEMO=verify runs every program and
records any difference from the memo in memo-mismatch.jsonl (how the suite proves the key complete).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from llmctl.infra.plan import offline

FAULTS = ("fail", "hang_on", "crash_on")


def folder() -> Path | None:
    value = os.environ.get("STANDIN_MEMO_DIR", "")
    return Path(value) if value else None


def key(
    kind: str,
    preview: bool,
    project: str,
    stack: str,
    config: tuple[dict[str, str], list[str]],
    checkpoint: dict[str, Any],
    ctl: dict[str, Any],
) -> str | None:
    """The run's inputs as a hash; None when the run must not be replayed (a fault is set)."""
    if any(ctl.get(fault) for fault in FAULTS) or not os.environ.get("STANDIN_MEMO_PROGRAM"):
        return None
    shape = {
        "kind": kind,
        "preview": preview,
        "project": project,
        "stack": stack,
        "config": config[0],
        "secret_keys": sorted(config[1]),
        "resources": checkpoint.get("resources", []),
        "pending": checkpoint.get("pending_operations", []),
        "outputs": checkpoint.get("outputs", {}),
        "control": ctl,
        # what the program closes over (its config object, token, record), from the test process
        "program": os.environ.get("STANDIN_MEMO_PROGRAM", ""),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()


@contextmanager
def unique_names() -> Iterator[list[tuple[str, str]]]:
    """The (prefix, name) pairs `offline.unique_name` hands out inside the block."""
    made: list[tuple[str, str]] = []
    original = offline.unique_name

    def recording(prefix: str) -> str:
        name = original(prefix)
        made.append((prefix, name))
        return name

    offline.unique_name = recording
    try:
        yield made
    finally:
        offline.unique_name = original


def load(digest: str) -> dict[str, Any] | None:
    base = folder()
    path = base / f"{digest}.json" if base else None
    if path is None or not path.exists():
        return None
    text = path.read_text()
    data: dict[str, Any] = json.loads(text)
    for prefix, name in data["unique"]:  # a create makes a new name every time, as the provider does
        text = text.replace(name, offline.unique_name(prefix))
    fresh: dict[str, Any] = json.loads(text)
    return fresh


def save(digest: str, result: dict[str, Any]) -> None:
    base = folder()
    if base is None:
        return
    base.mkdir(parents=True, exist_ok=True)
    tmp = base / f"{digest}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(result))  # key order kept: resources stay in registration order
    os.replace(tmp, base / f"{digest}.json")  # two workers recording the same run keep one copy


def _count(outcome: str, where: str, digest: str | None) -> None:
    """One line per program run in memo-runs.jsonl: replayed (hit), run and recorded (miss), or run
    because a fault is set (off)."""
    base = folder()
    if base is not None:
        with open(base / "memo-runs.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"outcome": outcome, "run": where, "key": digest}) + "\n")


def verifying() -> bool:
    return os.environ.get("STANDIN_MEMO") == "verify"


_STAMP = re.compile(r"\d{18}[0-9a-f]{8}")


def differences(recorded: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """What differs between a recorded run and a fresh one, unique names and order aside (the SDK
    registers resources concurrently, so two runs of one program register them in different orders)."""

    def plain(data: dict[str, Any]) -> dict[str, Any]:
        text = _STAMP.sub("<unique>", json.dumps({k: v for k, v in data.items() if k != "unique"}))
        loaded: dict[str, Any] = json.loads(text)
        loaded["new"] = {res["urn"]: res for res in loaded["new"]}
        loaded["events"] = sorted(json.dumps(event, sort_keys=True) for event in loaded["events"])
        return loaded

    a, b = plain(recorded), plain(fresh)
    found: dict[str, Any] = {}
    for part in sorted(set(a) | set(b)):
        if a.get(part) == b.get(part):
            continue
        if part == "new":
            found[part] = sorted(u for u in set(a[part]) | set(b[part]) if a[part].get(u) != b[part].get(u))[
                :5
            ]
        elif part == "events":
            found[part] = sorted(set(a[part]) ^ set(b[part]))[:4]
        else:
            found[part] = {"recorded": a.get(part), "fresh": b.get(part)}
    return found


def report_mismatch(digest: str, where: str, parts: dict[str, Any]) -> None:
    base = folder()
    if base is None:
        return
    entry = {"key": digest, "run": where, "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "differs": parts}
    with open(base / "memo-mismatch.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def replay_or_run(
    digest: str | None,
    where: str,
    run: Callable[[], dict[str, Any] | None],
    replay: Callable[[dict[str, Any]], None],
) -> None:
    """Replay the recorded run of `digest`, or run (and record what `run` returns, when it returns
    something: a failed or canceled run returns None)."""
    recorded = load(digest) if digest and folder() else None
    _count("off" if digest is None else "hit" if recorded is not None else "miss", where, digest)
    if recorded is not None and not verifying():
        replay(recorded)
        return
    with unique_names() as made:
        result = run()
    if digest is None or result is None:
        return
    result["unique"] = made
    if recorded is not None:
        parts = differences(recorded, result)
        if parts:
            report_mismatch(digest, where, parts)
        return
    save(digest, result)
