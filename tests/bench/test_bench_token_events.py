"""What counts as a token: every channel a real server streams tokens in (issue 40).

On a real vLLM 0.26 server ``llmctl bench`` failed 5-10 % of good requests as ``empty_response`` and
put TTFT late: it counted only chunks with non-empty ``content``. vLLM streams ``"content": ""``
while a token is an incomplete UTF-8 sequence, and a reasoning model streams its reasoning in
``delta.reasoning`` (``reasoning_content`` before vLLM renamed it) before any content.

The payloads below are written as vLLM's pydantic models serialize them (``model_dump_json`` with
``exclude_unset=True``: compact JSON, only the fields its stream generator set):

* vLLM's current shapes: ``ChatCompletionStreamResponse`` / ``ChatCompletionResponseStreamChoice``
  in vllm/entrypoints/openai/chat_completion/protocol.py (commit d5dba2d7b0ab), ``DeltaMessage``
  (role, content, reasoning, tool_calls) in vllm/entrypoints/openai/engine/protocol.py (commit
  d7e52523a55c), streamed by ``chat_completion_stream_generator`` in
  vllm/entrypoints/openai/chat_completion/serving.py (commit 006c49d485f9): the role chunk
  ``DeltaMessage(role=role, content="")`` in the first engine iteration (the one that brings the
  first token), then one ``DeltaMessage(content=delta_text)`` per token (``token_ids`` set, so
  ``null``), the last with ``finish_reason`` and ``stop_reason``, then the usage chunk (also
  ``exclude_none``);
* vLLM before the rename: ``DeltaMessage.reasoning_content`` in vllm/entrypoints/openai/protocol.py
  (commit 0052bed36509; its stream choice has no ``token_ids``).

``vllm bench serve`` (vllm/benchmarks/lib/endpoint_request_func.py, commit 02cfb534df56,
``async_request_openai_chat_completions``) takes TTFT at the first chunk with any ``choices``,
which is the role chunk of the first token's iteration: the first token of any channel.
"""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from llmctl.serving.client.bench import report
from llmctl.serving.client.bench.client import RequestRecord, parse_stream
from llmctl.serving.client.bench.loadgen import LoadPlan
from llmctl.serving.client.bench.metrics import request_metrics, summarize
from llmctl.serving.client.bench.tokens import ApproxTokenizer

_HEAD = '{"id":"chatcmpl-7f3a","object":"chat.completion.chunk","created":1764291000,"model":"tiny-llama"'
ROLE = (
    _HEAD
    + ',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}'
)


def token(delta: str, finish: str | None = None) -> str:
    """One token's chunk as vLLM's current stream generator serializes it (``delta`` is the
    DeltaMessage's JSON)."""
    if finish is None:
        return (
            _HEAD
            + f',"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":null,"token_ids":null}}]}}'
        )
    return (
        _HEAD + f',"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":"{finish}",'
        '"stop_reason":null,"token_ids":null}]}'
    )


def old_token(delta: str, finish: str | None = None) -> str:
    """One token's chunk as vLLM before the rename serialized it (no ``token_ids``)."""
    reason = "null" if finish is None else f'"{finish}"'
    tail = "" if finish is None else ',"stop_reason":null'
    return (
        _HEAD + f',"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{reason}{tail}}}]}}'
    )


def usage(prompt: int, completion: int) -> str:
    return (
        _HEAD + f',"choices":[],"usage":{{"prompt_tokens":{prompt},"total_tokens":{prompt + completion},'
        f'"completion_tokens":{completion}}}}}'
    )


def _parsed(*events: tuple[float, str]) -> RequestRecord:
    raw = [(when, f"data: {payload}\n\n".encode()) for when, payload in events]
    record = RequestRecord(index=0, endpoint="http://x/v1", status="received", raw=raw, written=0.5)
    parse_stream(record)
    return record


