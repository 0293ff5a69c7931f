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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.errors import BadInput
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


def build_tokenizer(vocab_size: int = 512, model_max_length: int = 2048) -> Any:
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
        model_max_length=model_max_length,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@dataclass(frozen=True)
class TinyShape:
    """The shape of the tiny model: small enough for a CPU, and servable by vLLM's GPU kernels when
    asked (``heads=8, kv_heads=8, head_dim=64``: vLLM's attention backends serve head sizes 64, 80,
    96, 112, 128 and 256, not the default's 16)."""

    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    max_position: int = 2048

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim

    def check(self, tensor_parallel: int = 1) -> None:
        """Refuse a shape no Llama (or no tensor-parallel split of it) can have, naming the fix."""
        defaults = TinyShape()
        for name in ("layers", "heads", "kv_heads", "head_dim", "max_position"):
            if getattr(self, name) < 1:
                flag = f"--{name.replace('_', '-')}"
                raise BadInput(f"{flag} must be at least 1", f"e.g. {flag} {getattr(defaults, name)}")
        if self.heads % self.kv_heads:
            raise BadInput(
                f"{self.heads} attention heads cannot share {self.kv_heads} key/value heads evenly",
                "give --kv-heads a divisor of --heads (e.g. --heads 8 --kv-heads 8)",
            )
        if tensor_parallel < 1 or self.heads % tensor_parallel or self.kv_heads % tensor_parallel:
            raise BadInput(
                f"tensor_parallel {tensor_parallel} must divide both --heads ({self.heads}) and --kv-heads "
                f"({self.kv_heads}): each GPU holds an equal share of the heads",
                f"e.g. --heads {8 * max(tensor_parallel, 1)} --kv-heads {8 * max(tensor_parallel, 1)}",
            )


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
    directory: str | Path,
    *,
    shape: TinyShape | None = None,
    tensor_parallel: int = 1,
    seed: int = 0,
) -> dict[str, Any]:
    """Write the model to ``directory`` (created; must be empty or absent); returns a summary.

    A directory that already holds a tiny model of the same shape written here is reused as it is
    (``reused`` is true), so scripts can run the same command twice; one of another shape is
    refused. ``tensor_parallel``: only checked (the heads must split evenly over that many GPUs).
    """
    shape = shape or TinyShape()
    shape.check(tensor_parallel)
    out = Path(directory).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out} is a file, not a directory", "pass a new or empty directory")
    marker = out / MARKER
    if marker.is_file():
        try:
            found = json.loads(marker.read_text())
        except (OSError, ValueError):
            found = None  # a damaged marker: treat as any other non-empty directory
        if isinstance(found, dict):
            if _shape_of(found) != _shape_fields(shape):
                raise BadInput(
                    f"{out} holds a tiny model of another shape ({_describe(_shape_of(found))})",
                    "pass a new or empty directory, or the same shape options as before",
                )
            return {**found, "path": str(out), "reused": True}
    if out.exists() and any(out.iterdir()):
        raise BadInput(f"{out} exists and is not an empty directory", "pass a new or empty directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(
            f"cannot create {out}: {exc.strerror or exc}", "pass a new or empty directory you can write to"
        ) from None
    torch = require("torch")
    transformers = require("transformers")
    tokenizer = build_tokenizer(model_max_length=shape.max_position)
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        intermediate_size=shape.hidden * 2,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        max_position_embeddings=shape.max_position,
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
    portable_tokenizer_config(out / "tokenizer_config.json")
    params = sum(t.numel() for t in model.parameters())
    summary = {
        "path": str(out),
        "parameters": int(params),
        "vocab_size": len(tokenizer),
        "hidden_size": shape.hidden,
        **_shape_fields(shape),
    }
    marker.write_text(json.dumps(summary))  # last: only a complete model is reused
    return {**summary, "reused": False}


def portable_tokenizer_config(path: Path) -> None:
    """Write the tokenizer config so that transformers 4 reads it too.

    transformers 5 saves ``tokenizer_class: TokenizersBackend``, a ``backend`` key and a list of
    ``extra_special_tokens``; transformers 4.57 (what vLLM 0.22.1, the Triton 26.06 image's, pins)
    knows none of them and cannot load the tokenizer (seen on the 2026-11-28 GPU run). The same
    tokenizer in 4's terms (``PreTrainedTokenizerFast``, ``additional_special_tokens``) loads in both.
    """
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config.pop("backend", None)
    extra = config.pop("extra_special_tokens", None)
    if isinstance(extra, list):
        config["additional_special_tokens"] = extra
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _shape_fields(shape: TinyShape) -> dict[str, int]:
    return {
        "layers": shape.layers,
        "heads": shape.heads,
        "kv_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "max_position": shape.max_position,
    }


def _shape_of(summary: dict[str, Any]) -> dict[str, int]:
    """The shape a marker records; a marker written before the shape options had the default's."""
    default = _shape_fields(TinyShape())
    return {name: int(summary.get(name, value)) for name, value in default.items()}


def _describe(fields: dict[str, int]) -> str:
    return ", ".join(f"{name.replace('_', '-')} {value}" for name, value in fields.items())
