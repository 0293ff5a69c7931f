"""The loads of the GPU run: the clients (``llmctl bench``, ``vllm bench serve``, ``llmctl chat``) run
as measured processes, the servers' own histograms scraped around them, and the steps that load
servers (``bench-b``, ``bench-b3``, ``bench-c``, ``bench-f``, ``eager``)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request

from device_base import (
    EAGER,
    LOGS,
    MODEL,
    RAY_SLOT,
    RES,
    SERVERS,
    env,
    export,
    record,
)
from device_logs import engine_lines, fast_lines, nccl_lines, phases
from device_servers import alive, plain_vllm, ray_vllm, stop, wait


def eager(args: argparse.Namespace) -> None:
    """The serving path's cost at tensor_parallel 4 (2 on a two-GPU machine) within one lease: our Ray
    Serve app, then plain vLLM, both in eager mode on every GPU, each started, checked (chat) and loaded
    (c1, c16, c64) in turn."""
    stop(["vllm", "vllmw", "vllmc", "vllm2", "vllm4", "ray1", "ray2", "ray4", "triton"])
    tp = 4 if args.gpus >= 4 else 2
    ray, plain = f"ray{tp}e", f"vllm{tp}e"
    starts = (
        (ray, lambda: ray_vllm(ray, tp=tp, gpus_total=tp, driver=("--engine-extra", json.dumps(EAGER)))),
        (plain, lambda: plain_vllm(plain, tp=tp, flags=("--enforce-eager",))),
    )
    for name, start in starts:
        start()
        record("start_eager", servers=[name], tensor_parallel=tp, engine_extra=EAGER)
        wait(argparse.Namespace(names=name, limit=args.limit))
        if (RES / f"{name}.ready").exists():
            bench_c(argparse.Namespace(names=name))
        stop([name])
    export()


MEASURE = """
import json, resource, subprocess, sys
rc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], "w"), stderr=subprocess.STDOUT).returncode
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "cpu_s": round(use.ru_utime + use.ru_stime, 2), "peak_rss_mib": round(use.ru_maxrss / 1024)}))
"""


def run_measured(
    label: str, argv: list[str], environ: dict[str, str], timeout: float = 300
) -> tuple[int, str]:
    """Run a client in a process of its own: its wall time, CPU seconds (its whole process tree, the
    worker loops included) and the peak RSS of its largest process."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"client-{label}.txt"
    started = time.time()
    try:
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, str(log), *argv],
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as error:
        measured = {"rc": 124, "error": repr(error)[:300]}
    record("client", label=label, wall_s=round(time.time() - started, 2), **measured)
    text = log.read_text(errors="replace") if log.exists() else ""
    return int(measured.get("rc", 1)), text


def llmctl_bench(
    label: str, port: int, concurrency: int, requests: int, prefix: str = "/v1", extra: tuple[str, ...] = ()
) -> None:
    """One ``llmctl bench`` load (512 in / 128 out unless ``extra``'s later flags say otherwise)."""
    out = RES / f"lb-{label}"
    argv = [sys.executable, "-m", "llmctl", "bench", "-e", f"http://127.0.0.1:{port}{prefix}", "-m", "tiny"]
    argv += ["-c", str(concurrency), "-n", str(requests), "--warmup", "8", "--mean-input-tokens", "512"]
    argv += ["--stddev-input-tokens", "0", "--mean-output-tokens", "128", "--stddev-output-tokens", "0"]
    argv += ["--tokenizer", str(MODEL), "--no-plots", "--json", "-o", str(out), *extra]
    rc, text = run_measured(f"llmctl-{label}", argv, env())
    summary = None
    for path in sorted(out.rglob("summary.json")):
        summary = json.loads(path.read_text())
    record("llmctl_bench", label=label, rc=rc, summary=slim(summary), tail=None if summary else text[-1500:])


def slim(summary: object) -> object:
    """The summary without per-request rows (they stay on the device)."""
    if not isinstance(summary, dict):
        return summary
    return {key: value for key, value in summary.items() if key not in ("requests", "rows")}


