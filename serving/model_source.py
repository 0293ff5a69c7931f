"""Where a model is loaded from.

- :func:`resolve_model`: the local target's model (a local directory, or a hub id downloaded once).
- :func:`model_dir`: what a serving replica loads: an explicit directory, else the S3 mirror named by
  ``LLMCTL_MODEL_URI`` (synced once, :mod:`.model_mirror`), else the blueprint's hub snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BadInput, ServingError
from llmctl.serving.common.deps import require

_OFFLINE_HINT = "write a small model with `llmctl models tiny DIR` and pass `--model DIR` (any local model directory works)"


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~")) or value.count("/") > 1


def resolve_model(
    blueprint: Blueprint, model: str | None, *, on_progress: Callable[[str], None] | None = None
) -> tuple[str, str]:
    """(local directory, served model name) for ``model`` (a directory or hub id) or the blueprint's."""
    candidate = model or blueprint.model.id
    path = Path(candidate).expanduser()
    if path.exists():
        if not (path.is_dir() and (path / "config.json").is_file()):
            raise BadInput(f"{path} is not a model directory (no config.json)", _OFFLINE_HINT)
        return str(path.resolve()), path.resolve().name if model else blueprint.model.id
    if _looks_like_path(candidate):
        raise BadInput(f"model directory {candidate!r} does not exist", _OFFLINE_HINT)
    revision = blueprint.model.revision if candidate == blueprint.model.id else "main"
    if on_progress:
        on_progress(f"downloading {candidate} from the Hugging Face hub (cached after the first time)")
    return _download(candidate, revision), candidate


def model_dir(
    blueprint: Blueprint, model_path: str | None = None, *, on_progress: Callable[[str], None] | None = None
) -> str:
    """The local directory a serving replica loads the blueprint's weights and tokenizer from."""
    from llmctl.serving.model_mirror import mirror_uri, sync_model

    if model_path:
        if Path(model_path).is_dir():
            return model_path
        revision = blueprint.model.revision if model_path == blueprint.model.id else "main"
        return _download(model_path, revision)
    uri = mirror_uri()
    if uri:
        return sync_model(uri, on_progress=on_progress)
    return _download(blueprint.model.id, blueprint.model.revision)


def _download(repo_id: str, revision: str) -> str:
    hub = require("huggingface_hub")
    errors = require("huggingface_hub.errors")  # a submodule: not an attribute until imported
    try:
        return str(hub.snapshot_download(repo_id, revision=revision))
    except (errors.RepositoryNotFoundError, errors.RevisionNotFoundError) as error:
        raise ServingError(
            f"the Hugging Face hub has no model {repo_id!r} (revision {revision!r}): {_first_line(error)}",
            "check the model id, or " + _OFFLINE_HINT,
        ) from None
    except errors.GatedRepoError:
        raise ServingError(
            f"{repo_id!r} is gated on the Hugging Face hub",
            "accept its license on the hub and set HF_TOKEN, or " + _OFFLINE_HINT,
        ) from None
    except Exception as error:  # connection refused, DNS, timeouts, offline mode: the hub is unreachable
        raise ServingError(
            f"could not reach the Hugging Face hub to download {repo_id!r}: {_first_line(error)}",
            _OFFLINE_HINT,
        ) from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
