"""Write a tiny random-weight Llama model with a real tokenizer and chat template (no network).

The tokenizer is a byte-level BPE trained in code on a generated corpus, so every input encodes;
the chat template is ChatML-like and ends turns with ``<|im_end|>`` (also the EOS token). The
model is a two-layer Llama with random weights: its output is noise, but every code path a real
checkpoint takes (config, safetensors, tokenizer files, chat template, generation config) is
exercised. The EOS row of the output head is zeroed so greedy decoding runs to ``max_tokens``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from llmctl.errors import ServingError
from llmctl.serving.common.deps import require

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<pad>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_WORDS = [
    "the",
    "a",
    "an",
    "model",
    "token",
    "serve",
    "request",
    "answer",
    "chat",
    "stream",
    "engine",
    "cluster",
    "node",
    "replica",
    "prompt",
    "context",
    "length",
    "batch",
    "latency",
    "throughput",
    "cache",
    "compile",
    "neuron",
    "core",
    "device",
    "memory",
    "weight",
    "layer",
    "head",
    "hello",
    "world",
    "what",
    "is",
    "data",
    "parallel",
    "tensor",
    "and",
    "or",
    "of",
    "to",
    "in",
    "on",
    "for",
    "with",
    "how",
    "many",
    "why",
    "when",
    "where",
    "this",
    "that",
    "you",
    "we",
    "they",
    "it",
    "run",
    "fast",
    "slow",
    "small",
    "large",
    "tiny",
    "random",
    "test",
    "ok",
    "yes",
    "no",
]


MARKER = "llmctl-tiny.json"  # written last; marks a complete tiny model


def _corpus() -> list[str]:
    lines = []
    for a, b, c in itertools.islice(itertools.product(_WORDS, repeat=3), 0, 6000, 7):
        lines.append(f"{a} {b} {c}, {c.capitalize()} {a}? {b}! 0123456789")
    return lines


def build_tokenizer(vocab_size: int = 512) -> Any:
    """A ``PreTrainedTokenizerFast`` (byte-level BPE) with the chat template set."""
    tokenizers = require("tokenizers")
    transformers = require("transformers")
    core = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        additional_special_tokens=["<|im_start|>", "</s>"],
        model_max_length=2048,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def is_control(text: str) -> bool:
    """Whether a text holds a control character a terminal would act on (newlines and tabs aside)."""
    return any(ch not in "\n\t" and (ord(ch) < 32 or 127 <= ord(ch) < 160) for ch in text)


def control_tokens(tokenizer: Any) -> list[int]:
    """The ids of the tokens that decode to a control character, or to a piece of a multi-byte
    character (alone it decodes to U+FFFD, shown as `�`), the special tokens aside."""
    special = set(tokenizer.all_special_ids)
    unprintable = (tokenizer.decode([i]) for i in range(len(tokenizer)))
    return [
        i for i, text in enumerate(unprintable) if i not in special and (is_control(text) or "\ufffd" in text)
    ]


def write_tiny_model(
    directory: str | Path, *, hidden: int = 64, layers: int = 2, seed: int = 0
) -> dict[str, Any]:
    """Write the model to ``directory`` (created; must be empty or absent); returns a summary.

    A directory that already holds a tiny model written here is reused as it is (``reused`` is
    true), so scripts can run the same command twice.
    """
    out = Path(directory).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise ServingError(f"{out} is a file, not a directory", "pass a new or empty directory")
    marker = out / MARKER
    if marker.is_file():
        try:
            return {**json.loads(marker.read_text()), "path": str(out), "reused": True}
        except (OSError, ValueError):
            pass  # a damaged marker: treat as any other non-empty directory
    if out.exists() and any(out.iterdir()):
        raise ServingError(f"{out} exists and is not an empty directory", "pass a new or empty directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServingError(
            f"cannot create {out}: {exc.strerror or exc}", "pass a new or empty directory you can write to"
        ) from None
    torch = require("torch")
    transformers = require("transformers")
    tokenizer = build_tokenizer()
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=0.2,
    )
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight[eos].zero_()
    model.generation_config = transformers.GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        # random weights pick any token, and a byte-level vocabulary has one per byte: never generate
        # the control bytes nor the pieces of multi-byte characters, so a chat shows words, not `\x1f`
        # escapes or `�` (generate() reads this config)
        suppress_tokens=control_tokens(tokenizer),
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    params = sum(t.numel() for t in model.parameters())
    summary = {
        "path": str(out),
        "parameters": int(params),
        "vocab_size": len(tokenizer),
        "layers": layers,
        "hidden_size": hidden,
    }
    marker.write_text(json.dumps(summary))  # last: only a complete model is reused
    return {**summary, "reused": False}
