"""A serving pod's preStop hook: ``python -m llmctl.serving.drain --grace SECONDS``.

Creates the drain marker (``$LLMCTL_DRAIN_FILE``, which the workload sets on Ray pods). Every
replica of the shared app in the pod watches it: it turns ``/healthz`` to 503, refuses new requests
with 503 and ``Retry-After``, lets in-flight requests finish and ends what is left with an error
event when its grace period runs out, then writes ``<marker>.idle``. The hook returns when that
file appears or after ``--grace`` seconds (a pod without replicas, such as the Ray head, just
waits ``--min-wait`` seconds so load balancers stop sending first). The kubelet sends SIGTERM
after the hook returns, within ``terminationGracePeriodSeconds``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from llmctl.serving.common.overload import DRAIN_FILE_ENV

DEFAULT_FILE = "/tmp/llmctl-drain"


def drain(marker: Path, grace_s: float, min_wait_s: float, poll_s: float = 0.5) -> bool:
    """Create ``marker`` and wait for ``marker.idle`` (True) or the grace period (False)."""
    started = time.monotonic()
    idle = marker.with_name(marker.name + ".idle")
    idle.unlink(missing_ok=True)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(time.time()))
    drained = False
    while time.monotonic() - started < grace_s:
        if idle.exists():
            drained = True
            break
        time.sleep(poll_s)
    rest = min_wait_s - (time.monotonic() - started)
    if rest > 0:
        time.sleep(rest)
    return drained


def main(argv: list[str] | None = None) -> int:
    """Entry point of the preStop hook; always exits 0 (the pod is stopping either way)."""
    parser = argparse.ArgumentParser(prog="python -m llmctl.serving.drain", description=__doc__)
    parser.add_argument("--grace", type=float, required=True, help="the longest wait for the replicas (s)")
    parser.add_argument("--min-wait", type=float, default=0.0, help="wait at least this long (s)")
    parser.add_argument("--file", default=os.environ.get(DRAIN_FILE_ENV) or DEFAULT_FILE)
    args = parser.parse_args(argv)
    drained = drain(Path(args.file), args.grace, args.min_wait)
    print(f"llmctl drain: {'replicas idle' if drained else 'grace period over'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
