"""Which files of a model repository the model-mirror Job copies: one definition for the Job's script
(`builders/cache.py` puts :func:`select`'s source and the patterns into it) and for the CLI, which
renders into the serving pods' spec, and counts against their limit, the checksums of those files only.

Left out: dotfiles (``.gitattributes``), the formats no llmctl runtime loads (the original Meta
checkpoints, GGUF, ONNX, TensorFlow, Flax, ...), and the PyTorch pickles when the repository has
safetensors (which every runtime prefers). :func:`select` uses nothing but ``fnmatch``: the Job runs
it on a bare Python image.
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Iterable

NOT_LOADED = [
    "original/*", "*.pth", "*.gguf", "*.onnx", "*.onnx_data", "onnx/*", "*.h5", "*.msgpack",
    "*.ckpt", "*.tflite", "*.ot", "*.mlmodel", "coreml/*", "tf_model*", "flax_model*", "rust_model*",
]  # fmt: skip
PICKLES = ["*.bin", "*.pt"]


def select(names: Iterable[str]) -> list[str]:
    """The files a runtime loads, from the repository's file names."""
    kept = [n for n in names if not n.startswith(".") and not any(fnmatch.fnmatch(n, p) for p in NOT_LOADED)]
    if any(n.endswith(".safetensors") for n in kept):
        kept = [n for n in kept if not any(fnmatch.fnmatch(n, p) for p in PICKLES)]
    return sorted(kept)


def mirrored(files: dict[str, str]) -> dict[str, str]:
    """The entries of ``files`` (file name -> checksum) that the mirror Job copies."""
    return {name: files[name] for name in select(files)}


def script_source() -> str:
    """The patterns and :func:`select` as the Job's script defines them (it imports ``fnmatch``)."""
    return f"NOT_LOADED = {NOT_LOADED!r}\nPICKLES = {PICKLES!r}\n\n\n{inspect.getsource(select)}\n\n"
