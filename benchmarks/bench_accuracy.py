"""How close `llmctl bench` comes to what a server really did (`make bench`, issue 29).

The recording server (serving/client/bench/testserver.py, in its own process) stamps, for every stream,
when the bytes that completed the request reached its kernel (the socket's receive timestamp,
SO_TIMESTAMPNS, peeked when its loop's ``select()`` returns: a server loop busy with other streams
reads a request later, and that wait is the server's, not the client's), when it wrote the first
and the last content chunk, and how many tokens it sent, on the clock of the client's
``perf_counter``. Truth is what it recorded, not its nominal schedule:

* TTFT truth per request = first chunk written - request read; the tool's error at p50 and p99 is
  the tool's quantile minus the truth's quantile;
* output throughput truth = tokens the server wrote for the window's requests / (last chunk
  written - first request read); error = tool / truth - 1.

Each server stream is paired with the client's record of the same request (the server reads the
request's index from the prompt's ``[<nonce>-<index>]`` tag), which splits a request's error into
the way out (the client's write stamp to the server's read stamp: the client's write call and the
loopback) and the way back (the server's first content write to the client's arrival stamp).

Scenarios (closed loop, every slot filled at once, fixed output lengths, two warm-up requests
outside the window): c1 with 32 requests and c16 with 128 (TTFT 100 ms, 20 ms per token, 30
tokens), c64 with 256 (TTFT 50 ms, 5 ms per token, 100 tokens), each on the event loops
`llmctl bench` picks for it (serving/client/bench/loops.py). Each figure is the median of
``REPEATS`` runs (the whole CLI's, of ``CLI_REPEATS``). The rule's evidence: c16, c32 and c64 on one and on two loops (``loops`` in the
result). Then the whole CLI (`llmctl bench ... --no-plots --warmup 0`, as the issue measured it: exactly
the 256 requests, after the one ``GET /models`` per slot that opens the connections) at c64: CPU seconds
(user + system, its worker processes included) and peak RSS summed over its processes, start to
exit, with bytecode compiled as an installed CLI has it, and once in the inherited environment.

The machine is shared: another process's load shows up as lateness on both sides; the result
records the load average before and after. Writes benchmarks/results/accuracy.json.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llmctl.serving.client.bench.loadgen import LoadPlan, run_blocking
from llmctl.serving.client.bench.loops import loops_for, run_level
from llmctl.serving.client.bench.metrics import quantile, summarize
from llmctl.serving.client.bench.prompts import PromptFactory
from llmctl.serving.client.bench.testserver import (
    FakeTiming,
    configure,
    read_stamps,
    running_server,
    timeline,
)
from llmctl.serving.client.bench.tokens import ApproxTokenizer

# name -> (concurrency, requests, TTFT s, TPOT s, output tokens)
SCENARIOS = {
    "c1": (1, 32, 0.100, 0.020, 30),
    "c16": (16, 128, 0.100, 0.020, 30),
    "c64": (64, 256, 0.050, 0.005, 100),
}
# the rule's evidence (loops.auto_loops): these levels on one and on two event loops; c32 is
# c64's timing with half the slots, where the rule still picks one loop
RULE_LEVELS = {"c16": SCENARIOS["c16"], "c32": (32, 128, 0.050, 0.005, 100), "c64": SCENARIOS["c64"]}
REPEATS = 3
# the whole CLI's CPU moves by a quarter from run to run (1.4-1.8 s), with how many socket reads
# the chunks took: more runs for its median (each takes about 5 s)
CLI_REPEATS = 7
# the targets (ms; throughput as a fraction; CPU s and MiB of the whole CLI at c64)
TARGETS: dict[str, Any] = {
    "ttft_p50_error_ms": {"c1": 1.0, "c16": 1.5, "c64": 3.0},
    "ttft_p99_error_ms": {"c16": 5.0, "c64": 8.0},
    "throughput_error": 0.002,
    "cli_cpu_s_c64": 1.6,
    "cli_peak_rss_mib_c64": 71.0,
}


def one_run(
    url: str, scenario: tuple[int, int, float, float, int], loops: int | None = None
) -> dict[str, Any]:
    """One level as `llmctl bench` runs it: on ``loops`` event loops, else on the rule's choice."""
    concurrency, requests, ttft, tpot, n = scenario
    tokenizer = ApproxTokenizer()
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=concurrency, requests=requests, warmup=2)
    configure(url, ttft=ttft, tpot=tpot)  # also clears the server's timeline
    count = loops_for(plan, loops)
    result = run_blocking(lambda: run_level(plan, _prompts(n), count))
    summary, rows = summarize(result, tokenizer)
    stamps = [(r.index, r.sent, r.chunk_times[0]) for r in result.records if r.chunk_times]
    tool_ttft = sorted(row["ttft_s"] for row in rows if row["ttft_s"] is not None)
    load = summary["load"]
    return {
        "completed": summary["counts"]["completed"],
        **_against_the_server(url, stamps, tool_ttft, summary["throughput"]["output_throughput_tok_s"]),
        "send_delay_p50_ms": (summary["metrics"]["send_delay_s"]["p50"] or 0.0) * 1000,
        "lead_in_ms": load["lead_in_s"] * 1000,
        "client_cpu_s_window": load["client_cpu_seconds"],
        "loop_lag_p99_ms": (load["loop_lag_s"]["p99"] or 0.0) * 1000,
        "loops": count,
    }