def vllm_bench(label: str, port: int, concurrency: int, requests: int) -> None:
    argv = [sys.executable, "-c", VLLM_CLI, "bench", "serve", "--backend", "openai-chat"]
    argv += [
        "--endpoint",
        "/v1/chat/completions",
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--model",
        "tiny",
    ]
    argv += ["--tokenizer", str(MODEL), "--dataset-name", "random", "--random-input-len", "512"]
    argv += [
        "--random-output-len",
        "128",
        "--num-prompts",
        str(requests),
        "--max-concurrency",
        str(concurrency),
    ]
    argv += ["--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99"]
    argv += ["--save-result", "--result-dir", str(RES / f"vb-{label}")]
    rc, text = run_measured(f"vllm-bench-{label}", argv, env())
    found = sorted((RES / f"vb-{label}").glob("*.json"))
    result = json.loads(found[-1].read_text()) if found else None
    if isinstance(result, dict):
        result = {k: v for k, v in result.items() if not isinstance(v, list)}
    record("vllm_bench", label=label, rc=rc, result=result, tail=None if result else text[-1500:])


VLLM_CLI = "import sys; from vllm.entrypoints.cli.main import main; sys.argv=['vllm']+sys.argv[1:]; main()"


def scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read().decode()
    except OSError as error:
        return f"# scrape failed: {error}\n"


HISTOGRAMS = (
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_time_per_output_token_seconds",
    # where a first token's time goes inside the engine (waiting to be scheduled, then prefill): the
    # 2026-11-28 fast-path run found the c64 gap inside the engine's TTFT and could not split it
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
)


def parse_histograms(text: str, prefix: str = "vllm:") -> dict[str, object]:
    """vLLM's histograms and counters in a scrape; ``prefix`` ``ray_vllm_``: the same engine metrics as
    Ray's metrics agent exports them for our app's engine (Ray Serve LLM's vLLM stat logger)."""
    text = text if prefix == "vllm:" else text.replace(prefix, "vllm:")
    out: dict[str, object] = {}
    for name in HISTOGRAMS:
        buckets: dict[float, float] = {}
        for match in re.finditer(re.escape(name) + r"_bucket\{([^}]*)\} ([0-9.e+-]+)", text):
            le = re.search(r'le="([^"]+)"', match.group(1))
            if le:
                bound = float("inf") if le.group(1) == "+Inf" else float(le.group(1))
                buckets[bound] = buckets.get(bound, 0.0) + float(match.group(2))
        total = sum(
            float(m.group(1)) for m in re.finditer(re.escape(name) + r"_sum\{[^}]*\} ([0-9.e+-]+)", text)
        )
        count = sum(
            float(m.group(1)) for m in re.finditer(re.escape(name) + r"_count\{[^}]*\} ([0-9.e+-]+)", text)
        )
        out[name] = {"buckets": sorted(buckets.items()), "sum": total, "count": count}
    for counter in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total"):
        out[counter] = sum(
            float(m.group(1)) for m in re.finditer(re.escape(counter) + r"(?:\{[^}]*\})? ([0-9.e+-]+)", text)
        )
    return out


def quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    if not buckets or buckets[-1][1] <= 0:
        return None
    want, prev_le, prev_c = q * buckets[-1][1], 0.0, 0.0
    for le, count in buckets:
        if count >= want:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (want - prev_c) / max(count - prev_c, 1e-9)
        prev_le, prev_c = le, count
    return None


def window(before: dict[str, object], after: dict[str, object], seconds: float) -> dict[str, object]:
    """The server's own view of the requests between two scrapes: p50/p99 by bucket interpolation."""
    res: dict[str, object] = {"seconds": round(seconds, 2)}
    for name in HISTOGRAMS:
        a, b = before[name], after[name]
        assert isinstance(a, dict) and isinstance(b, dict)
        n = b["count"] - a["count"]
        earlier = dict(a["buckets"])
        delta = [(le, cb - earlier.get(le, 0.0)) for le, cb in b["buckets"]]
        p50, p99 = quantile(delta, 0.5), quantile(delta, 0.99)
        res[name.split(":")[1]] = {
            "n": n,
            "mean_ms": round(1000 * (b["sum"] - a["sum"]) / n, 2) if n else None,
            "p50_ms": None if p50 is None else round(1000 * p50, 2),
            "p99_ms": None if p99 is None else round(1000 * p99, 2),
        }
    for counter in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total"):
        res[counter.split(":")[1]] = after[counter] - before[counter]  # type: ignore[operator]
    return res


def against_server(label: str, port: int, run: object) -> None:
    """Run one client while scraping the server before and after: its histograms over that window."""
    url = f"http://127.0.0.1:{port}/metrics"
    before = parse_histograms(scrape(url))
    started = time.time()
    run()  # type: ignore[operator]
    after = parse_histograms(scrape(url))
    record("server_window", label=label, **window(before, after, time.time() - started))


def metric_names(label: str, url: str) -> None:
    text = scrape(url)
    (LOGS / f"metrics-{label}.txt").write_text(text)
    names = sorted(
        {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    )
    record("metric_names", label=label, url=url, names=names)


def chat_check(label: str, port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    models = scrape(f"{base}/v1/models")
    body = json.dumps({"model": "tiny", "prompt": "hello", "max_tokens": 8}).encode()
    request = urllib.request.Request(f"{base}/v1/completions", body, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            completion = json.loads(answer.read())
    except OSError as error:
        completion = {"error": str(error)}
    rc, text = run_measured(
        f"chat-{label}",
        [sys.executable, "-m", "llmctl", "chat", "-e", f"{base}/v1", "-m", "tiny", "--prompt", "hi"],
        env(),
        timeout=120,
    )
    record(
        "chat",
        label=label,
        models=models[:400],
        completion=completion,
        llmctl_chat_rc=rc,
        chat_tail=text[-400:],
    )


def bench_b(args: argparse.Namespace) -> None:
    """Chat on each server, then one load at a time: our Ray Serve app at tp 1 at c1/c16/c64, plain vLLM
    at the same levels (the serving path's cost), and ``llmctl bench`` against ``vllm bench serve`` on
    plain vLLM with the server's histograms scraped around each."""
    vllm_port, ray1_port, ray2_port = SERVERS["vllm"][0], SERVERS["ray1"][0], SERVERS["ray2"][0]
    for label, port in (("vllm", vllm_port), ("ray1", ray1_port)) + (
        (("ray2", ray2_port),) if args.gpus >= 4 else ()
    ):
        chat_check(label, port)
    for c, n in ((1, 32), (16, 256), (64, 512)):
        llmctl_bench(f"ray1-c{c}", ray1_port, c, n)
        if c == 64:
            metric_names("ray1-serve-under-load", "http://127.0.0.1:8090/metrics")
    vllm_bench("ray1-c16", ray1_port, 16, 256)
    export()
    llmctl_bench("vllm-c1", vllm_port, 1, 32)
    for c, n in ((16, 256), (64, 512), (256, 1024)):
        against_server(
            f"llmctl-c{c}", vllm_port, lambda c=c, n=n: llmctl_bench(f"vllm-c{c}", vllm_port, c, n)
        )
        if c == 64:
            metric_names("vllm-serve-0.26.0", f"http://127.0.0.1:{vllm_port}/metrics")
        against_server(
            f"vllm-bench-c{c}", vllm_port, lambda c=c, n=n: vllm_bench(f"vllm-c{c}", vllm_port, c, n)
        )
        export()
    if args.gpus >= 4:
        llmctl_bench("ray2-c16", ray2_port, 16, 256)
    export()


def bench_b3(args: argparse.Namespace) -> None:
    """The stream-batching variant once its redeploy is ready (a warm start: about 170 s on 2026-11-28)."""
    ray1_port = SERVERS["ray1"][0]
    deadline = time.time() + args.limit
    while time.time() < deadline and alive("ray1b") and not (RES / "ray1b.ready").exists():
        time.sleep(1)
    took = (
        float((RES / "ray1b.ready").read_text()) - float((RES / "ray1b.started").read_text())
        if (RES / "ray1b.ready").exists()
        else None
    )
    record("redeploy", name="ray1-batch0", seconds=took, alive=alive("ray1b"))
    bundles = RES / "ray1b.bundles.json"
    if bundles.exists():
        record("ray_view", name="ray1b", **json.loads(bundles.read_text()))
    if took is not None:
        for c, n in ((1, 32), (16, 256), (64, 512)):
            llmctl_bench(f"ray1b-c{c}", ray1_port, c, n)
    export()


def bench_f(args: argparse.Namespace) -> None:
    """The fast-path comparison (issue 52): the servers named by ``--names`` (our app first, plain vLLM
    second) loaded in turn at c1, c16 and c64 (512 in / 128 out, chat streaming), ``--rounds`` times,
    alternating at every level; each server's engine histograms scraped around its load (our app's
    through Ray's metrics port, read after the next server's load so Ray's agent has exported them)."""
    names = args.names.split(",")
    if pending := [n for n in names if not (RES / f"{n}.ready").exists()]:
        wait(argparse.Namespace(names=",".join(pending), limit=args.limit))
    names = [n for n in names if (RES / f"{n}.ready").exists()]
    for name in names:
        if not getattr(args, "no_chat", False):
            chat_check(name, SERVERS[name][0])
    first = getattr(args, "first_round", 1)
    for round_ in range(first, first + args.rounds):
        for c, n in ((1, 32), (16, 256), (64, 512)):
            late: list[tuple[str, str, dict[str, object], float]] = []
            for name in names:
                port = SERVERS[name][0]
                url, prefix = engine_metrics(name)
                before = parse_histograms(scrape(url), prefix)
                began = time.time()
                llmctl_bench(f"{name}-c{c}-r{round_}", port, c, n)
                if prefix == "vllm:":
                    after = parse_histograms(scrape(url), prefix)
                    record(
                        "server_window",
                        label=f"{name}-c{c}-r{round_}",
                        **window(before, after, time.time() - began),
                    )
                else:
                    late.append((name, url, before, began))
            for name, url, before, began in late:  # after the other server's load: Ray's agent exported
                if len(names) == 1:
                    time.sleep(12)
                after = parse_histograms(scrape(url), "ray_vllm_")
                record(
                    "server_window",
                    label=f"{name}-c{c}-r{round_}",
                    **window(before, after, time.time() - began),
                )
            export()
    for name in names:
        if name.startswith("ray"):
            fast_lines(name)
    export()


def engine_metrics(name: str) -> tuple[str, str]:
    """Where a server's engine histograms are scraped, and their prefix: plain vLLM's own /metrics,
    our app's engine through its Ray cluster's metrics export port (``ray start --metrics-export-port``)."""
    if name.startswith("ray"):
        return f"http://127.0.0.1:{8090 + RAY_SLOT[name]}/metrics", "ray_vllm_"
    return f"http://127.0.0.1:{SERVERS[name][0]}/metrics", "vllm:"


def bench_c(args: argparse.Namespace) -> None:
    """The tensor_parallel 2/4 servers named by ``--names`` (ray2 and vllm2, ray4, vllm4): chat, then
    c1, c16 and c64 (the serving path's levels), one load at a time; a server not ready yet is waited
    for first (up to ``--limit``), and one still not ready is skipped, not loaded."""
    names = args.names.split(",")
    if pending := [n for n in names if not (RES / f"{n}.ready").exists()]:
        wait(argparse.Namespace(names=",".join(pending), limit=getattr(args, "limit", 0)))
    for name in names:
        if not (RES / f"{name}.ready").exists():
            continue  # wait() recorded it not_ready or died
        port = SERVERS[name][0]
        chat_check(name, port)
        for c, n in ((1, 32), (16, 256), (64, 512)):
            llmctl_bench(f"{name}-c{c}", port, c, n)
        if name.startswith("ray"):
            phases([name])
        else:
            nccl_lines(name, [str(LOGS / f"{name}.log")])
            record("engine_lines", name=name, lines=engine_lines(name))
        export()
