"""Running a serving container's install script on this machine, as the image would: `python` first on
PATH as the image's `python3`, and every package index pointed at a closed port (a step that reaches an
index fails). Shared by the wheelhouse tests (tests/serving/test_wheelhouse.py) and the wheels a lock
leaves out (tests/lifecycle/test_outside_wheels.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

CLOSED = "http://127.0.0.1:9/simple"


def run_as_image(script: str, python: Path, tmp: Path, check: str) -> subprocess.CompletedProcess[str]:
    """Run `script`, then the shell `check`, with `python` as the image's `python3` and no index."""
    bin_dir = tmp / "image-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp),
        "PIP_INDEX_URL": CLOSED,
        "PIP_EXTRA_INDEX_URL": CLOSED,
        "PIP_CONFIG_FILE": os.devnull,
    }
    return subprocess.run(
        ["/bin/bash", "-c", f"{script} && {check}"], env=env, capture_output=True, text=True, timeout=300
    )