def _prompts(n: int) -> PromptFactory:
    return PromptFactory(
        ApproxTokenizer(),
        mean_input_tokens=64,
        stddev_input_tokens=0,
        mean_output_tokens=n,
        stddev_output_tokens=0,
    )


def _against_the_server(
    url: str, stamps: list[tuple[int, float, float]], tool_ttft: list[float], tool_rate: float
) -> dict[str, Any]:
    """The tool's figures against the server's: ``stamps`` = (index, sent, first content) per request."""
    served = {s[4]: s for s in timeline(url)}
    # the window's requests, each paired with the server's record of it (the prompt's index tag)
    pairs = [(sent, first, served[index]) for index, sent, first in stamps if index in served]
    streams = [s for _sent, _first, s in pairs]
    truth_ttft = sorted(first - read for read, first, _end, _n, _i in streams)
    truth_rate = sum(s[3] for s in streams) / (max(s[2] for s in streams) - min(s[0] for s in streams))
    # where a request's error comes from: the way out (client's write stamp -> server's read
    # stamp) and the way back (server's first content write -> client's arrival stamp)
    way_out = sorted(s[0] - sent for sent, _first, s in pairs)
    way_back = sorted(first - s[1] for _sent, first, s in pairs)
    # per request: (tool's TTFT) - (server's TTFT) = way out + way back
    paired_error = sorted((first - sent) - (s[1] - s[0]) for sent, first, s in pairs)
    return {
        "server_streams": len(streams),
        "ttft_p50_error_ms": (quantile(tool_ttft, 50) - quantile(truth_ttft, 50)) * 1000,
        "ttft_p99_error_ms": (quantile(tool_ttft, 99) - quantile(truth_ttft, 99)) * 1000,
        "truth_ttft_p50_ms": quantile(truth_ttft, 50) * 1000,
        "truth_ttft_p99_ms": quantile(truth_ttft, 99) * 1000,
        "output_tok_s": tool_rate,
        "truth_output_tok_s": truth_rate,
        "throughput_error": tool_rate / truth_rate - 1,
        "paired_error_p50_ms": quantile(paired_error, 50) * 1000,
        "paired_error_p99_ms": quantile(paired_error, 99) * 1000,
        "way_out_p50_ms": quantile(way_out, 50) * 1000,
        "way_out_p99_ms": quantile(way_out, 99) * 1000,
        "way_back_p50_ms": quantile(way_back, 50) * 1000,
        "way_back_p99_ms": quantile(way_back, 99) * 1000,
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def rule_runs(url: str, levels: dict[str, Any]) -> dict[str, Any]:
    """Each of RULE_LEVELS on one and on two event loops (a level above, run on the rule's choice, is
    reused for that count)."""
    evidence: dict[str, Any] = {}
    for name, scenario in RULE_LEVELS.items():
        evidence[name] = {}
        for count in (1, 2):
            if name in levels and levels[name]["loops"] == count:
                evidence[name][str(count)] = {"same_as": f"levels.{name}"}
                continue
            runs = [one_run(url, scenario, count) for _ in range(REPEATS)]
            evidence[name][str(count)] = {**median_of(runs), "runs": runs}
            print(f"{name} on {count} loop(s): {_line(evidence[name][str(count)])}", file=sys.stderr)
    return evidence


def whole_run(
    url: str, scenario: tuple[int, int, float, float, int], env: dict[str, str] | None = None
) -> dict[str, float]:
    """CPU seconds (user + system) of one `llmctl bench` run, start to exit, its worker processes
    included (``os.wait4`` counts the children a process reaped), and its peak RSS summed over its
    processes: the workers' own peaks (``load.worker_peak_rss_mib`` in its summary.json) plus the
    parent's (wait4's figure is the largest process's; when a worker's is larger, the parent's
    VmHWM, read every 5 ms until it exits)."""
    concurrency, requests, ttft, tpot, n = scenario
    configure(url, ttft=ttft, tpot=tpot)
    with tempfile.TemporaryDirectory() as out:
        args = [
            str(Path(sys.executable).parent / "llmctl"), "bench", "-e", url, "-c", str(concurrency),
            "-n", str(requests), "--mean-output-tokens", str(n), "--stddev-output-tokens", "0",
            "-o", out, "--json", "--no-plots", "--warmup", "0",
        ]  # fmt: skip
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env)
        watched = _HighWater(process.pid)
        _pid, status, usage = os.wait4(process.pid, 0)
        watched.done = True
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"llmctl bench exited with {process.returncode}")
        load = json.loads((Path(out) / "summary.json").read_text())["load"]
    workers = [float(peak) for peak in load["worker_peak_rss_mib"]]
    largest = usage.ru_maxrss / 1024
    parent = largest if largest > max(workers, default=0.0) else watched.peak_mib
    return {
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": parent + sum(workers),
        "parent_peak_rss_mib": parent,
        "largest_process_peak_rss_mib": largest,
        "pss_peak_mib": watched.pss_peak_mib,
        "loops": load["loops"],
    }


