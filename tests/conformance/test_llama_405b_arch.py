"""The Llama 3.1 405B catalog row against Meta's own description of the checkpoint: meta-llama/llama-models
364ed4ec2bdc models/sku_list.py (`arch_args` of meta-llama/Llama-3.1-405B-Instruct, BF16, 8 shards) and
models/datatypes.py (`max_seq_length` of the llama3_1 family). Hugging Face's config.json of the model is
gated; it is these numbers in its names (hidden_size = dim, intermediate_size = Meta's FeedForward width)."""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

from upstream_files import upstream

from llmctl.blueprints.models import from_config, lookup_model

REPO = "meta-llama/Llama-3.1-405B-Instruct"


def _value(node: ast.expr, names: dict[str, Any]) -> Any:
    return names[node.id] if isinstance(node, ast.Name) else ast.literal_eval(node)


@functools.cache
def meta_arch_args(repo: str, variant: str | None) -> dict[str, Any]:
    """The `arch_args` of the `Model(...)` entry for one Hugging Face repository and variant (None: no
    `variant` given, as the FP8 entries have)."""
    tree = ast.parse(upstream("llama-models/sku_list.py").read_text())
    names = {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Model":
            kw = {k.arg: k.value for k in call.keywords}
            if (
                _value(kw["huggingface_repo"], names) == repo
                and (kw.get("variant") and _value(kw["variant"], names)) == variant
            ):
                args = kw["arch_args"]
                assert isinstance(args, ast.Dict)
                pairs = zip(args.keys, args.values, strict=True)
                return {_value(k, names): _value(v, names) for k, v in pairs if k is not None}
    raise AssertionError(f"no {repo} {variant} in sku_list.py")


def feed_forward_width(dim: int, multiplier: float, multiple_of: int) -> int:
    """models/llama3/reference_impl/model.py FeedForward: 2/3 of 4 x dim, times the multiplier,
    rounded up to a multiple of `multiple_of`."""
    hidden = int(multiplier * int(2 * (4 * dim) / 3))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def test_the_405b_row_is_metas_checkpoint() -> None:
    meta = meta_arch_args(REPO, "bf16-mp8")
    config = {
        "hidden_size": meta["dim"],
        "num_hidden_layers": meta["n_layers"],
        "num_attention_heads": meta["n_heads"],
        "num_key_value_heads": meta["n_kv_heads"],
        "vocab_size": meta["vocab_size"],
        "intermediate_size": feed_forward_width(meta["dim"], meta["ffn_dim_multiplier"], meta["multiple_of"]),
        "model_type": "llama",
        "tie_word_embeddings": False,  # the reference model's own `output` projection
    }
    assert config["intermediate_size"] == 53248
    assert (meta["rope_theta"], meta["use_scaled_rope"]) == (500000.0, True)
    derived = from_config(config, "llama-3.1-405b")
    row = lookup_model(REPO)
    assert (row.layers, row.hidden, row.heads, row.kv_heads, row.head_dim, row.vocab) == (
        derived.layers,
        derived.hidden,
        derived.heads,
        derived.kv_heads,
        derived.head_dim,
        derived.vocab,
    )
    assert round(derived.params_b, 3) == row.params_b
    datatypes = upstream("llama-models/datatypes.py").read_text()
    found = re.search(r"ModelFamily\.llama3_1, ModelFamily\.llama3_3\]:\s+return (\d+)", datatypes)
    assert found and int(found.group(1)) == row.max_context


def test_the_other_405b_checkpoints_share_the_instruct_numbers() -> None:
    """The base model and the FP8 one are the same network; only the 16-shard layout splits the KV heads."""
    instruct = meta_arch_args(REPO, "bf16-mp8")
    assert meta_arch_args("meta-llama/Llama-3.1-405B", "bf16-mp8") == instruct
    assert meta_arch_args("meta-llama/Llama-3.1-405B-Instruct-FP8", None) == instruct
    assert meta_arch_args(REPO, "bf16-mp16") == {**instruct, "n_kv_heads": 16}
