"""The test server's prefix cache: vLLM's counters, counted by a rule small enough to check by hand.

Each chat request's prompt is its messages' tokens in order (the bench's approximate tokenizer, one
role token before each message), cut into blocks of :data:`BLOCK` tokens. A block is a hit when it
and every block before it were seen before (a chain of hashes, as vLLM's block hashes chain); at
most the full blocks within ``len(prompt) - 1`` tokens hit, since vLLM computes the last prompt token again to sample
from it (vllm-project/vllm v0.26.0 ``vllm/v1/core/kv_cache_manager.py`` ``get_computed_blocks``:
``max_cache_hit_length = request.num_tokens - 1``). Every full block of the prompt is then cached,
without eviction. ``queries`` counts the prompt's tokens, ``hits`` the tokens of the hit blocks:
the units of vLLM's ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``.

:meth:`PrefixCache.metrics_text` writes them as vLLM 0.26's ``/metrics`` shows them (HELP, TYPE and
sample lines of tests/conformance/data/vllm-0.26.0-metrics.txt, a real server's).
"""

from __future__ import annotations

import hashlib
from typing import Any

BLOCK = 16


class PrefixCache:
    """Counts what a vLLM prefix cache of unbounded size would hit."""

    def __init__(self) -> None:
        self.blocks: set[str] = set()
        self.queries = 0
        self.hits = 0

    @staticmethod
    def tokens(messages: Any) -> list[str]:
        from llmctl.serving.client.bench.tokens import ApproxTokenizer

        counter = ApproxTokenizer()
        out: list[str] = []
        for message in messages:
            out.append(f"<{message.get('role', '')}>")
            out.extend(piece.strip() for piece in counter.encode(str(message.get("content", ""))))
        return out

    def observe(self, messages: Any) -> int:
        """Count one prompt; the tokens it hit."""
        tokens = self.tokens(messages)
        chain, hashes = "", []
        for start in range(0, len(tokens) - len(tokens) % BLOCK, BLOCK):
            chain = hashlib.sha256(
                (chain + "\x00" + "\x01".join(tokens[start : start + BLOCK])).encode()
            ).hexdigest()
            hashes.append(chain)
        hit_blocks = 0
        for block in hashes[: max(0, len(tokens) - 1) // BLOCK]:  # full blocks within len - 1
            if block not in self.blocks:
                break
            hit_blocks += 1
        hit = hit_blocks * BLOCK
        self.queries += len(tokens)
        self.hits += hit
        self.blocks.update(hashes)
        return hit

    def metrics_text(self, model: str) -> str:
        labels = f'{{engine="0",model_name="{model}"}}'
        return (
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.\n"
            "# TYPE vllm:prefix_cache_queries_total counter\n"
            f"vllm:prefix_cache_queries_total{labels} {float(self.queries)}\n"
            "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n"
            "# TYPE vllm:prefix_cache_hits_total counter\n"
            f"vllm:prefix_cache_hits_total{labels} {float(self.hits)}\n"
        )
