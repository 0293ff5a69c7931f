"""The model catalog: architecture numbers for memory sizing.

Models are found by catalog key, by Hugging Face id (aliases, case-insensitive), by a local
directory or ``config.json``, or, when the hub is reachable, by fetching a model's
``config.json``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from llmctl.blueprints import hub
from llmctl.blueprints._data import load_yaml
from llmctl.blueprints.schema import Dtype
from llmctl.errors import CatalogError, did_you_mean

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4, "int8": 1}
GB = 1e9


class ModelArch(BaseModel):
    """Architecture numbers of one model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="Catalog key, e.g. 'llama-2-13b'.")
    family: str = Field(description="Model family, e.g. 'llama'.")
    params_b: float = Field(gt=0, description="Parameters, billions.")
    layers: int = Field(ge=1, description="Transformer layers.")
    hidden: int = Field(ge=1, description="Hidden size.")
    heads: int = Field(ge=1, description="Attention heads.")
    kv_heads: int = Field(ge=1, description="Key/value heads (fewer than heads with GQA).")
    head_dim: int = Field(ge=1, description="Dimension per head.")
    vocab: int = Field(ge=1, description="Vocabulary size.")
    max_context: int = Field(ge=1, description="Longest context the model was trained for.")
    gated: bool = Field(False, description="Whether downloading needs an accepted license and a token.")
    aliases: list[str] = Field(default_factory=list, description="Hugging Face ids that resolve here.")

    def weights_gb(self, dtype: Dtype) -> float:
        """Weight memory in GB (1e9 bytes): parameters x bytes per parameter."""
        return self.params_b * DTYPE_BYTES[dtype]

    def kv_bytes_per_token(self, dtype: Dtype) -> int:
        """KV cache bytes per token: 2 (K and V) x layers x kv_heads x head_dim x bytes.

        int8 weights keep a 16-bit KV cache.
        """
        kv_bytes = 4 if dtype == "fp32" else 2
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes

    def kv_cache_gb(self, dtype: Dtype, context: int, batch: int, tp: int = 1) -> float:
        """KV cache for `batch` sequences of `context` tokens, in GB.

        With grouped-query attention, KV heads are replicated up to the tensor-parallel degree
        when tp exceeds them (8 KV heads at tp 24 -> 3x the cache).
        """
        replication = -(-tp // self.kv_heads) if tp > self.kv_heads else 1
        return self.kv_bytes_per_token(dtype) * context * batch * replication / GB


@functools.lru_cache(maxsize=1)
def catalog_models() -> dict[str, ModelArch]:
    """Every model in the shipped catalog, by key."""
    rows = load_yaml("data", "models.yaml")["models"]
    return {row["key"]: ModelArch.model_validate(row) for row in rows}


def _by_alias() -> dict[str, ModelArch]:
    found: dict[str, ModelArch] = {}
    for arch in catalog_models().values():
        found[arch.key.lower()] = arch
        for alias in arch.aliases:
            found[alias.lower()] = arch
    return found


def from_config(config: dict[str, Any], key: str) -> ModelArch:
    """Build architecture numbers from a Hugging Face ``config.json`` (Llama-style decoders)."""
    try:
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        vocab = int(config["vocab_size"])
        intermediate = int(config.get("intermediate_size", 4 * hidden))
    except (KeyError, TypeError, ValueError) as exc:
        raise CatalogError(
            f"config for {key!r} lacks decoder fields ({exc})",
            "pass a decoder-only transformer config with hidden_size, num_hidden_layers, "
            "num_attention_heads and vocab_size",
        ) from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    attn = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * intermediate
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    params = layers * (attn + mlp + 2 * hidden) + embeddings + hidden
    return ModelArch(
        key=key,
        family=str(config.get("model_type", "unknown")),
        params_b=params / 1e9,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        max_context=int(config.get("max_position_embeddings", 4096)),
        gated=False,
        aliases=[],
    )


def _from_local(path: Path) -> ModelArch:
    config_file = path / "config.json" if path.is_dir() else path
    if not config_file.exists():
        raise CatalogError(f"{path} has no config.json", "point at a model directory or its config.json")
    try:
        config = json.loads(config_file.read_text())
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{config_file} is not valid JSON: {exc}", "check the file") from None
    return from_config(config, key=str(path))


# One try with a short timeout: a machine without network fails at once with one line, instead of
# the hub client's retries (24 s of retry lines before the same answer).
HUB_TIMEOUT_S = 5.0


def _hub_failure(model_id: str, why: str) -> CatalogError:
    return CatalogError(
        f"model {model_id!r} is not in the catalog and its config.json could not be fetched "
        f"from the Hugging Face hub ({why})",
        "pass a local directory that holds the model's config.json, set HF_TOKEN for gated "
        "models, or use a catalog id (`llmctl catalog models`)",
    )


def _from_hub(model_id: str) -> ModelArch:
    """config.json from the local Hugging Face cache, else one GET to the hub (HF_ENDPOINT honoured)."""
    import os

    try:
        from huggingface_hub import hf_hub_download

        cached: str | None = hf_hub_download(model_id, "config.json", local_files_only=True)
    except Exception:  # not installed, not cached, or a malformed id: ask the hub once below
        cached = None
    if cached:
        return _from_local(Path(cached)).model_copy(update={"key": model_id})
    if hub.offline():
        raise _hub_failure(model_id, f"{hub.OFFLINE_ENV} is set and it is not in the local cache")
    import httpx

    endpoint = hub.endpoint()
    token = os.environ.get("HF_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        reply = httpx.get(
            f"{endpoint}/{model_id}/resolve/main/config.json",
            headers=headers,
            timeout=HUB_TIMEOUT_S,
            follow_redirects=True,
        )
    except httpx.HTTPError as exc:  # no network, DNS, timeout: one try
        raise _hub_failure(model_id, type(exc).__name__) from None
    if reply.status_code != 200:
        raise _hub_failure(model_id, f"HTTP {reply.status_code}")
    try:
        config = reply.json()
    except ValueError:
        raise _hub_failure(model_id, "the answer is not JSON") from None
    if not isinstance(config, dict):
        raise _hub_failure(model_id, "the answer is not a JSON object")
    return from_config(config, key=model_id)


def lookup_model(ref: str, *, allow_hub: bool = True) -> ModelArch:
    """Find a model by catalog key, Hugging Face id, local path, or (if reachable) the hub."""
    found = _by_alias().get(ref.lower())
    if found is not None:
        return found
    path = Path(ref).expanduser()
    if path.exists():
        return _from_local(path)
    if allow_hub and "/" in ref and not ref.startswith((".", "/")):
        return _from_hub(ref)
    names = list(catalog_models()) + [a for m in catalog_models().values() for a in m.aliases]
    suggestion = did_you_mean(ref, names)
    raise CatalogError(
        f"unknown model {ref!r}" + (f"; {suggestion}" if suggestion else ""),
        "use a catalog key or Hugging Face id (`llmctl catalog models`), or a local directory with a config.json",
    )
