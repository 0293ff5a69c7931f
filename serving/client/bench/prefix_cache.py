"""The prefix cache hit rate of a level, from the server's own counters.

vLLM 0.26 counts, per engine, the prompt tokens it looked up in its prefix cache and the tokens it
found there (vllm-project/vllm v0.26.0 ``vllm/v1/metrics/loggers.py``, ``PrometheusStatLogger``:
Counters ``vllm:prefix_cache_queries`` "Prefix cache queries, in terms of number of queried tokens"
and ``vllm:prefix_cache_hits`` "... number of cached tokens", labels ``model_name`` and ``engine``).
prometheus_client exports a Counter as ``<name>_total`` (tests/conformance/data/vllm-0.26.0-metrics.txt,
a real ``vllm serve`` 0.26.0's ``/metrics``). The bench reads both before and after a level and reports
the difference: hits / queries over the level, warm-up included, summed over every engine, model and
endpoint scraped. Plain ``vllm serve`` serves them on its own port's ``/metrics``.

Through Ray Serve LLM the engine logs with vLLM's ``RayPrometheusStatLogger`` (Ray 2.58.0
``ray/llm/_internal/serve/engines/vllm/vllm_engine.py``), whose wrappers make Ray metrics of the same
counters with every character outside ``[a-zA-Z0-9_]`` turned into ``_`` and a ``ReplicaId`` label
added (vllm-project/vllm ``vllm/v1/metrics/ray_wrappers.py``); Ray's metrics export (each node's
``--metrics-export-port``) prefixes ``ray_``, so they read ``ray_vllm_prefix_cache_queries_total`` /
``ray_vllm_prefix_cache_hits_total`` (the names the 2026-11-28 H200 run listed from port 8090+slot:
benchmarks/results/gpu-runs/2026-11-28-h200x2.jsonl, ``metric_names``), one series per replica and
engine. A page is read under whichever family it has (vLLM's own first), summed over its series.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any
from urllib.parse import urlsplit

from llmctl.serving.client.bench import wire

QUERIES = "vllm:prefix_cache_queries_total"
HITS = "vllm:prefix_cache_hits_total"
#: the same counters as Ray's metrics export names them (vLLM's Ray stat logger behind Ray Serve LLM)
RAY_QUERIES = "ray_vllm_prefix_cache_queries_total"
RAY_HITS = "ray_vllm_prefix_cache_hits_total"
#: each family's names, mapped to the keys :func:`read_counters` returns; vLLM's own first
FAMILIES = ({QUERIES: QUERIES, HITS: HITS}, {RAY_QUERIES: QUERIES, RAY_HITS: HITS})
SOURCE = (
    "vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total (vLLM's own counters, tokens; "
    "ray_vllm_prefix_cache_* where Ray exports them)"
)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)")

Counters = dict[str, float]


def read_counters(text: str) -> Counters:
    """The two counters in a ``/metrics`` text, keyed :data:`QUERIES` / :data:`HITS` whichever family
    (:data:`FAMILIES`) the page has, each summed over its label sets: every replica and engine (absent:
    not there). A page with both families is read under vLLM's own."""
    by_family: list[Counters] = [{} for _ in FAMILIES]
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        for family, found in zip(FAMILIES, by_family, strict=True):
            key = family.get(match.group(1))
            if key is not None:
                with contextlib.suppress(ValueError):
                    found[key] = found.get(key, 0.0) + float(match.group(2))
    return next((found for found in by_family if found), {})


def metrics_urls(endpoints: list[str], explicit: list[str] | None = None) -> list[str]:
    """Where to read them: the URLs given, else each endpoint's server root + ``/metrics`` (an
    OpenAI base URL ``http://host:8000/v1`` -> ``http://host:8000/metrics``, as vLLM serves them)."""
    if explicit:
        return list(explicit)
    urls = []
    for endpoint in endpoints:
        parts = urlsplit(endpoint)
        url = f"{parts.scheme}://{parts.netloc}/metrics"
        if url not in urls:
            urls.append(url)
    return urls


async def scrape(urls: list[str], headers: bytes = b"") -> Counters | None:
    """Both counters summed over ``urls``; None when a URL cannot be read or lacks them."""
    pool = wire.Pool()
    total: Counters = {}
    try:
        for url in urls:
            try:
                status, body = await wire.fetch(pool, url, headers)
            except (wire.WireError, OSError, TimeoutError):
                return None
            counters = read_counters(body.decode("utf-8", "replace")) if status == 200 else {}
            if set(counters) != {QUERIES, HITS}:
                return None
            for name, value in counters.items():
                total[name] = total.get(name, 0.0) + value
    finally:
        pool.close()
    return total


def level_hit_rate(before: Counters | None, after: Counters | None, urls: list[str]) -> dict[str, Any]:
    """The level's figures for the summary (``prefix_cache``)."""
    if before is None or after is None:
        return {
            "available": False,
            "urls": urls,
            "note": "no vLLM prefix cache counters at these URLs (pass --metrics-url where vLLM serves /metrics)",
        }
    queries = after[QUERIES] - before[QUERIES]
    hits = after[HITS] - before[HITS]
    return {
        "available": True,
        "urls": urls,
        "source": SOURCE,
        "queried_tokens": int(queries),
        "hit_tokens": int(hits),
        "hit_rate": round(hits / queries, 4) if queries > 0 else None,
    }
