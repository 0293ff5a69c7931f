"""llmctl: put an LLM behind an endpoint on EKS, and take it all down again."""

from importlib.metadata import PackageNotFoundError, version

#: The distribution name on the package index (`pip install llmctl-eks`). The command and the
#: import package stay `llmctl`; the bare name `llmctl` on PyPI belongs to another project.
DISTRIBUTION = "llmctl-eks"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["DISTRIBUTION", "__version__"]
