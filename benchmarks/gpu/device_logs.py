"""What the run reads back from the servers' logs: our replica hooks' phase lines, what NCCL and vLLM's
all-reduce said at start, vLLM's compile lines and the fast path's lines (each a results record)."""

from __future__ import annotations

import glob
import os
import re
import subprocess

from device_base import (
    LOGS,
    PHASE_MARK,
    RAY_SLOT,
    record,
)


def phases(names: list[str]) -> None:
    """Our replica hooks' phase lines (serving/phases.py) from each Ray cluster's logs."""
    for name in names:
        if not name.startswith("ray"):
            continue
        temp = f"/tmp/r{RAY_SLOT[name.removesuffix('b')]}"  # a variant (ray1b) runs on its cluster
        lines: list[str] = []
        for path in glob.glob(f"{temp}/session_latest/logs/**/*", recursive=True):
            if os.path.isfile(path):
                with open(path, errors="replace") as log:
                    lines += [line.strip() for line in log if PHASE_MARK in line]
        record("phase_lines", name=name, lines=lines[:40])
        nccl_lines(name, glob.glob(f"{temp}/session_latest/logs/*"))


# what NCCL and vLLM's all-reduce said at start: the version, NVLS (multicast) off, the channels, and
# which all-reduce vLLM picked (its custom one, FlashInfer's backend, symmetric memory)
NCCL_MARKS = ("NVLS", "comm ", "Channel 00", "version")
ALLREDUCE_MARKS = ("allreduce", "all_reduce", "all-reduce", "symm_mem")  # symm_mem.py logs SymmMem...


def nccl_lines(name: str, paths: list[str]) -> None:
    nccl: list[str] = []
    allreduce: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            with open(path, errors="replace") as log:
                for line in log:
                    if "NCCL INFO" in line and any(mark in line for mark in NCCL_MARKS):
                        nccl.append(line.strip())
                    elif "NCCL INFO" not in line and any(mark in line.lower() for mark in ALLREDUCE_MARKS):
                        allreduce.append(line.strip()[-300:])
    if nccl:
        record("nccl", name=name, lines=nccl[:30])
    if allreduce:
        record("allreduce", name=name, lines=list(dict.fromkeys(allreduce))[:20])


COMPILE_LINES = re.compile(
    r"torch.compile takes|Compiling a graph|load the compiled graph|Directly load|compile range|"
    r"Graph capturing finished|init engine|Loading weights took|Model loading took|cache directory"
)


def engine_lines(name: str) -> list[str]:
    path = LOGS / f"{name}.log"
    if not path.exists():
        return []
    return [
        line.strip()[-300:]
        for line in path.read_text(errors="replace").splitlines()
        if COMPILE_LINES.search(line)
    ]


# what Ray logs when the fast path is on (the 2026-11-28 probe, shared/gpu/2026-11-28/README.md), and
# the default path's Serve proxy and OpenAiIngress (absent on the fast path)
FAST_MARKS = (
    "Direct streaming enabled",
    "HAProxy is enabled",
    "Throughput optimized",
    "HAProxy started successfully",
    "HAProxy crashed",
    "Cannot raise FD limit",
    "HTTPOptions.host",
)


def fast_lines(name: str) -> None:
    """The fast path's log lines from the cluster's session logs and the driver's log, which Ray
    replicas and proxies the cluster runs (by their log files' names), and the haproxy processes."""
    temp = f"/tmp/r{RAY_SLOT[name]}/session_latest/logs"
    lines: list[str] = []
    paths = [p for p in glob.glob(f"{temp}/**/*", recursive=True) if os.path.isfile(p)]
    for path in [*paths, str(LOGS / f"{name}.log")]:
        if os.path.isfile(path):
            with open(path, errors="replace") as log:
                lines += [line.strip()[-300:] for line in log if any(m in line for m in FAST_MARKS)]
    actors = sorted(
        {
            re.sub(r"_[0-9a-f]{8,}.*$|[-_][0-9]+\.(log|out|err)$", "", os.path.basename(p))
            for p in paths
            if "/serve/" in p or os.path.basename(p).startswith(("replica_", "proxy_"))
        }
    )
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    record(
        "fast_lines",
        name=name,
        lines=list(dict.fromkeys(lines))[:30],
        serve_logs=actors[:40],
        haproxy=[
            line.strip()[:300] for line in ps.splitlines() if "haproxy" in line and "ps -eo" not in line
        ],
    )
