"""Find and end the processes of a local server: its runner, its session and its Ray instance."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """True when ``pid`` runs (and is not a zombie)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    return True


def related(session: int, marker: str | None = None) -> list[int]:
    """PIDs in the session ``session`` or whose command line mentions ``marker`` (Linux /proc)."""
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            sid = int(fields[3])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if sid == session or (marker and marker in cmdline):
            found.append(int(entry.name))
    return found


def kill_tree(
    pid: int,
    *,
    marker: str | None = None,
    sig: int = signal.SIGTERM,
    grace_s: float = 30,
    exit_timeout_s: float = 30,
) -> list[int]:
    """Signal ``pid``, wait up to ``grace_s`` for it, then SIGKILL everything related to it until
    none is left (up to ``exit_timeout_s``); returns the PIDs still alive then (empty: all gone)."""
    if pid > 0 and alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    leftovers = related(pid, marker) if pid > 0 else []
    if pid > 0:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    # Until nothing of the session (or with the marker) is left: processes the first scan missed,
    # or that were starting while it ran, are found and killed on the next rounds.
    deadline = time.monotonic() + exit_timeout_s
    while True:
        for other in leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(other, signal.SIGKILL)
        time.sleep(0.1)
        leftovers = [p for p in related(pid, marker) if alive(p)] if pid > 0 else []
        if not leftovers or time.monotonic() > deadline:
            return leftovers