def test_an_empty_content_delta_after_the_role_chunk_is_the_first_token() -> None:
    # the first token is an incomplete UTF-8 sequence ("é" is two bytes over two tokens): vLLM sends
    # the role chunk and the token's empty content in the same engine iteration
    record = _parsed(
        (1.0, ROLE),
        (1.0, token('{"content":""}')),
        (2.0, token('{"content":"é"}')),
        (3.0, token('{"content":"!"}', "length")),
        (3.0, usage(7, 3)),
        (3.0, "[DONE]"),
    )
    assert record.ok
    assert record.chunk_times == [1.0, 2.0, 3.0] and record.chunk_texts == ["", "é", "!"]
    assert record.first_answer == 2.0
    row = request_metrics(record, ApproxTokenizer(), 0.0)
    assert row["ttft_s"] == 0.5 and row["ttft_answer_s"] == 1.5
    # one token a chunk: every gap is one inter-token latency
    assert row["output_tokens"] == 3 and row["itl_weights"] == [1, 1] and row["itl_s"] == [1.0, 1.0]


def test_a_stream_of_empty_deltas_that_finishes_with_usage_is_not_an_empty_response() -> None:
    record = _parsed(
        (1.0, ROLE),
        (1.0, token('{"content":""}')),
        (2.0, token('{"content":""}', "stop")),
        (2.0, usage(7, 2)),
        (2.0, "[DONE]"),
    )
    assert record.ok and record.chunk_times == [1.0, 2.0] and record.first_answer is None
    row = request_metrics(record, ApproxTokenizer(), 0.0)
    assert row["ttft_s"] == 0.5 and row["ttft_answer_s"] is None and row["output_tokens"] == 2
    # what stays a failure: a stream with the role chunk alone, no finish reason, no usage tokens
    empty = _parsed((1.0, ROLE), (2.0, "[DONE]"))
    assert empty.error_type == "empty_response" and empty.chunk_times == []


def test_a_finish_reason_with_an_empty_delta_and_no_usage_is_a_completed_answer() -> None:
    # a reasoning parser's last control token: DeltaMessage() at the finish, serialized as {}
    record = _parsed((1.0, ROLE), (2.0, token("{}", "stop")), (2.0, "[DONE]"))
    assert record.ok and record.finish_reason == "stop" and record.chunk_times == []
    # a server that writes the unset fields as null (not vLLM: it leaves them out) sends no token
    nulls = _parsed((1.0, ROLE), (2.0, token('{"content":null,"tool_calls":null}', "stop")), (2.0, "[DONE]"))
    assert nulls.ok and nulls.chunk_times == []


@pytest.mark.parametrize(
    ("make", "field"),
    [(token, "reasoning"), (old_token, "reasoning_content")],
    ids=["vllm-current-reasoning", "vllm-before-rename-reasoning_content"],
)
def test_reasoning_tokens_count_for_ttft_and_output_and_the_answer_is_timed_apart(
    make: Any, field: str
) -> None:
    record = _parsed(
        (1.0, ROLE),
        (1.0, make(f'{{"{field}":" Let"}}')),
        (1.1, make(f'{{"{field}":" me"}}')),
        (1.2, make(f'{{"{field}":" think"}}')),
        (1.3, make('{"content":" Paris"}')),
        (1.4, make('{"content":" it"}')),
        (1.5, make('{"content":" is"}', "length")),
        (1.5, "[DONE]"),  # no usage: the tokenizer counts
    )
    assert record.ok and len(record.chunk_times) == 6 and record.first_answer == 1.3
    row = request_metrics(record, ApproxTokenizer(), 0.0)
    assert row["ttft_s"] == 0.5 and row["ttft_answer_s"] == pytest.approx(0.8)
    # the reasoning is output: the tokenizer counts it beside the answer, as the server's usage does
    assert row["output_token_source"] == "tokenizer" and row["output_tokens"] == 6
    assert row["chunks"] == 6 and row["itl_weights"] == [1] * 5


def test_tool_call_deltas_and_completions_text_are_tokens() -> None:
    call = '{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": "}}]}'
    record = _parsed(
        (1.0, ROLE), (2.0, token(call)), (3.0, token('{"content":""}', "tool_calls")), (3.0, "[DONE]")
    )
    assert record.ok and record.chunk_times == [2.0, 3.0] and record.first_answer is None
    # completions (vllm/entrypoints/openai/completion/protocol.py: CompletionResponseStreamChoice,
    # text always set): an empty text is a token too
    completion = (
        '{{"id":"cmpl-1","object":"text_completion","created":1764291000,"model":"tiny-llama",'
        '"choices":[{{"index":0,"text":"{}","logprobs":null,"finish_reason":{}}}]}}'
    )
    text = _parsed(
        (1.0, completion.format("", "null")), (2.0, completion.format("ok", '"length"')), (2.0, "[DONE]")
    )
    assert text.ok and text.chunk_times == [1.0, 2.0] and text.first_answer == 2.0


