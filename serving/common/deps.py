"""Lazy imports of optional serving packages, with an error that names what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from llmctl.errors import ServingError

#: from an llmctl checkout (or `pip install '<built wheel>[serving]'`): llmctl-eks is not on any index.
#: Plain pip takes PyPI's torch, the CUDA build with its nvidia-* packages (issue 54 item 8).
SERVING_EXTRA = (
    "run `make install` in the llmctl checkout (it installs the CPU build of torch), or install that "
    "torch first and then `pip install '.[serving]'` there (docs/getting-started.md, \"Without make\")"
)


def require(module: str, *, install: str = SERVING_EXTRA, purpose: str = "serving") -> ModuleType:
    """Import ``module`` or raise a ServingError that says which package provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ServingError(
            f"{purpose} needs the Python package {module.split('.')[0]!r}, which is not installed ({error})",
            f"install it with `{install}`" if install.startswith("pip ") else install,
        ) from None
