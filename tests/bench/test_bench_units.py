"""Metric definitions, SLO parsing, prompt building and URL handling, without a server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from llmctl.errors import EndpointError, LlmctlError
from llmctl.serving.client.bench.client import RequestRecord, chat_body, normalize_base_url
from llmctl.serving.client.bench.metrics import describe, parse_slo, quantile, request_metrics
from llmctl.serving.client.bench.prompts import PromptFactory
from llmctl.serving.client.bench.report import dump_rows, encode
from llmctl.serving.client.bench.tokens import ApproxTokenizer


def test_quantile_interpolates_linearly() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0], 0) == 1.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    assert math.isnan(quantile([], 50))
    stats = describe([3.0, 1.0, 2.0])
    assert stats["p50"] == 2.0 and stats["mean"] == 2.0 and stats["stddev"] == 1.0
    assert describe([])["count"] == 0 and describe([])["p50"] is None


def test_parse_slo() -> None:
    assert parse_slo("ttft=500ms, tpot=0.05,e2e=20s") == {"ttft": 0.5, "tpot": 0.05, "e2e": 20.0}
    assert parse_slo(None) == {}
    with pytest.raises(LlmctlError, match="unknown --slo metric"):
        parse_slo("ttfb=1")
    with pytest.raises(LlmctlError, match="bad --slo item"):
        parse_slo("ttft=fast")


def _record(times: list[float], texts: list[str], usage: int | None) -> RequestRecord:
    record = RequestRecord(index=0, endpoint="http://x/v1", start=10.0, end=10.0 + times[-1] + 0.001)
    record.chunk_times = [10.0 + t for t in times]
    record.chunk_texts = texts
    record.usage_completion_tokens = usage
    record.status = "ok"
    return record


def test_request_metrics_definitions() -> None:
    # first content at 100 ms, then chunks of 1, 2 and 1 tokens
    record = _record([0.1, 0.11, 0.13, 0.14], [" a", " b c", " d e", " f"], usage=6)
    row = request_metrics(record, ApproxTokenizer(), t0=10.0, slo={"ttft": 0.2, "tpot": 0.005})
    assert row["ttft_s"] == pytest.approx(0.1)
    assert row["e2e_s"] == pytest.approx(0.141)
    assert row["tpot_s"] == pytest.approx((0.141 - 0.1) / 5)
    # ITL: each gap divided by the tokens of the later chunk
    assert row["itl_s"] == pytest.approx([0.01 / 2, 0.02 / 2, 0.01 / 1])
    assert row["itl_weights"] == [2, 2, 1]
    assert row["inter_chunk_gaps_s"] == pytest.approx([0.01, 0.02, 0.01])
    assert row["output_token_source"] == "usage"
    assert row["meets_slo"] is False  # tpot 8.2 ms > 5 ms


def test_token_count_falls_back_to_the_tokenizer() -> None:
    record = _record([0.05, 0.06], [" hello", " world!"], usage=None)
    row = request_metrics(record, ApproxTokenizer(), t0=10.0)
    assert row["output_tokens"] == 3 and row["output_token_source"] == "tokenizer"


def test_prompts_have_the_requested_lengths_and_unique_nonces() -> None:
    tok = ApproxTokenizer()
    factory = PromptFactory(
        tok, mean_input_tokens=200, stddev_input_tokens=10, mean_output_tokens=50, stddev_output_tokens=5
    )
    specs = [factory.make(i) for i in range(200)]
    for spec in specs:
        assert tok.count(spec.text) == spec.input_tokens
    mean_in = sum(s.input_tokens for s in specs) / len(specs)
    mean_out = sum(s.max_tokens for s in specs) / len(specs)
    assert abs(mean_in - 200) < 3 and abs(mean_out - 50) < 2
    assert 3.5 < (sum((s.max_tokens - mean_out) ** 2 for s in specs) / 199) ** 0.5 < 6.5
    firsts = {s.text.split("]")[0] for s in specs}
    assert len(firsts) == len(specs)
    assert all(s.text.startswith(f"[{factory.nonce}-") for s in specs)
    # reproducible from the seed
    again = PromptFactory(tok, mean_input_tokens=200, stddev_input_tokens=10, nonce=factory.nonce)
    assert again.make(7).text == factory.make(7).text


def test_shared_prefix_prompts_start_alike() -> None:
    factory = PromptFactory(ApproxTokenizer(), mean_input_tokens=100, shared_prefix=True)
    a, b = factory.make(0).text, factory.make(1).text
    assert a[:200] == b[:200]


def test_normalize_base_url() -> None:
    assert normalize_base_url("localhost:8000") == "http://localhost:8000/v1"
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert normalize_base_url("https://h/v1/chat/completions") == "https://h/v1"
    assert normalize_base_url("http://h:8000/serve/v1") == "http://h:8000/serve/v1"
    with pytest.raises(EndpointError):
        normalize_base_url("ftp://h/v1")
    with pytest.raises(EndpointError):
        normalize_base_url("http://h:99999999/v1")


def test_chat_body_asks_for_usage_and_fixed_length() -> None:
    body = chat_body("m", "p", 12)
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["min_tokens"] == 12 and body["max_tokens"] == 12
    assert "ignore_eos" not in chat_body("m", "p", 12, fixed_output=False)


def test_output_lengths_are_capped_at_the_server_limit() -> None:
    from llmctl.serving.client.bench.tokens import ApproxTokenizer

    factory = PromptFactory(
        ApproxTokenizer(), mean_output_tokens=245, stddev_output_tokens=20, max_output_tokens=256
    )
    lengths = [factory.make(i).max_tokens for i in range(200)]
    assert max(lengths) == 256 and min(lengths) < 256  # the seed's 245 ± 20, cut at the limit


def test_a_deployed_blueprint_brings_its_output_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.serving.client.bench.options import resolve_endpoints
    from llmctl.state import Endpoint, save_endpoint

    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path))
    save_endpoint(
        Endpoint("dev", "tiny-cpu", "local", "http://127.0.0.1:9/v1", "m", extra={"max_new_tokens": "256"})
    )
    resolved = resolve_endpoints(None, "tiny-cpu", "dev")
    assert (
        resolved.urls == ["http://127.0.0.1:9/v1"]
        and resolved.model == "m"
        and resolved.max_output_tokens == 256
    )
    assert resolve_endpoints(["http://127.0.0.1:9/v1"], None, "dev").max_output_tokens is None


def test_a_named_workload_resolves_its_own_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--workload pr-42` reads the endpoint `up --stack ci --workload pr-42` recorded, not the
    environment's default workload of the same blueprint."""
    from llmctl.serving.client.bench.options import resolve_endpoints
    from llmctl.state import Endpoint, save_endpoint

    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path))
    save_endpoint(Endpoint("ci", "tiny-cpu", "eks", "http://127.0.0.1:9/v1", "main"))
    save_endpoint(Endpoint("ci", "tiny-cpu", "eks", "http://127.0.0.1:10/v1", "pr", workload="pr-42"))
    resolved = resolve_endpoints(None, "tiny-cpu", "ci", "pr-42")
    assert (resolved.urls, resolved.model) == (["http://127.0.0.1:10/v1"], "pr")
    assert resolve_endpoints(None, "tiny-cpu", "ci").model == "main"
    with pytest.raises(LlmctlError) as info:
        resolve_endpoints(None, "tiny-cpu", "ci", "pr-7")
    assert info.value.message == "blueprint 'tiny-cpu' is not deployed in stack 'ci' as workload 'pr-7'"
    assert "tiny-cpu (--workload pr-42)" in str(info.value.hint)
    with pytest.raises(LlmctlError) as info:
        resolve_endpoints(["http://127.0.0.1:9/v1"], None, "ci", "pr-42")
    assert info.value.message == "--workload needs --blueprint"


