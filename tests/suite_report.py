"""`--suite-report FILE`: the suite's wall time, outcome counts and slowest tests as JSON.

`make test` passes it (build/suite.json, outside the tracked tree; `SUITE_REPORT=FILE` for another
file), so the file always says what the last full run on this machine took. Under pytest-xdist only the controller writes it, from the reports the workers
send back (setup, call and teardown durations added up per test).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SLOWEST = 20
SLOWEST_FILES = 25


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--suite-report",
        metavar="FILE",
        default=None,
        help="write the run's wall time, outcomes and slowest tests to FILE (JSON)",
    )


class SuiteReport:
    def __init__(self, path: Path, workers: int) -> None:
        self.path = path
        self.workers = workers
        self.started = time.monotonic()
        self.load_at_start = os.getloadavg()[0]
        self.durations: dict[str, float] = {}
        self.outcomes: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.outcomes[report.outcome] += 1

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        wall = time.monotonic() - self.started
        slowest = sorted(self.durations.items(), key=lambda item: item[1], reverse=True)[:SLOWEST]
        files: dict[str, list[float]] = {}
        groups: dict[str, float] = {}
        for nodeid, seconds in self.durations.items():
            entry = files.setdefault(nodeid.split("::", 1)[0], [0.0, 0.0])
            entry[0] += seconds
            entry[1] += 1
            group = nodeid.rsplit("@", 1)[1] if "@" in nodeid else "(any worker)"
            groups[group] = groups.get(group, 0.0) + seconds
        by_file = sorted(files.items(), key=lambda item: item[1][0], reverse=True)[:SLOWEST_FILES]
        data: dict[str, Any] = {
            "what": "the default suite (make test): wall time and the slowest tests",
            "commit": _commit(session.config.rootpath),
            "wall_s": round(wall, 1),
            "exit_status": int(exitstatus),
            "tests": sum(self.outcomes.values()),
            "outcomes": dict(sorted(self.outcomes.items())),
            "workers": self.workers,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "load_average_1m_at_start": round(self.load_at_start, 2),
                "load_average_1m_at_end": round(os.getloadavg()[0], 2),
            },
            "test_seconds_total": round(sum(self.durations.values()), 1),
            "groups": {
                name: round(seconds, 1) for name, seconds in sorted(groups.items(), key=lambda g: -g[1])
            },
            "slowest": [{"test": nodeid, "seconds": round(seconds, 2)} for nodeid, seconds in slowest],
            "slowest_files": [
                {"file": name, "seconds": round(total, 1), "tests": int(count)}
                for name, (total, count) in by_file
            ],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data, indent=2) + "\n")


def _commit(root: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def pytest_configure(config: pytest.Config) -> None:
    target = config.getoption("--suite-report")
    if not target or hasattr(config, "workerinput"):  # an xdist worker: the controller writes it
        return
    workers = getattr(config.option, "numprocesses", None) or 0
    config.pluginmanager.register(SuiteReport(Path(target), int(workers)), "llmctl-suite-report")
