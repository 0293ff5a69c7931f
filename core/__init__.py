"""llmctl: put an LLM behind an endpoint on EKS, and take it all down again."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

#: The distribution name on the package index (`pip install llmctl-eks`). The command and the
#: import package stay `llmctl`; the bare name `llmctl` on PyPI belongs to another project.
DISTRIBUTION = "llmctl-eks"

if TYPE_CHECKING:
    __version__: str


@cache
def _installed_version() -> str:
    # importlib.metadata costs tens of milliseconds: read only when asked (`--version`, plans,
    # delivery), never on the start-up path of every command.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> str:
    """`llmctl.__version__`, read from the installed distribution on first use."""
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DISTRIBUTION", "__version__"]
