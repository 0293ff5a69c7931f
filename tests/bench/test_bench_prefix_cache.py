"""Issue 52: the prefix-cache workloads of `llmctl bench` (shared system prompts over groups, growing
conversations) and the hit rate read from the server's own counters.

The counter names and their text form are a real vLLM 0.26.0's (tests/conformance/data/
vllm-0.26.0-metrics.txt, recorded on an H200; the names are PrometheusStatLogger's in
vllm-project/vllm v0.26.0 vllm/v1/metrics/loggers.py). The end-to-end tests run against the repo's
test server, whose cache rule (serving/client/bench/testserver_cache.py: blocks of 16 tokens, hits
only on full blocks within len - 1, vLLM's rule) makes every figure computable by hand.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmctl.errors import BadInput
from llmctl.serving.client.bench.options import check_workload
from llmctl.serving.client.bench.prefix_cache import (
    HITS,
    QUERIES,
    level_hit_rate,
    metrics_urls,
    read_counters,
)
from llmctl.serving.client.bench.report import prefix_cache_line
from llmctl.serving.client.bench.runner import BenchConfig, run_bench
from llmctl.serving.client.bench.testserver_cache import BLOCK, PrefixCache
from llmctl.serving.client.bench.tokens import ApproxTokenizer
from llmctl.serving.client.bench.workloads import ConversationFactory, SharedPrefixFactory

RECORDED = Path(__file__).resolve().parents[1] / "conformance" / "data" / "vllm-0.26.0-metrics.txt"
SETTINGS: dict[str, Any] = {
    "mean_input_tokens": 40,
    "stddev_input_tokens": 0,
    "mean_output_tokens": 8,
    "stddev_output_tokens": 0,
}


def test_the_counters_are_read_from_a_real_vllm_metrics_page() -> None:
    assert read_counters(RECORDED.read_text()) == {QUERIES: 549273.0, HITS: 47024.0}


def test_the_test_servers_page_has_vllms_shape() -> None:
    cache = PrefixCache()
    cache.observe([{"role": "user", "content": "one two three"}])
    text = cache.metrics_text("tiny")
    families = {
        f.name: [(s.name, s.labels, s.value) for s in f.samples] for f in text_string_to_metric_families(text)
    }
    recorded = {f.name: f for f in text_string_to_metric_families(RECORDED.read_text())}
    for name in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits"):
        assert recorded[name].type == "counter"
        assert [(s, sorted(labels)) for s, labels, _ in families[name]] == [
            (s.name, sorted(s.labels)) for s in recorded[name].samples if s.name.endswith("_total")
        ]
    assert families["vllm:prefix_cache_queries"][0][2] == 4.0  # three words and the role token
    assert read_counters(text) == {QUERIES: 4.0, HITS: 0.0}


def test_metrics_urls_are_the_server_roots_unless_given() -> None:
    assert metrics_urls(["http://a:8000/v1", "http://a:8000/v1/", "https://b/v1"]) == [
        "http://a:8000/metrics",
        "https://b/metrics",
    ]
    assert metrics_urls(["http://a:8000/v1"], ["http://w:8080/metrics"]) == ["http://w:8080/metrics"]


def test_a_hit_rate_is_the_difference_of_the_counters() -> None:
    before, after = {QUERIES: 1000.0, HITS: 100.0}, {QUERIES: 1800.0, HITS: 700.0}
    figures = level_hit_rate(before, after, ["u"])
    assert figures["hit_rate"] == 0.75 and figures["queried_tokens"] == 800 and figures["hit_tokens"] == 600
    assert prefix_cache_line(figures).startswith("prefix cache hit rate 75.0% (600 of 800 prompt tokens")
    assert level_hit_rate(None, after, ["u"])["available"] is False


def test_shared_prefix_prompts_carry_their_groups_system_prompt() -> None:
    tokenizer = ApproxTokenizer()
    factory = SharedPrefixFactory(tokenizer, prefix_tokens=64, groups=2, **SETTINGS)
    specs = [factory.make(i) for i in range(4)]
    for spec in specs:
        (system_role, system), (user_role, question) = spec.messages
        assert (system_role, user_role) == ("system", "user")
        assert tokenizer.count(system) == 64
        assert question.startswith(f"[{factory.nonce}-{spec.index:06d}] ")
        assert spec.input_tokens == 64 + tokenizer.count(question)
    assert specs[0].messages[0] == specs[2].messages[0] != specs[1].messages[0] == specs[3].messages[0]
    assert specs[0].messages[0][1].startswith(f"[{factory.nonce}-g0] ")


def test_a_conversation_resends_its_earlier_turns() -> None:
    factory = ConversationFactory(ApproxTokenizer(), conversations=2, turns=3, **SETTINGS)
    assert [factory.position(i) for i in range(7)] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 0)]
    turn2 = factory.make(4)
    assert [role for role, _ in turn2.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert factory.make(2).messages == turn2.messages[:3]  # turn 1 is a prefix of turn 2
    assert [text for role, text in turn2.messages if role == "user"] == [
        factory.make(0).text,
        factory.make(2).text,
        factory.make(4).text,
    ]
    assert turn2.input_tokens == sum(ApproxTokenizer().count(text) for _, text in turn2.messages)
    assert len(factory.make(6).messages) == 1  # the next conversations start after three turns


def _bench(url: str, tmp_path: Path, **workload: Any) -> dict[str, Any]:
    config = BenchConfig(
        endpoints=[url],
        out_dir=tmp_path / "out",
        concurrency=[1],
        requests=6,
        warmup=0,
        plots=False,
        **SETTINGS,
        **workload,
    )
    outcome = asyncio.run(run_bench(config))
    (level,) = outcome.levels
    return level.summary


def _server_tokens(messages: tuple[tuple[str, str], ...]) -> int:
    """What the test server counts for a prompt: each message's words and its role token."""
    return sum(ApproxTokenizer().count(text) + 1 for _, text in messages)


