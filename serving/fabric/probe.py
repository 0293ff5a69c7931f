"""The fabric probe: an all-reduce across a replica's nodes, measured as nccl-tests measures it.

Runs in the serving image (torch and NCCL are there) as the preflight Job's program; standard library
and torch only (torch imported where it is used), so the Job ships this one file in a ConfigMap and
this module also imports without torch on the user's machine (the parser uses its formulas).

One launcher per node (the Indexed Job's pod, node rank = ``JOB_COMPLETION_INDEX``) starts one worker
process per GPU; the workers meet at node 0 (``--master``, the pod hostname of index 0 under the
Job's headless Service) through ``torch.distributed``'s TCP rendezvous, then, for every size from
``-b`` to ``-e`` (doubling, float32, sum), run ``-w`` warm-up and ``-n`` timed in-place all_reduce
calls and one checked call. As nccl-tests does (NVIDIA/nccl-tests src/common.cu, a0b82b2,
``deltaSec`` averaged over the ranks; src/all_reduce.cu ``AllReduceGetBw``; doc/PERFORMANCE.md):

    algbw = size / time / 1e9 (GB/s)        busbw = algbw * 2 (n - 1) / n   (n = ranks)

Rank 0 prints nccl-tests' header and rows: `torch.distributed.all_reduce` is in-place only, so the
out-of-place columns are left blank as nccl-tests does for rows it measures in place only
(src/util.cu ``writeBenchMarkLineNullBody``). Then NCCL's transport lines (NCCL_DEBUG=INFO, subsystems
INIT and NET, written by NCCL to ``--work-dir``) and one line ``LLMCTL-FABRIC {json}``.

The same program runs on CPU with the gloo backend (the tests run it so on localhost): only the
backend and the device differ.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, Literal

SUMMARY_PREFIX = "LLMCTL-FABRIC "
TOOL = "llmctl-fabric-probe"
FLOAT_BYTES = 4  # float32, nccl-tests' default type "float"
MIB = 1024 * 1024
#: NCCL's lines that say which transport carried the data (NVIDIA/nccl 5067397 src/init.cc "Using network
#: %s", src/transport/net.cc "... via NET/%s/%d...", p2p.cc "via P2P/...", shm.cc "via SHM/direct",
#: net_socket.cc "NET/Socket : Using"; aws/aws-ofi-nccl 2daf7d3 src/nccl_ofi_net.cpp "NET/OFI Selected
#: provider is %s", older releases "Selected Provider is")
TRANSPORT_LINE = re.compile(
    r"NCCL INFO (Using network |NET/OFI Selected [Pp]rovider|NET/Socket : Using|.* via )"
)
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([^,\s]+)")
_VIA = re.compile(r" via (NET/[^/]+|P2P|SHM|NVLS|CollNet)")
#: aws-ofi-nccl's plugin names (src/nccl_ofi_interface_nvidia.cpp: "Libfabric", or "AWS Libfabric"
#: when NCCL_NET asks for it; the Neuron interface's "AWS Libfabric")
OFI_NETWORKS = ("Libfabric", "AWS Libfabric")
#: libfabric providers that are TCP underneath (FI_PROVIDER=tcp or sockets): no EFA
TCP_PROVIDERS = ("tcp", "sockets")
#: the verdict's thresholds, as shares of one node's network bandwidth (their grounds: docs/fabric.md and
#: llmctl.infra.lifecycle.fabric, which reads the verdict from here)
OK_SHARE = 0.5
FALLBACK_SHARE = 0.1
#: the probe's exit code when it judged the fabric fallen back (or degraded, with --strict): its Job
#: fails, so the objects that depend on it (the model's) are not applied
FAR_BELOW = 3
#: tcp-expected: NCCL used TCP and the image carries no aws-ofi-nccl, so TCP is what it can do (measured,
#: reported, not failed)
Verdict = Literal["ok", "degraded", "fallback", "tcp-expected"]


def bandwidths(size: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of an all-reduce of `size` bytes over `ranks` ranks in `seconds`."""
    algbw = size / 1.0e9 / seconds
    return algbw, algbw * (2 * (ranks - 1) / ranks)


