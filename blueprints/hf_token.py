"""The Hugging Face token for gated models: from `--hf-token-file`, else `HF_TOKEN` (or the older
`HUGGING_FACE_HUB_TOKEN`). The value is only handed on (to a Pulumi secret); it is never printed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llmctl.errors import PrerequisiteError

FLAG = "--hf-token-file"


def hf_token(token_file: Path | None = None) -> str | None:
    """The token, or None when none is configured; a named file must exist and hold one."""
    if token_file is not None:
        try:
            token = token_file.expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise PrerequisiteError(
                f"cannot read the Hugging Face token file {token_file}: {getattr(exc, 'strerror', None) or exc}",
                f"pass {FLAG} with a readable file that holds the token (hf_...), or set HF_TOKEN",
            ) from None
        if not token:
            raise PrerequisiteError(
                f"the Hugging Face token file {token_file} is empty",
                "write the token (hf_...) into it, or set HF_TOKEN",
            )
        return token
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def require_hf_token(blueprint: Any, token: str | None) -> None:
    """A gated model needs a token; PrerequisiteError (with how to get one) when there is none."""
    from llmctl.blueprints.rules import is_gated

    if is_gated(blueprint) and not token:
        raise PrerequisiteError(
            f"{blueprint.model.id} is gated on Hugging Face and no token was given",
            f"set HF_TOKEN or pass {FLAG} (accept the model's license on huggingface.co first)",
        )
