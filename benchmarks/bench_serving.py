"""Serving-layer overhead: the shared OpenAI app over HTTP vs. the engine called directly.

Same tiny random-weight model (generated into a temp dir), same greedy requests. Measures time to
first token (TTFT) and per-token time (TPOT = (e2e - TTFT) / (tokens - 1)), p50 and p99, and
reports what the HTTP layer (FastAPI + SSE + uvicorn, no Ray proxy) adds at p50. Target: < 5 ms.
Writes benchmarks/results/serving.json and prints one summary line.
"""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from llmctl.serving.client.tiny import write_tiny_model
from llmctl.serving.common.api import build_app
from llmctl.serving.common.engine import SamplingParams
from llmctl.serving.common.limits import Limits
from llmctl.serving.ray_cpu.engine import TransformersEngine

RUNS = 60
TOKENS = 32
TARGET_MS = 5.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _summary(ttft: list[float], tpot: list[float]) -> dict[str, float]:
    ms = 1000.0
    return {
        "ttft_p50_ms": _pct(ttft, 0.5) * ms,
        "ttft_p99_ms": _pct(ttft, 0.99) * ms,
        "tpot_p50_ms": _pct(tpot, 0.5) * ms,
        "tpot_p99_ms": _pct(tpot, 0.99) * ms,
    }


async def _direct(engine: TransformersEngine, prompt: list[int]) -> tuple[float, float]:
    start = time.perf_counter()
    first = None
    count = 0
    async for delta in engine.generate(prompt, SamplingParams(max_tokens=TOKENS, temperature=0.0)):
        count += delta.tokens
        if first is None and delta.tokens:
            first = time.perf_counter()
    end = time.perf_counter()
    assert first is not None and count == TOKENS
    return first - start, (end - first) / (count - 1)


async def _http(client: httpx.AsyncClient, url: str) -> tuple[float, float]:
    body = {"model": "tiny", "prompt": "hello world", "max_tokens": TOKENS, "temperature": 0, "stream": True}
    start = time.perf_counter()
    first = None
    async with client.stream("POST", url, json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"text":""' not in line and first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    assert first is not None
    return first - start, (end - first) / (TOKENS - 1)


def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        write_tiny_model(Path(tmp) / "tiny")
        engine = TransformersEngine(str(Path(tmp) / "tiny"), model_id="tiny", max_context=512)
    engine.warmup()
    prompt = engine.encode("hello world")
    app = build_app(engine, Limits(max_context=512, max_new_tokens=TOKENS))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    async def run() -> dict[str, Any]:
        direct = [await _direct(engine, prompt) for _ in range(RUNS)]
        async with httpx.AsyncClient(timeout=60) as client:
            url = f"http://127.0.0.1:{port}/v1/completions"
            for _ in range(3):
                await _http(client, url)
            http = [await _http(client, url) for _ in range(RUNS)]
        d = _summary([a for a, _ in direct], [b for _, b in direct])
        h = _summary([a for a, _ in http], [b for _, b in http])
        return {"direct": d, "http": h}

    results = asyncio.run(run())
    server.should_exit = True
    thread.join(timeout=10)
    added = {k: results["http"][k] - results["direct"][k] for k in results["direct"]}
    out = {
        "benchmark": "serving-overhead",
        "model": "tiny random Llama (2 layers, hidden 64)",
        "runs": RUNS,
        "tokens_per_request": TOKENS,
        "direct": results["direct"],
        "http": results["http"],
        "added": added,
        "target_added_p50_ms": TARGET_MS,
        "meets_target": added["ttft_p50_ms"] < TARGET_MS and added["tpot_p50_ms"] < TARGET_MS,
    }
    path = Path(__file__).parent / "results" / "serving.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(
        f"serving overhead at p50: TTFT +{added['ttft_p50_ms']:.2f} ms, per token +{added['tpot_p50_ms']:.2f} ms "
        f"(target < {TARGET_MS} ms: {'met' if out['meets_target'] else 'NOT met'}) -> {path}"
    )
    return out


if __name__ == "__main__":
    main()