def test_shared_prefix_hit_rate_against_the_test_server(fake: Any, tmp_path: Path) -> None:
    """Six requests over two groups, one at a time: each group's first misses, the other four reuse
    the 64-token system prompt's four full blocks (its role token, and the question's first block, differ)."""
    url = fake(ttft=0.001, tpot=0.001, prefix_cache=1)
    summary = _bench(url, tmp_path, prefix_tokens=64, prefix_groups=2)
    factory = SharedPrefixFactory(ApproxTokenizer(), prefix_tokens=64, groups=2, **SETTINGS)
    queried = sum(_server_tokens(factory.make(i).messages) for i in range(6))
    assert summary["counts"]["completed"] == 6 and summary["counts"]["failed"] == 0
    cache = summary["prefix_cache"]
    assert (cache["hit_tokens"], cache["queried_tokens"]) == (4 * 64, queried)
    assert cache["hit_rate"] == round(4 * 64 / queried, 4)
    assert summary["prompts"]["workload"] == "shared-prefix" and summary["prompts"]["prefix_groups"] == 2


def test_conversation_hit_rate_against_the_test_server(fake: Any, tmp_path: Path) -> None:
    """Two conversations of three turns, one request at a time: each later turn hits the full blocks
    of its conversation's previous prompt, nothing else."""
    url = fake(ttft=0.001, tpot=0.001, prefix_cache=1)
    summary = _bench(url, tmp_path, conversations=2, turns=3)
    factory = ConversationFactory(ApproxTokenizer(), conversations=2, turns=3, **SETTINGS)
    sizes = [_server_tokens(factory.make(i).messages) for i in range(6)]
    hits = sum(sizes[i - 2] // BLOCK * BLOCK for i in range(2, 6))
    cache = summary["prefix_cache"]
    assert (cache["hit_tokens"], cache["queried_tokens"]) == (hits, sum(sizes))
    assert hits > 0 and summary["counts"]["completed"] == 6


def test_no_counters_means_no_hit_rate(fake: Any, tmp_path: Path) -> None:
    url = fake(ttft=0.001, tpot=0.001)
    summary = _bench(url, tmp_path, metrics_urls=[url.rsplit("/v1", 1)[0] + "/no-such-page"])
    assert summary["prefix_cache"]["available"] is False


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"prefix_tokens": 8, "conversations": 2},
            "--prefix-tokens (shared system prompts) and --conversations",
        ),
        ({"prefix_groups": 2}, "--prefix-groups needs --prefix-tokens"),
        ({"turns": 2}, "--turns needs --conversations"),
        ({"prefix_tokens": 8, "shared_prefix": True}, "--shared-prefix drops the nonce"),
    ],
)
def test_workload_flags_are_checked(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_workload(settings)


def test_a_sweep_reports_each_levels_hit_rate(fake: Any, tmp_path: Path) -> None:
    """Two levels of six requests over two groups: the first level misses each group once, the second
    finds both system prompts cached (request indexes run on across levels), at any concurrency."""
    url = fake(ttft=0.001, tpot=0.001, prefix_cache=1)
    config = BenchConfig(
        endpoints=[url],
        out_dir=tmp_path / "out",
        concurrency=[1, 2],
        requests=6,
        warmup=0,
        plots=False,
        prefix_tokens=64,
        prefix_groups=2,
        **SETTINGS,
    )
    outcome = asyncio.run(run_bench(config))
    factory = SharedPrefixFactory(ApproxTokenizer(), prefix_tokens=64, groups=2, **SETTINGS)
    queried = [
        sum(_server_tokens(factory.make(i).messages) for i in range(first, first + 6)) for first in (0, 6)
    ]
    assert outcome.sweep is not None
    assert [level["prefix_cache_hit_rate"] for level in outcome.sweep["levels"]] == [
        round(4 * 64 / queried[0], 4),
        round(6 * 64 / queried[1], 4),
    ]


# Ray's export of the same counters behind Ray Serve LLM, two replicas (vLLM's Ray stat logger adds
# ReplicaId; the names are the ones the 2026-11-28 H200 run listed from Ray's metrics port:
# benchmarks/results/gpu-runs/2026-11-28-h200x2.jsonl, kind metric_names)
RAY_PAGE = """\
# HELP ray_vllm_prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE ray_vllm_prefix_cache_queries_total counter
ray_vllm_prefix_cache_queries_total{Component="core_worker",ReplicaId="a1",WorkerId="w1",engine="0",model_name="tiny"} 1200.0
ray_vllm_prefix_cache_queries_total{Component="core_worker",ReplicaId="b2",WorkerId="w2",engine="0",model_name="tiny"} 800.0
# TYPE ray_vllm_prefix_cache_hits_total counter
ray_vllm_prefix_cache_hits_total{Component="core_worker",ReplicaId="a1",WorkerId="w1",engine="0",model_name="tiny"} 900.0
ray_vllm_prefix_cache_hits_total{Component="core_worker",ReplicaId="b2",WorkerId="w2",engine="0",model_name="tiny"} 100.0
ray_vllm_prompt_tokens_cached_total{Component="core_worker",ReplicaId="a1",WorkerId="w1",engine="0",model_name="tiny"} 5.0
"""


def test_rays_exported_counters_are_read_summed_over_replicas() -> None:
    assert read_counters(RAY_PAGE) == {QUERIES: 2000.0, HITS: 1000.0}
    figures = level_hit_rate({QUERIES: 0.0, HITS: 0.0}, read_counters(RAY_PAGE), ["http://h:8090/metrics"])
    assert figures["hit_rate"] == 0.5 and figures["available"] is True


def test_a_page_with_both_families_is_read_once_under_vllms_own() -> None:
    both = RECORDED.read_text() + RAY_PAGE
    assert read_counters(both) == {QUERIES: 549273.0, HITS: 47024.0}