def with_bytecode(cache: str) -> dict[str, str]:
    """The environment of an installed CLI: bytecode files kept (pip compiles them on install), here
    in ``cache``, even where the environment says PYTHONDONTWRITEBYTECODE (then every one of llmctl's
    modules is compiled from source at each start, about 0.2 CPU s more)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": cache}


class _HighWater:
    """Read by a thread until ``done`` is set: a process's peak RSS so far (VmHWM, every 5 ms) and
    the peak of the proportional set size summed over it and its children (every 50 ms; PSS splits
    the pages a forked worker still shares with its parent, which RSS counts in each process)."""

    def __init__(self, pid: int) -> None:
        import threading

        self.pid, self.peak_mib, self.pss_peak_mib, self.done = pid, 0.0, 0.0, False
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        tick = 0
        while not self.done:
            try:
                self.peak_mib = max(self.peak_mib, _kib(f"/proc/{self.pid}/status", "VmHWM:") / 1024)
                if tick % 10 == 0:
                    children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
                    pss = sum(_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in [str(self.pid), *children])
                    self.pss_peak_mib = max(self.pss_peak_mib, pss / 1024)
            except OSError:
                return
            tick += 1
            time.sleep(0.005)


def _kib(path: str, key: str) -> int:
    """A ``key: N kB`` line of a /proc file (0 when the process is gone)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0


def _line(level: dict[str, Any]) -> str:
    return (
        f"TTFT p50 {level['ttft_p50_error_ms']:+.2f} ms, p99 {level['ttft_p99_error_ms']:+.2f} ms, "
        f"throughput {level['throughput_error']:+.2%}, way out p50 {level['way_out_p50_ms']:.1f} ms, "
        f"way back p50 {level['way_back_p50_ms']:.1f} ms, client CPU {level['client_cpu_s_window']:.2f} s"
    )


def main() -> int:
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    levels: dict[str, Any] = {}
    with running_server(FakeTiming()) as url:
        for name, scenario in SCENARIOS.items():
            # interleaved with nothing else: one scenario's repeats back to back
            runs = [one_run(url, scenario) for _ in range(REPEATS)]
            level = median_of(runs)
            level["runs"] = runs
            levels[name] = level
            print(f"{name}: {_line(level)}", file=sys.stderr)
        loops = rule_runs(url, levels)
        with tempfile.TemporaryDirectory() as cache:
            env = with_bytecode(cache)
            whole_run(url, SCENARIOS["c64"], env)  # compiles the bytecode, as an install does; not counted
            cli_runs = [whole_run(url, SCENARIOS["c64"], env) for _ in range(CLI_REPEATS)]
        # as the earlier figures were taken: in this environment, which may forbid bytecode files
        as_before = whole_run(url, SCENARIOS["c64"])
        # how the server stamped the reads: the kernel's receive time, or (where a read came without
        # one) the moment its select() returned
        stamped = read_stamps(url)
    cli = median_of(cli_runs)
    checks = {
        **{
            f"ttft_p50_{name}_within_{limit}ms": levels[name]["ttft_p50_error_ms"] <= limit
            for name, limit in TARGETS["ttft_p50_error_ms"].items()
        },
        **{
            f"ttft_p99_{name}_within_{limit}ms": levels[name]["ttft_p99_error_ms"] <= limit
            for name, limit in TARGETS["ttft_p99_error_ms"].items()
        },
        "throughput_within_0_2pct": all(
            abs(level["throughput_error"]) <= TARGETS["throughput_error"] for level in levels.values()
        ),
        "cli_cpu_c64_at_most_1_6s": cli["cpu_s"] <= TARGETS["cli_cpu_s_c64"],
        "cli_peak_rss_c64_at_most_71mib": cli["peak_rss_mib"] <= TARGETS["cli_peak_rss_mib_c64"],
    }
    result = {
        "benchmark": "accuracy",
        "what": "llmctl bench against the recording server's own stamps (see the module docstring)",
        "scenarios": {
            name: {"concurrency": c, "requests": r, "ttft_s": t, "tpot_s": p, "output_tokens": n}
            for name, (c, r, t, p, n) in SCENARIOS.items()
        },
        "repeats": REPEATS,
        "cli_repeats": CLI_REPEATS,
        "targets": TARGETS,
        "met": checks,
        "levels": levels,
        "loops": loops,
        "whole_run_c64": {**cli, "runs": cli_runs, "bytecode": "compiled before the measured runs"},
        "whole_run_c64_inherited_environment": {
            **as_before,
            "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", ""),
        },
        "server_read_stamps": stamped,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1m_before": load_before,
            "load_average_1m_after": os.getloadavg()[0],
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "elapsed_s": time.monotonic() - started,
    }
    out = Path(__file__).resolve().parent / "results" / "accuracy.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    met = sum(checks.values())
    missed = ", ".join(k for k, v in checks.items() if not v) or "none"
    print(f"accuracy: {met}/{len(checks)} targets met (missed: {missed}) -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
