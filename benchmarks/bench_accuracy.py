"""How close `llmctl bench` comes to what a server with known timings really did (`make bench`).

The fake server (serving/bench/testserver.py, in its own process) streams on two schedules:
A = TTFT 100 ms, 20 ms per token, 30 tokens, and B = TTFT 50 ms, 5 ms per token, 100 tokens (the
two workloads of issue 14's comparison with llmperf). For concurrency 1, 16 and 64 (8, 32 and
128 requests, fixed output lengths) it records, as the median of three runs:

* throughput against the schedule's true output rate, c x n / (TTFT + (n - 1) x TPOT), and against
  the rate the server really achieved over the same requests (from its own ``/_timeline``, on the
  same monotonic clock), target: within 3 %;
* TTFT p50 error against the schedule (targets: <= 3 ms at c16, <= 8 ms at c64) and against what
  the server recorded; TPOT p50 error (target <= 0.5 ms);
* the client's CPU in the measured window, per 1,000 output tokens.

Then it runs the whole CLI (`llmctl bench ... --no-plots`, and once with plots) at c16 / 32
requests and c64 / 128 requests and records its CPU seconds (user + system, process start to
exit), target: at least 5x below llmperf's 25.5 and 72 CPU s on this machine.

The machine is shared: other processes' load shows up as server lateness (the "vs server"
figures separate it from the client's own error). Writes benchmarks/results/accuracy.json.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llmctl.serving.bench.loadgen import LoadPlan, run_blocking, run_load
from llmctl.serving.bench.metrics import summarize
from llmctl.serving.bench.prompts import PromptFactory
from llmctl.serving.bench.testserver import FakeTiming, configure, running_server, timeline
from llmctl.serving.bench.tokens import ApproxTokenizer

SCENARIOS = {"A": (0.100, 0.020, 30), "B": (0.050, 0.005, 100)}
LEVELS = [(1, 8), (16, 32), (64, 128)]
REPEATS = 3
LLMPERF_CPU_S = {16: 25.5, 64: 72.0}
TARGETS = {
    "throughput_error": 0.03,
    "ttft_p50_error_ms": {16: 3.0, 64: 8.0},
    "tpot_p50_error_ms": 0.5,
    "cpu_factor_below_llmperf": 5.0,
}


def one_run(url: str, scenario: tuple[float, float, int], concurrency: int, requests: int) -> dict[str, Any]:
    ttft, tpot, n = scenario
    tokenizer = ApproxTokenizer()
    prompts = PromptFactory(
        tokenizer, mean_input_tokens=64, stddev_input_tokens=0, mean_output_tokens=n, stddev_output_tokens=0
    )
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=concurrency, requests=requests, warmup=2)
    configure(url, ttft=ttft, tpot=tpot)  # also clears the server's timeline
    result = run_blocking(lambda: run_load(plan, prompts))
    summary, _ = summarize(result, tokenizer)
    streams = [s for s in timeline(url) if s[0] >= result.t0]  # the window's requests
    server_tokens = sum(s[3] for s in streams)
    server_rate = server_tokens / (max(s[2] for s in streams) - min(s[0] for s in streams))
    server_ttft = statistics.median(s[1] - s[0] for s in streams)
    true_rate = concurrency * n / (ttft + (n - 1) * tpot)
    measured = summary["throughput"]["output_throughput_tok_s"]
    metrics, load = summary["metrics"], summary["load"]
    return {
        "completed": summary["counts"]["completed"],
        "window_s": summary["duration_s"],
        "output_tok_s": measured,
        "true_output_tok_s": true_rate,
        "throughput_error_vs_schedule": measured / true_rate - 1,
        "server_output_tok_s": server_rate,
        "throughput_error_vs_server": measured / server_rate - 1,
        "ttft_p50_error_ms": (metrics["ttft_s"]["p50"] - ttft) * 1000,
        "ttft_p50_error_vs_server_ms": (metrics["ttft_s"]["p50"] - server_ttft) * 1000,
        "tpot_p50_error_ms": (metrics["tpot_s"]["p50"] - tpot) * 1000,
        "client_cpu_s_window": load["client_cpu_seconds"],
        "client_cpu_s_per_1k_tokens": load["client_cpu_seconds_per_1k_tokens"],
        "loop_lag_p99_ms": (load["loop_lag_s"]["p99"] or 0.0) * 1000,
    }


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def whole_run_cpu(
    url: str, scenario: tuple[float, float, int], concurrency: int, requests: int, plots: bool
) -> float:
    """CPU seconds (user + system) of one `llmctl bench` process, start to exit."""
    ttft, tpot, n = scenario
    configure(url, ttft=ttft, tpot=tpot)
    with tempfile.TemporaryDirectory() as out:
        args = [
            str(Path(sys.executable).parent / "llmctl"), "bench", "-e", url, "-c", str(concurrency),
            "-n", str(requests), "--mean-output-tokens", str(n), "--stddev-output-tokens", "0",
            "-o", out, "--json", "--plots" if plots else "--no-plots",
        ]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    results: dict[str, Any] = {}
    cli_cpu: dict[str, Any] = {}
    with running_server(FakeTiming()) as url:
        for name, scenario in SCENARIOS.items():
            for concurrency, requests in LEVELS:
                runs = [one_run(url, scenario, concurrency, requests) for _ in range(REPEATS)]
                level = median_of(runs)
                level["runs"] = runs
                results[f"{name}_c{concurrency}"] = level
                print(
                    f"{name} c{concurrency:<3d} thr {level['throughput_error_vs_schedule']:+.1%} vs schedule "
                    f"({level['throughput_error_vs_server']:+.1%} vs server), TTFT p50 "
                    f"{level['ttft_p50_error_ms']:+.2f} ms ({level['ttft_p50_error_vs_server_ms']:+.2f} vs server), "
                    f"TPOT p50 {level['tpot_p50_error_ms']:+.3f} ms, "
                    f"{level['client_cpu_s_per_1k_tokens']:.3f} CPU s/1k tok",
                    file=sys.stderr,
                )
        for name, scenario in SCENARIOS.items():
            for concurrency, requests in ((16, 32), (64, 128)):
                no_plots = statistics.median(
                    whole_run_cpu(url, scenario, concurrency, requests, False) for _ in range(REPEATS)
                )
                with_plots = whole_run_cpu(url, scenario, concurrency, requests, True)
                cli_cpu[f"{name}_c{concurrency}_n{requests}"] = {
                    "cpu_s_no_plots": no_plots,
                    "cpu_s_with_plots": with_plots,
                    "llmperf_cpu_s": LLMPERF_CPU_S[concurrency],
                    "times_below_llmperf": LLMPERF_CPU_S[concurrency] / with_plots,
                }
                print(
                    f"{name} c{concurrency} whole run: {no_plots:.2f} CPU s (--no-plots), {with_plots:.2f} with plots",
                    file=sys.stderr,
                )
    checks = {
        "throughput_within_3pct": all(
            abs(level["throughput_error_vs_schedule"]) <= TARGETS["throughput_error"]
            for level in results.values()
        ),
        "ttft_p50_c16_within_3ms": all(
            abs(results[f"{s}_c16"]["ttft_p50_error_ms"]) <= 3.0 for s in SCENARIOS
        ),
        "ttft_p50_c64_within_8ms": all(
            abs(results[f"{s}_c64"]["ttft_p50_error_ms"]) <= 8.0 for s in SCENARIOS
        ),
        "tpot_p50_within_0_5ms": all(abs(level["tpot_p50_error_ms"]) <= 0.5 for level in results.values()),
        "cpu_5x_below_llmperf": all(entry["times_below_llmperf"] >= 5.0 for entry in cli_cpu.values()),
    }
    result = {
        "benchmark": "accuracy",
        "scenarios": {
            k: {"ttft_s": v[0], "tpot_s": v[1], "output_tokens": v[2]} for k, v in SCENARIOS.items()
        },
        "repeats": REPEATS,
        "targets": TARGETS,
        "met": checks,
        "levels": results,
        "whole_run_cpu": cli_cpu,
        "machine": {
            "cpus": os.cpu_count(),
            # other processes' load: the figures degrade with it (see the module docstring)
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
    print(
        f"accuracy: {met}/{len(checks)} targets met ({', '.join(k for k, v in checks.items() if not v) or 'all'}) -> {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
