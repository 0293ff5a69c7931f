"""The tiny model's answers are random, but printable: a byte-level vocabulary has a token for every
byte, and random weights picked control bytes and pieces of multi-byte characters, so `llmctl chat`
showed `\\x1f`-style escapes and `�`. The model's generation config suppresses those tokens
(transformers' generate() reads it)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_tiny_model_never_generates_a_control_character(tiny_model: Path) -> None:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from llmctl.serving.client.tiny import control_tokens, is_control

    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_model)
    suppressed = model.generation_config.suppress_tokens
    assert suppressed and sorted(suppressed) == control_tokens(tokenizer)
    shown = [tokenizer.decode([token]) for token in suppressed]
    assert all(is_control(text) or "\ufffd" in text for text in shown)
    text = ""
    with torch.inference_mode():
        for prompt in ("hi", "tell me a story", "1 2 3"):
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            torch.manual_seed(0)
            for sampling in ({"do_sample": False}, {"do_sample": True, "temperature": 1.5, "top_k": 0}):
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=48, **sampling)
                text += tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    assert text and not is_control(text) and "\ufffd" not in text
