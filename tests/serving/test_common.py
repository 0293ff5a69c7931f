"""The shared OpenAI layer: stop sequences, decoding, limits, and the routes on the real CPU engine."""

from __future__ import annotations

import httpx
import pytest

from llmctl.serving.common.api import build_app
from llmctl.serving.common.decode import IncrementalDecoder
from llmctl.serving.common.limits import Limits
from llmctl.serving.common.protocol import APIError
from llmctl.serving.common.stop import StopMatcher


def test_stop_matcher_holds_back_a_partial_match_and_cuts_at_the_stop() -> None:
    matcher = StopMatcher(["END"])
    assert matcher.feed("abc E") == "abc "
    assert matcher.feed("N") == ""
    assert matcher.feed("Dxyz") == ""
    assert matcher.stopped


def test_stop_matcher_releases_a_false_alarm() -> None:
    matcher = StopMatcher(["END"])
    assert matcher.feed("E") == ""
    assert matcher.feed("x") == "Ex"
    assert matcher.feed("EN") == ""
    assert matcher.flush() == "EN"
    assert not matcher.stopped


def test_limits_give_clear_errors() -> None:
    limits = Limits(max_context=100, max_new_tokens=20)
    assert limits.max_tokens(None, 90) == 10
    assert limits.max_tokens(None, 10) == 20
    with pytest.raises(APIError, match="at least 1") as low:
        limits.max_tokens(-5, 10)
    assert low.value.status == 400
    with pytest.raises(APIError, match="at most 20"):
        limits.max_tokens(21, 10)
    with pytest.raises(APIError, match="maximum context length is 100") as long:
        limits.max_tokens(None, 100)
    assert long.value.code == "context_length_exceeded"
    with pytest.raises(APIError, match="lower max_tokens to 5"):
        limits.max_tokens(10, 95)


def test_incremental_decoding_matches_a_full_decode(engine) -> None:  # type: ignore[no-untyped-def]
    ids = engine.encode("héllo wörld, data parallel ✓ tensor")
    decoder = IncrementalDecoder(engine.tokenizer)
    text = "".join(decoder.push(i) for i in ids) + decoder.flush()
    assert text == engine.tokenizer.decode(ids, skip_special_tokens=True)


def test_chat_template_renders_the_conversation(engine) -> None:  # type: ignore[no-untyped-def]
    ids = engine.chat_prompt([{"role": "user", "content": "hi"}])
    text = engine.tokenizer.decode(ids)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


async def test_routes_stop_sequences_and_errors(engine) -> None:  # type: ignore[no-untyped-def]
    app = build_app(engine, Limits(max_context=256, max_new_tokens=32))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        base = {"model": "tiny", "prompt": "hello", "max_tokens": 12, "temperature": 0}
        full = (await client.post("/v1/completions", json=base)).json()["choices"][0]["text"]
        assert len(full) > 3
        stop = full[2:4]
        cut = (await client.post("/v1/completions", json={**base, "stop": [stop]})).json()["choices"][0]
        assert cut["finish_reason"] == "stop" and cut["text"] == full[: full.index(stop)]

        bad = await client.post("/v1/chat/completions", json={"model": "tiny", "messages": []})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "messages"
        too_many = await client.post("/v1/completions", json={**base, "stop": ["a", "b", "c", "d", "e"]})
        assert too_many.status_code == 400 and "at most 4" in too_many.json()["error"]["message"]
        n2 = await client.post("/v1/completions", json={**base, "n": 2})
        assert n2.status_code == 400

        stream = await client.post("/v1/completions", json={**base, "stream": True})
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.text.rstrip().endswith("data: [DONE]")
        assert (await client.get("/healthz")).json() == {"status": "ok", "model": "tiny"}
