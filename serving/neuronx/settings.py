"""Neuron engine settings derived from a blueprint, and the split checkpoint saved once.

Nothing here needs Neuron hardware or transformers-neuronx, so it is unit tested.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from llmctl.blueprints.schema import Blueprint
from llmctl.serving.compile_cache import CompileKey, slug

DEFAULT_CACHE_ROOT = "/tmp/llmctl-neuron"
SPLIT_MARKER = ".llmctl-split-complete"
# transformers-neuronx compiles one graph per context-length bucket; more buckets mean a faster
# prefill for short prompts but a longer compile. Four is a common compromise.
MAX_BUCKETS = 4
MIN_BUCKET = 128
# blueprint dtype -> transformers-neuronx `amp`
AMP = {"bf16": "bf16", "fp16": "f16", "fp32": "f32", "int8": "bf16"}


def context_length_estimates(n_positions: int, max_new_tokens: int) -> list[int]:
    """Prompt-length buckets: powers of two up to the longest prompt that still leaves room to generate."""
    longest = max(MIN_BUCKET, n_positions - min(max_new_tokens, n_positions // 2))
    buckets = []
    size = MIN_BUCKET
    while size < longest:
        buckets.append(size)
        size *= 2
    buckets.append(longest)
    return buckets[-MAX_BUCKETS:]


@dataclass(frozen=True)
class NeuronSettings:
    """What LlamaForSampling is built with (:class:`CompileKey`), and where its artifacts live."""

    compile_key: CompileKey
    cache_root: Path
    compile_cache_url: str | None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def split_dir(self) -> Path:
        """Where the checkpoint split for transformers-neuronx is saved (once)."""
        key = self.compile_key
        return self.cache_root / "checkpoints" / f"{slug(key.model_id)}@{slug(key.revision)}-split"

    @property
    def dump_dir(self) -> Path:
        """``NEURONX_DUMP_TO``: transformers-neuronx's own compile cache (one sub-folder per HLO hash).

        Kept apart from :attr:`artifacts_dir`: it fills up while ``to_neuron()`` compiles, so sharing
        the folder would make a half-finished dump look like saved artifacts.
        """
        return self.cache_root / "neuronx-dump"

    @property
    def artifacts_dir(self) -> Path:
        """NEFFs saved by ``model.save()`` for exactly this configuration (:attr:`compile_key`);
        complete once ``compile_cache.COMPILED_MARKER`` is written after the save."""
        return self.cache_root / "compiled" / self.compile_key.name

    def sampling_kwargs(self) -> dict[str, object]:
        """Keyword arguments of ``LlamaForSampling.from_pretrained``."""
        key = self.compile_key
        return {
            "batch_size": key.batch_size,
            "tp_degree": key.tp_degree,
            "amp": key.amp,
            "n_positions": key.n_positions,
            "context_length_estimate": list(key.context_length_estimate),
        }


def compile_key(blueprint: Blueprint) -> CompileKey:
    """The compiled-graph configuration of a Neuron blueprint (both transformers-neuronx runtimes)."""
    n_positions = blueprint.model.max_context
    return CompileKey(
        model_id=blueprint.model.id,
        revision=blueprint.model.revision,
        tp_degree=blueprint.compute.tensor_parallel,
        amp=AMP[blueprint.model.dtype],
        batch_size=blueprint.model.batch_size,
        n_positions=n_positions,
        context_length_estimate=tuple(
            context_length_estimates(n_positions, blueprint.serving.max_new_tokens)
        ),
        neuron_sdk=blueprint.image.neuron_sdk,
    )


def neuron_settings(
    blueprint: Blueprint, *, cache_root: str | None = None, compile_cache_url: str | None = None
) -> NeuronSettings:
    """Settings of a Neuron blueprint.

    ``compile_cache_url`` (else ``$LLMCTL_COMPILE_CACHE_URL``) is the ``s3://bucket/prefix`` the
    compiled artifacts are shared through (:mod:`llmctl.serving.compile_cache`); None keeps them local.
    """
    from llmctl.serving.compile_cache import compile_cache_url as cache_url

    key = compile_key(blueprint)
    settings = NeuronSettings(
        compile_key=key,
        cache_root=Path(cache_root or os.environ.get("LLMCTL_NEURON_CACHE", DEFAULT_CACHE_ROOT)),
        compile_cache_url=cache_url(compile_cache_url),
    )
    env = {
        # transformers-neuronx: reuse compiled artifacts and dump them where the next start finds them
        "NEURONX_CACHE": "on",
        "NEURONX_DUMP_TO": str(settings.dump_dir),
        "NEURON_CC_FLAGS": "--model-type=transformer",
        "NEURON_RT_NUM_CORES": str(key.tp_degree),
    }
    return replace(settings, env=env)


def apply_env(settings: NeuronSettings, environ: dict[str, str] | None = None) -> None:
    """Set the Neuron environment (before transformers-neuronx is imported); keeps values already set."""
    target = os.environ if environ is None else environ
    for key, value in settings.env.items():
        target.setdefault(key, value)


def ensure_split(source: str, split_dir: Path, save: Callable[[str, Path], None]) -> bool:
    """Save the split checkpoint once: ``save(source, tmp)`` then an atomic rename and a marker.

    Returns True when it wrote the split, False when a complete one was already there. A split
    interrupted half way (no marker) is redone.
    """
    if (split_dir / SPLIT_MARKER).is_file():
        return False
    split_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=split_dir.name + ".", dir=split_dir.parent))
    try:
        save(source, tmp)
        (tmp / SPLIT_MARKER).write_text(source + "\n")
        if split_dir.exists():
            shutil.rmtree(split_dir)
        tmp.rename(split_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return True