def verdict_of(busbw: float, expected_gbs: float, transport: str, *, efa_expected: bool = True) -> Verdict:
    """ok, degraded or fallback: the bus bandwidth at the largest size (GB/s) against one node's network
    bandwidth (GB/s), and the transport NCCL reported (TCP is a fallback whatever the figure); with an
    image that cannot use EFA (`efa_expected` false), TCP is tcp-expected whatever the figure."""
    if transport == "tcp" and not efa_expected:
        return "tcp-expected"
    share = busbw / expected_gbs
    if transport == "tcp" or share < FALLBACK_SHARE:
        return "fallback"
    return "degraded" if share < OK_SHARE else "ok"


def float_str(value: float, width: int) -> str:
    """A number as nccl-tests prints it in a column of `width` (src/util.cu ``getFloatStr``)."""
    for text in (f"{value:{width}.2f}", f"{value:{width}.1f}", f"{value:{width}.0f}"):
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def row_line(size: int, seconds: float, ranks: int, wrong: int) -> str:
    """One in-place row in nccl-tests' columns (src/util.cu ``writeBenchmarkLinePreamble``/``Body``)."""
    algbw, busbw = bandwidths(size, seconds, ranks)
    preamble = f"{size:12d}  {size // FLOAT_BYTES:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}"
    body = f"  {float_str(seconds * 1e6, 7):>7s}  {float_str(algbw, 6):>6s}  {float_str(busbw, 6):>6s}  {wrong:6g}"
    return preamble + " " * 32 + body


#: the widths of nccl-tests' header columns (src/util.cu: "# %10s  %12s  %8s  %6s  %6s  %7s  %6s ...")
_WIDTHS = (10, 12, 8, 6, 6, 7, 6, 6, 6, 7, 6, 6, 6)


def _header(*cells: str) -> str:
    return "# " + "  ".join(f"{cell:>{width}}" for cell, width in zip(cells, _WIDTHS, strict=False))


def header_lines(args: argparse.Namespace, ranks: int) -> list[str]:
    """nccl-tests' header (src/util.cu), for `ranks` ranks."""
    measured = ("time", "algbw", "busbw", "#wrong")
    units = ("(us)", "(GB/s)", "(GB/s)", "")
    return [
        f"# {TOOL}: torch.distributed all_reduce, backend {args.backend}, {ranks} ranks on {args.nodes} nodes"
        " (in-place only)",
        f"# nThread 1 nGpus 1 minBytes {args.min_bytes} maxBytes {args.max_bytes} step: 2(factor) warmup iters:"
        f" {args.warmup} iters: {args.iters} agg iters: 1 validation: 1 graph: 0",
        "#",
        _header("", "", "", "", "") + "           out-of-place                       in-place",
        _header("size", "count", "type", "redop", "root", *measured, *measured),
        _header("(B)", "(elements)", "", "", "", *units, *units),
    ]


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """The sizes measured: `min_bytes` doubling up to `max_bytes`, whole float32 elements."""
    result, size = [], max(FLOAT_BYTES, min_bytes - min_bytes % FLOAT_BYTES)
    while size <= max_bytes:
        result.append(size)
        size *= 2
    return result


