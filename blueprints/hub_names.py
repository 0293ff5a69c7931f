"""The grammar of a blueprint's ``model.id`` and ``model.revision``, checked before anything is built.

Both flow into S3 keys (``models/<id>/<revision>/``), IAM policy ARNs (the mirror Job's and the serving
pods' grants, `infra/workload/access/bucket_grants.py`) and the pods' environment. IAM reads ``*`` and ``?``
in an ARN as wildcards and ``${...}`` as a policy variable, so an id or revision must never carry
them: ``id: "*"`` would give the mirror role Put/Delete on every model's mirror (issue 53, finding 4).

- A Hub repository id follows the Hub's own grammar, as huggingface_hub 2.4.0 checks it
  (``src/huggingface_hub/utils/_validators.py``, ``validate_repo_id`` and ``REPO_ID_REGEX``): ``name``
  or ``namespace/name``; each part 1 to 96 ASCII letters, digits, ``_``, ``-``, ``.``, starting and
  ending with a letter, digit or ``_``; no ``--`` or ``..``; not ending in ``.git``.
  `tests/foundation/test_hub_names.py` holds this function to that one over generated strings.
- A path inside the serving image or model mirror (an id starting with ``/`` or ``./``): segments of
  the same characters, no empty, ``.`` or ``..`` segment.
- A revision is a branch, a tag or a 40-hex commit: a git ref name (``git check-ref-format``'s rules:
  no ``..``, no component starting with ``.`` or ending in ``.lock``, not ending in ``.``, no empty
  component) in the subset of characters above plus ``/`` (the Hub's ``refs/pr/1``); no component
  starting with ``-``. A revision with ``/`` needs a namespaced id: ``gpt2`` at ``a/b`` and ``gpt2/a``
  at ``b`` would share the mirror prefix ``models/gpt2/a/b``.
"""

from __future__ import annotations

import re

#: one part of a Hub repository id (huggingface_hub REPO_ID_REGEX: ``\\b[\\w\\-.]{1,96}\\b``, ASCII)
_HUB_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+")
_REF_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MAX_REVISION = 255  # a ref name fits one file name on the Hub's git host (NAME_MAX)
MAX_PATH = 1024
#: what may reach an S3 key or IAM ARN from a model id or revision (no wildcard, no policy variable)
SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-/")


def is_path_id(model_id: str) -> bool:
    """Whether ``model.id`` names a path inside the serving image or mirror, not a Hub repository."""
    return model_id.startswith(("/", "./"))


def hub_id_problem(model_id: str) -> str | None:
    """Why ``model_id`` is not a Hugging Face Hub repository id, or None when it is one."""
    if model_id.count("/") > 1:
        return "a Hub id is 'name' or 'namespace/name' (at most one '/')"
    if not all(_HUB_PART.fullmatch(part) for part in model_id.split("/")):
        return (
            "each part of a Hub id is 1 to 96 of the characters A-Z a-z 0-9 _ - . and starts and ends "
            "with a letter, a digit or '_'"
        )
    if "--" in model_id or ".." in model_id:
        return "a Hub id may not contain '--' or '..'"
    if model_id.endswith(".git"):
        return "a Hub id may not end in '.git'"
    return None


def path_id_problem(model_id: str) -> str | None:
    """Why ``model_id`` (a path, `is_path_id`) is refused, or None."""
    body = model_id.removeprefix("./").removeprefix("/")
    segments = body.split("/")
    if len(model_id) > MAX_PATH or not body:
        return f"a path is 1 to {MAX_PATH} characters after its leading '/' or './'"
    if any(not _SEGMENT.fullmatch(s) or s in (".", "..") for s in segments):
        return "each segment of a path is made of A-Z a-z 0-9 _ - . and is neither empty, '.' nor '..'"
    return None


def model_id_problem(model_id: str) -> str | None:
    """Why ``model.id`` is refused (neither a Hub id nor an allowed path), or None."""
    return path_id_problem(model_id) if is_path_id(model_id) else hub_id_problem(model_id)


def revision_problem(revision: str, model_id: str) -> str | None:
    """Why ``model.revision`` is not a branch, tag or commit name llmctl accepts for ``model_id``, or None."""
    if not 1 <= len(revision) <= MAX_REVISION:
        return f"a revision is 1 to {MAX_REVISION} characters"
    components = revision.split("/")
    if not all(_REF_COMPONENT.fullmatch(c) for c in components):
        return (
            "a revision is a branch, a tag or a 40-hex commit: '/'-separated names of A-Z a-z 0-9 _ - . "
            "each starting with a letter, a digit or '_'"
        )
    if ".." in revision or revision.endswith(".") or any(c.endswith(".lock") for c in components):
        return "a git ref name may not contain '..', end in '.' or have a part ending in '.lock'"
    if len(components) > 1 and "/" not in model_id:
        return (
            "a revision with '/' needs a namespaced model id ('namespace/name'): the mirror prefix "
            "models/<id>/<revision> would be ambiguous"
        )
    return None
