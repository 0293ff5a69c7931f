"""llmctl: put an LLM behind an endpoint on EKS, and take it all down again."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("llmctl")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