# --- live: the recording server in each of the real servers' ways ------------------------------------

TTFT = 0.040
TPOT = 0.010
LOWER_SLACK = 0.002  # as in test_bench_timing.py: the server's timer lead (<= 1 ms) and clock reads
UPPER_SLACK = 10.0  # as in test_bench_timing.py: catches a hang or a systematic error, not a busy machine
OUT = 12


@pytest.mark.parametrize(
    "mode",
    [
        {"role_with_first_token": 1, "empty_every": 3},
        {"reasoning_tokens": 5, "reasoning_field": "reasoning"},
        {
            "reasoning_tokens": 5,
            "reasoning_field": "reasoning_content",
            "role_with_first_token": 1,
            "empty_every": 4,
        },
    ],
    ids=["vllm-role-with-first-token-and-empty-deltas", "reasoning", "reasoning_content-and-empty-deltas"],
)
def test_bench_against_a_server_streaming_like_vllm(
    fake: Any, run_plan: Any, make_prompts: Any, mode: dict[str, Any]
) -> None:
    from llmctl.serving.client.bench.testserver import full_timeline

    url = fake(ttft=TTFT, tpot=TPOT, **mode)
    plan = LoadPlan(endpoints=[url], model="fake-model", concurrency=4, requests=12, warmup=2)
    result = run_plan(plan, make_prompts(mean_out=OUT, std_out=0))
    summary, rows = summarize(result, ApproxTokenizer())
    assert summary["counts"]["failed"] == 0 and summary["counts"]["completed"] == 12
    thinking = mode.get("reasoning_tokens", 0)
    # the first answer chunk: the first after the reasoning that is not an empty (incomplete UTF-8) one
    every = mode.get("empty_every", 0)
    answer_chunk = thinking + 1 if every and thinking % every == 0 else thinking
    served = {s[4]: s for s in full_timeline(url) if s[0] >= result.t0}
    by_index = {record.index: record for record in result.records}
    for row in rows:
        # every token is an event, reasoning ones included; the usage counts them all
        assert row["output_token_source"] == "usage" and row["output_tokens"] == OUT == row["chunks"]
        assert row["itl_weights"] == [1] * (OUT - 1)
        read, first, _last, tokens, _index, first_answer = served[row["index"]]
        record = by_index[row["index"]]
        assert tokens == OUT
        # TTFT is the server's first token of any channel: never before the server sent it, and
        # never below the schedule's TTFT
        assert record.chunk_times[0] >= first and row["ttft_s"] >= first - read - 1e-9
        assert TTFT - LOWER_SLACK <= row["ttft_s"] <= TTFT + UPPER_SLACK
        # the answer starts after the reasoning tokens' time, at the server and at the client
        # (the schedule counts from the read: a late first token does not delay the ones after it)
        assert first_answer - read >= TTFT + answer_chunk * TPOT - LOWER_SLACK and first_answer > first
        assert record.first_answer is not None and record.first_answer >= first_answer
        answer_due = TTFT + answer_chunk * TPOT
        assert answer_due - LOWER_SLACK <= row["ttft_answer_s"] <= answer_due + UPPER_SLACK
    assert summary["metrics"]["ttft_answer_s"]["count"] == 12
    if thinking:
        assert summary["metrics"]["ttft_answer_s"]["p50"] > summary["metrics"]["ttft_s"]["p50"]
    # the level's table shows the first answer token where it is not the first token; a sweep keeps it
    console = Console(record=True, width=200)
    report.render_level(console, summary, definitions=False)
    assert ("first answer token (ms)" in console.export_text()) == (answer_chunk > 0)
    assert report.sweep_entry(summary)["ttft_answer_s_p50"] == summary["metrics"]["ttft_answer_s"]["p50"]
