"""Where the Hugging Face Hub is and whether it may be asked, read from the environment at each call.

The same variables and values as huggingface_hub 2.4.0's ``constants.py`` (``HF_ENDPOINT``, default
``https://huggingface.co`` without a trailing slash; ``HF_HUB_OFFLINE`` true for 1/on/yes/true in
any case), which reads them once at import; llmctl reads them when it asks, so a variable set later
(a test, a long-lived process) still counts.
"""

from __future__ import annotations

import os

ENDPOINT_ENV = "HF_ENDPOINT"
DEFAULT_ENDPOINT = "https://huggingface.co"
OFFLINE_ENV = "HF_HUB_OFFLINE"
_TRUE = {"1", "on", "yes", "true"}  # huggingface_hub constants.ENV_VARS_TRUE_VALUES, lower case


def endpoint() -> str:
    """The Hub's base URL, without a trailing slash."""
    return (os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT).rstrip("/")


def offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` forbids asking the Hub."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE
