"""Overload on the local target (tiny-cpu blueprint, tiny random model, Ray Serve on loopback).

- refusal time of a 10 MB body (target < 100 ms: refused from Content-Length, never tokenised);
- a burst of 10x the deployment's capacity (slots + queue): accepted requests' latency, how fast
  and with which status the rest are refused, and that none hangs;
- a soak at capacity (closed loop, `max_concurrent_requests` streams; 120 s by default,
  `--soak-seconds` to change): errors (target 0) and resident memory growth of the server's
  processes after warm-up (target < 5 %).

Writes benchmarks/results/overload.json and prints one summary line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.serving_limits import queue_limit
from llmctl.serving.client.local import start_local, stop_local
from llmctl.serving.client.local_procs import related
from llmctl.serving.client.tiny import write_tiny_model

TEN_MB = 10 * 1024 * 1024
REFUSAL_TARGET_MS = 100.0
GROWTH_TARGET = 0.05
TOKENS = 32
STACK = "bench-overload"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def _rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _chat(stream: bool) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": TOKENS,
        "temperature": 0,
        "stream": stream,
    }


def refusal(base_url: str, repeats: int = 7) -> dict[str, Any]:
    body = json.dumps({"model": "tiny", "prompt": "a" * TEN_MB}).encode()
    times, codes = [], []
    with httpx.Client(timeout=60) as client:
        for _ in range(repeats):
            started = time.perf_counter()
            answer = client.post(
                f"{base_url}/completions", content=body, headers={"content-type": "application/json"}
            )
            times.append((time.perf_counter() - started) * 1000)
            codes.append(answer.status_code)
    return {
        "repeats": repeats,
        "status_codes": sorted(set(codes)),
        "p50_ms": statistics.median(times),
        "max_ms": max(times),
        "target_ms": REFUSAL_TARGET_MS,
        "meets_target": statistics.median(times) < REFUSAL_TARGET_MS and set(codes) == {413},
    }


async def _timed(client: httpx.AsyncClient, url: str) -> tuple[int, float, str | None]:
    started = time.perf_counter()
    try:
        answer = await client.post(url, json=_chat(False))
    except httpx.HTTPError as error:
        return 0, time.perf_counter() - started, type(error).__name__
    return answer.status_code, time.perf_counter() - started, answer.headers.get("retry-after")


def burst(base_url: str, capacity: int) -> dict[str, Any]:
    count = 10 * capacity

    async def run() -> list[tuple[int, float, str | None]]:
        limits = httpx.Limits(max_connections=count, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            url = f"{base_url}/chat/completions"
            return await asyncio.gather(*(_timed(client, url) for _ in range(count)))

    started = time.perf_counter()
    results = asyncio.run(run())
    wall = time.perf_counter() - started
    ok = [t for code, t, _ in results if code == 200]
    refused = [t for code, t, _ in results if code not in (0, 200)]
    by_code: dict[str, int] = {}
    for code, _, _ in results:
        by_code[str(code)] = by_code.get(str(code), 0) + 1
    hints = {hint for code, _, hint in results if code in (429, 503)}
    return {
        "requests": count,
        "capacity": capacity,
        "by_status": by_code,
        "accepted_p50_s": _pct(ok, 0.5),
        "accepted_p99_s": _pct(ok, 0.99),
        "refused_p50_ms": _pct(refused, 0.5) * 1000,
        "refused_p99_ms": _pct(refused, 0.99) * 1000,
        "retry_after_values": sorted(h for h in hints if h),
        "wall_s": wall,
        "none_hung": "0" not in by_code and wall < 120,
    }


def soak(base_url: str, concurrency: int, seconds: float, pids: list[int]) -> dict[str, Any]:
    warmup = min(30.0, max(5.0, seconds * 0.2))
    samples: list[tuple[float, float]] = []
    errors: dict[str, int] = {}
    done = 0

    async def worker(client: httpx.AsyncClient, stop_at: float) -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            try:
                async with client.stream("POST", f"{base_url}/chat/completions", json=_chat(True)) as r:
                    text = (await r.aread()).decode(errors="replace")
                    if (
                        r.status_code != 200
                        or not text.rstrip().endswith("data: [DONE]")
                        or '"error"' in text
                    ):
                        errors[str(r.status_code)] = errors.get(str(r.status_code), 0) + 1
                    else:
                        done += 1
            except httpx.HTTPError as error:
                errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1

    async def sampler(stop_at: float, started: float) -> None:
        while time.monotonic() < stop_at:
            samples.append((time.monotonic() - started, _rss_mib(pids)))
            await asyncio.sleep(2.0)

    async def run() -> None:
        started = time.monotonic()
        stop_at = started + seconds
        async with httpx.AsyncClient(timeout=120) as client:
            await asyncio.gather(
                sampler(stop_at, started), *(worker(client, stop_at) for _ in range(concurrency))
            )

    asyncio.run(run())
    after = [rss for t, rss in samples if t >= warmup]
    base = after[0] if after else float("nan")
    end = statistics.median(after[-3:]) if after else float("nan")
    growth = (end - base) / base if after else float("nan")
    return {
        "seconds": seconds,
        "concurrency": concurrency,
        "tokens_per_request": TOKENS,
        "completed": done,
        "requests_per_s": done / seconds,
        "errors": errors,
        "warmup_s": warmup,
        "rss_after_warmup_mib": base,
        "rss_end_mib": end,
        "rss_peak_mib": max(after) if after else float("nan"),
        "rss_growth": growth,
        "growth_target": GROWTH_TARGET,
        "meets_target": not errors and growth < GROWTH_TARGET,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--soak-seconds", type=float, default=120.0)
    args = parser.parse_args(argv)
    blueprint = load_blueprint("tiny-cpu")
    slots, queue = blueprint.serving.max_concurrent_requests, queue_limit(blueprint)
    with tempfile.TemporaryDirectory(prefix="llmctl-bench-overload-") as tmp:
        import os

        os.environ["LLMCTL_STATE_DIR"] = str(Path(tmp) / "state")
        os.environ.pop("LLMCTL_API_KEY", None)
        model = Path(tmp) / "tiny"
        write_tiny_model(model)
        endpoint = start_local(blueprint, stack=STACK, model=str(model), timeout_s=600)
        try:
            pid = int(endpoint.extra["pid"])
            pids = [pid, *related(pid)]
            out = {
                "benchmark": "overload",
                "blueprint": blueprint.name,
                "slots": slots,
                "queue": queue,
                "refusal_10mb": refusal(endpoint.base_url),
                "burst": burst(endpoint.base_url, slots + queue),
                "soak": soak(endpoint.base_url, slots, args.soak_seconds, pids),
            }
        finally:
            stopped = time.perf_counter()
            stop_local(STACK)
            stop_s = time.perf_counter() - stopped
    out["stop_s"] = stop_s
    out["meets_target"] = bool(
        out["refusal_10mb"]["meets_target"] and out["burst"]["none_hung"] and out["soak"]["meets_target"]
    )
    path = Path(__file__).parent / "results" / "overload.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    r, b, s = out["refusal_10mb"], out["burst"], out["soak"]
    print(
        f"overload: 10 MB refused in {r['p50_ms']:.1f} ms (target < {REFUSAL_TARGET_MS:.0f}); burst of "
        f"{b['requests']}: {b['by_status']}, refused p99 {b['refused_p99_ms']:.0f} ms; soak {s['seconds']:.0f} s: "
        f"{s['completed']} ok, errors {s['errors'] or 0}, RSS growth {s['rss_growth']:+.1%} -> {path}"
    )
    return out


if __name__ == "__main__":
    main()
