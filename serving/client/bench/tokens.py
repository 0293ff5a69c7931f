"""Token counting for prompts and, when the server sends no ``usage``, for responses.

Two counters share one small interface:

* :class:`HFTokenizer` wraps the model's own tokenizer (``transformers.AutoTokenizer``), used when
  ``--tokenizer PATH_OR_ID`` is given and ``transformers`` is importable. Counts are exact (chat
  template tokens aside: the server adds those, and its ``usage`` shows them).
* :class:`ApproxTokenizer` is the documented fallback: **one token per word or punctuation mark**
  (the regex ``\\w+|[^\\w\\s]``). Real BPE tokenizers produce about 1.3 tokens per English word, so
  with the approximation prompts come out longer on the server than asked for; the report says
  which counter was used and the server's ``usage`` shows the real size.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from llmctl.errors import LlmctlError, PrerequisiteError

_PIECE = re.compile(r"\s*(?:\w+|[^\w\s])")
_TOKEN = re.compile(r"\w+|[^\w\s]")

APPROX_NAME = "approx:words+punctuation"
APPROX_NOTE = (
    "approximate token counts: one token per word or punctuation mark "
    "(real tokenizers give ~1.3 per English word); pass --tokenizer for exact counts"
)


class Tokenizer(Protocol):
    """What the bench needs from a tokenizer."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...

    def encode(self, text: str) -> list[Any]: ...

    def decode(self, pieces: list[Any]) -> str: ...


class ApproxTokenizer:
    """One token per word or punctuation mark; pieces keep their leading whitespace."""

    name = APPROX_NAME
    exact = False

    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def encode(self, text: str) -> list[Any]:
        return list(_PIECE.findall(text))

    def decode(self, pieces: list[Any]) -> str:
        return "".join(map(str, pieces))


class HFTokenizer:
    """The model's own tokenizer from a local path or a Hugging Face model id."""

    exact = True

    def __init__(self, path_or_id: str) -> None:
        try:
            from transformers import AutoTokenizer
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise PrerequisiteError(
                "--tokenizer needs the 'transformers' package",
                "pip install transformers, or drop --tokenizer to use the approximate counter",
            ) from error
        try:
            self._tok: Any = AutoTokenizer.from_pretrained(path_or_id)
        except Exception as error:  # transformers raises many types (OSError, ValueError, HTTP errors)
            raise LlmctlError(
                f"cannot load tokenizer {path_or_id!r}: {error}",
                "give a local tokenizer folder or a Hugging Face model id you can download",
            ) from error
        self.name = f"hf:{path_or_id}"

    # verbose=False: the corpus is encoded whole, which is longer than the model's context, and
    # transformers would warn that such a sequence cannot be fed to the model (it never is).
    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False, verbose=False))

    def encode(self, text: str) -> list[Any]:
        return list(self._tok.encode(text, add_special_tokens=False, verbose=False))

    def decode(self, pieces: list[Any]) -> str:
        return str(self._tok.decode(pieces, skip_special_tokens=True))


def load_tokenizer(path_or_id: str | None) -> Tokenizer:
    """The model's tokenizer when one is named, otherwise the approximation."""
    if path_or_id:
        return HFTokenizer(path_or_id)
    return ApproxTokenizer()
