"""The stand-in commands' warm parent (standin_engine/forkserver.py) imports, before it forks, what a
child would otherwise import lazily from two threads at once: a `pulumi up` child hung on 2026-11-28
with its event-stream thread and its program-call thread both inside `grpc.insecure_channel`'s first
import of `grpc._channel` (one holding that module's import lock while waiting for logging's lock)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_the_parent_has_imported_the_modules_a_child_would_import_from_two_threads() -> None:
    probe = (
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from standin_engine import forkserver\n"
        "forkserver.preload()\n"
        "print(','.join(m for m in forkserver.LAZY if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().split(",") == [
        "grpc._channel",
        "grpc.experimental",
        "pulumi.runtime.proto.events_pb2_grpc",
    ]
    # grpc.insecure_channel imports grpc._channel on its first call: the module the hang was in
    source = Path(__import__("grpc").__file__).read_text()
    assert "from grpc import _channel" in source
