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
    pid: int, *, marker: str | None = None, sig: int = signal.SIGTERM, grace_s: float = 30
) -> list[int]:
    """Signal ``pid``, wait up to ``grace_s`` for it, then SIGKILL everything still related to it."""
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
    for other in leftovers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(other, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in leftovers) and time.monotonic() < deadline:
        time.sleep(0.1)
    return leftovers
