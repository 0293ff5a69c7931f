"""Secrets the CLI is given. The Hugging Face token for gated models: from `--hf-token-file`, else
`HF_TOKEN` (or the older `HUGGING_FACE_HUB_TOKEN`); the value is only handed on (to a Pulumi secret),
never printed. A client's API key: `--api-key-file`, else `--api-key` / `OPENAI_API_KEY` (a key in
argv is visible to every user of the machine in the process list)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llmctl.errors import PrerequisiteError

FLAG = "--hf-token-file"


def read_secret(path: Path, what: str, fix: str) -> str:
    """A secret from a file (stripped): an unreadable or empty file is a one-line error with `fix`."""
    try:
        value = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PrerequisiteError(
            f"cannot read the {what} file {path}: {getattr(exc, 'strerror', None) or exc}", fix
        ) from None
    if not value:
        raise PrerequisiteError(f"the {what} file {path} is empty", fix)
    return value


def hf_token(token_file: Path | None = None) -> str | None:
    """The token, or None when none is configured; a named file must exist and hold one."""
    if token_file is not None:
        return read_secret(
            token_file,
            "Hugging Face token",
            f"pass {FLAG} with a readable file that holds the token (hf_...), or set HF_TOKEN",
        )
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def api_key_from(api_key: str | None, key_file: Path | None) -> str | None:
    """The client's API key: `--api-key-file` (kept out of the process list) when given, else `api_key`
    (`--api-key` or `OPENAI_API_KEY`)."""
    if key_file is None:
        return api_key
    return read_secret(key_file, "API key", "pass --api-key-file with a readable file that holds the key")


def require_hf_token(blueprint: Any, token: str | None) -> None:
    """A gated model needs a token; PrerequisiteError (with how to get one) when there is none."""
    from llmctl.blueprints.rules import is_gated

    if is_gated(blueprint) and not token:
        raise PrerequisiteError(
            f"{blueprint.model.id} is gated on Hugging Face and no token was given",
            f"set HF_TOKEN or pass {FLAG} (accept the model's license on huggingface.co first)",
        )