def test_result_files_write_non_finite_numbers_as_null_and_one_request_a_line(tmp_path: Path) -> None:
    rows = [{"index": 0, "ttft_s": 0.25, "itl_s": [0.5, float("nan")]}, {"index": 1, "ttft_s": float("inf")}]
    assert json.loads(encode({"a": float("-inf"), "b": [1.5]})) == {"a": None, "b": [1.5]}
    first, second = tmp_path / "requests.json", tmp_path / "copy.json"
    dump_rows([first, second], rows)
    text = first.read_text()
    assert text == second.read_text()
    assert json.loads(text) == [
        {"index": 0, "ttft_s": 0.25, "itl_s": [0.5, None]},
        {"index": 1, "ttft_s": None},
    ]
    assert text.splitlines()[1:3] == [
        encode({**rows[0], "itl_s": [0.5, None]}) + ",",
        encode({**rows[1], "ttft_s": None}),
    ]
    dump_rows([first], [])
    assert json.loads(first.read_text()) == []


def test_event_lines_are_what_the_json_encoder_writes_for_each_event() -> None:
    from llmctl.serving.client.bench.report import _event_lines

    record = RequestRecord(index=12, endpoint="http://x/v1", max_tokens=4)
    record.start, record.written, record.first_byte, record.end = 10.0, 10.001, 10.25, 10.75
    record.chunk_times = [10.3, 10.4 + 1e-9, 10.5, 10.6]
    record.chunk_texts = [' "quoted"', "\n\ttab", " caf\u00e9 \u2014 \U0001f600", "\\ back"]
    record.status, record.usage_completion_tokens = "ok", 4
    lines = _event_lines(record, 9.5)
    events = [json.loads(line) for line in lines]
    assert "".join(lines) == "".join(json.dumps(event) + "\n" for event in events)
    assert [e["event"] for e in events] == ["start", "written", "first_byte", *["chunk"] * 4, "end"]
    assert [e["text"] for e in events if e["event"] == "chunk"] == record.chunk_texts
    assert [e["t"] for e in events if e["event"] == "chunk"] == [t - 9.5 for t in record.chunk_times]