def transport_summary(lines: Iterable[str]) -> dict[str, Any]:
    """Which transport NCCL used, from its INFO lines: `kind` is "efa" (aws-ofi-nccl's Libfabric
    network with the efa provider), "tcp" (NCCL's Socket network, or Libfabric over its tcp/sockets
    provider), "ib", "intra-node" (channels, none over a network: P2P/SHM only), or "unknown".

    The channel lines ("... via NET/<network>/...") say what carried data; "Using network X" only what
    NCCL loaded (it names Socket on one node whose GPUs talk over NVLink alone: the recorded H200 run),
    so it decides only where the log holds no channel line (nccl-tests samples often keep just it)."""
    network: str | None = None
    provider: str | None = None
    channels: Counter[str] = Counter()
    for line in lines:
        if found := _NETWORK.search(line):
            network = found.group(1)
        if found := _PROVIDER.search(line):
            provider = found.group(1).rstrip(",")
        if found := _VIA.search(line):
            channels[found.group(1)] += 1
    used = {name.removeprefix("NET/") for name in channels if name.startswith("NET/")}
    carried = used or {network or ""}  # the networks that carried data, else the one NCCL loaded
    if channels and not used:
        kind = "intra-node"
    elif "Socket" in carried or (provider or "").split(";")[0] in TCP_PROVIDERS:
        kind = "tcp"
    elif carried & set(OFI_NETWORKS):
        kind = "efa" if provider in (None, "efa") else "unknown"
    elif "IB" in carried:
        kind = "ib"
    else:
        kind = "unknown"
    return {
        "kind": kind,
        "network": network,
        "provider": provider,
        "channels": dict(sorted(channels.items())),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="all_reduce across nodes, measured as nccl-tests does")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, required=True, help="worker processes per node")
    parser.add_argument("--master", required=True, help="the node-0 pod's address (rendezvous)")
    parser.add_argument("--port", type=int, default=29500)
    parser.add_argument("--node-rank", type=int, default=int(os.environ.get("JOB_COMPLETION_INDEX", "0")))
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument("-b", "--min-bytes", type=int, default=8 * MIB)
    parser.add_argument("-e", "--max-bytes", type=int, default=2048 * MIB)
    parser.add_argument("-w", "--warmup", type=int, default=5)
    parser.add_argument("-n", "--iters", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the rendezvous and each call")
    parser.add_argument(
        "--expect-gbps", type=float, default=0, help="one node's network bandwidth (Gbps); 0: no verdict"
    )
    parser.add_argument("--strict", action="store_true", help="a degraded fabric fails too")
    parser.add_argument(
        "--tcp-expected",
        action="store_true",
        help="the image has no aws-ofi-nccl: a TCP transport is reported (tcp-expected), not failed",
    )
    parser.add_argument("--work-dir", default="/tmp/llmctl-fabric", help="NCCL's debug files go here")
    parser.add_argument("--local-rank", type=int, default=None, help=argparse.SUPPRESS)  # a worker
    return parser.parse_args(argv)


def wait_for_master(host: str, timeout: float) -> bool:
    """Wait until node 0's hostname resolves (its pod's DNS record appears once the pod exists)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.getaddrinfo(host, None)
            return True
        except socket.gaierror:
            if time.monotonic() > deadline:
                return False
            time.sleep(2)


def launch(args: argparse.Namespace, argv: list[str]) -> int:
    """Start one worker per GPU of this node and wait for them; the first failure is the exit code."""
    os.makedirs(args.work_dir, exist_ok=True)
    env = dict(os.environ)
    if args.backend == "nccl":  # NCCL's transport lines, into a file per process that the worker reads
        # back: set whatever the pod's environment says (a serving env's NCCL_DEBUG=WARN would hide them)
        env["NCCL_DEBUG"] = "INFO"
        env["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
        env["NCCL_DEBUG_FILE"] = os.path.join(args.work_dir, "nccl.%h.%p.log")
    if not wait_for_master(args.master, args.timeout):
        print(f"{TOOL}: node 0 ({args.master}) did not resolve within {args.timeout:g} s", file=sys.stderr)
        return 2
    workers = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv, "--local-rank", str(local)], env=env
        )
        for local in range(args.gpus_per_node)
    ]
    codes: dict[int, int] = {}
    while len(codes) < len(workers):  # a worker that fails ends the others (they would wait for it)
        for index, worker in enumerate(workers):
            if index not in codes and (code := worker.poll()) is not None:
                codes[index] = code
                for other in workers if code else ():
                    if other.poll() is None:
                        other.terminate()
        time.sleep(0.2)
    return next((code for code in codes.values() if code), 0)  # the first to fail, not the ones it ended


def _nccl_lines(work_dir: str) -> list[str]:
    """This process's NCCL debug lines about transports (NCCL names the file after the pid)."""
    lines: list[str] = []
    for path in glob.glob(os.path.join(work_dir, f"nccl.*.{os.getpid()}.log")):
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines.extend(line.rstrip("\n") for line in handle if TRANSPORT_LINE.search(line))
    return lines


def work(args: argparse.Namespace) -> int:
    """One rank: the measurements, and on rank 0 the report."""
    import torch
    import torch.distributed as dist

    local = int(args.local_rank)
    rank, ranks = args.node_rank * args.gpus_per_node + local, args.nodes * args.gpus_per_node
    device = torch.device("cpu")
    if args.backend == "nccl":
        if torch.cuda.device_count() <= local:
            print(
                f"{TOOL}: worker {local} has no GPU (this pod sees {torch.cuda.device_count()})",
                file=sys.stderr,
            )
            return 2
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    dist.init_process_group(
        args.backend,
        init_method=f"tcp://{args.master}:{args.port}",
        rank=rank,
        world_size=ranks,
        timeout=timedelta(seconds=args.timeout),
        device_id=device if device.type == "cuda" else None,  # NCCL's communicator bound to this GPU
    )

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def say(line: str) -> None:
        if rank == 0:
            print(line, flush=True)

    for line in header_lines(args, ranks):
        say(line)
    rows, total_busbw, wrong_total = [], 0.0, 0
    for size in sizes(args.min_bytes, args.max_bytes):
        data = torch.zeros(size // FLOAT_BYTES, dtype=torch.float32, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(data)
        sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(data)
        sync()
        seconds = torch.tensor(
            [(time.perf_counter() - start) / args.iters], dtype=torch.float64, device=device
        )
        dist.all_reduce(seconds)  # nccl-tests averages the time over the ranks
        mean = float(seconds.item()) / ranks
        data.fill_(rank + 1)  # checked: every element must be 1 + 2 + ... + ranks
        dist.all_reduce(data)
        wrong = torch.tensor([int((data != ranks * (ranks + 1) / 2).sum().item())], device=device)
        dist.all_reduce(wrong)
        algbw, busbw = bandwidths(size, mean, ranks)
        rows.append({"size": size, "count": size // FLOAT_BYTES, "time_us": mean * 1e6, "algbw": algbw,
                     "busbw": busbw, "wrong": int(wrong.item())})  # fmt: skip
        total_busbw += busbw
        wrong_total += int(wrong.item())
        say(row_line(size, mean, ranks, int(wrong.item())))
        del data
    seen: list[Any] = [None] * ranks
    dist.all_gather_object(seen, _nccl_lines(args.work_dir) if args.backend == "nccl" else [])
    dist.destroy_process_group()
    if rank != 0:
        return 0
    lines = list(dict.fromkeys(line for worker in seen for line in worker))  # once each, in order
    average = total_busbw / len(rows) if rows else 0.0
    say(f"# Out of bounds values : {wrong_total} {'FAILED' if wrong_total else 'OK'}")
    say(f"# Avg bus bandwidth    : {average:g} ")
    say("#")
    for line in lines:
        say(line)
    summary = {
        "tool": TOOL,
        "backend": args.backend,
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "ranks": ranks,
        "rows": rows,
        "avg_busbw": average,
        "wrong": wrong_total,
        "transport": transport_summary(lines),
    }
    if args.expect_gbps and rows:
        summary["expected_gbps"] = args.expect_gbps
        summary["efa_expected"] = not args.tcp_expected
        summary["verdict"] = verdict_of(
            rows[-1]["busbw"],
            args.expect_gbps / 8,
            summary["transport"]["kind"],
            efa_expected=not args.tcp_expected,
        )
    say(SUMMARY_PREFIX + json.dumps(summary, sort_keys=True))
    if wrong_total:
        return 1
    far_below = ("fallback", "degraded") if args.strict else ("fallback",)
    return FAR_BELOW if summary.get("verdict") in far_below else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    return work(args) if args.local_rank is not None else launch(args, argv)


if __name__ == "__main__":
    sys.exit(main())
