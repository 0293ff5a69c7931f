"""The blueprint's model revision pinned to a commit, with the Hub's checksum of every file of it.

At a workload stack's first `up` (like the image digests, `digests.py`) the CLI asks the Hugging Face
Hub what ``model.revision`` (``main``, a tag, a commit) names now: ``GET {endpoint}/api/models/{id}/
revision/{revision}?blobs=true``, asked through huggingface_hub's ``HfApi.model_info(..., files_metadata=
True)`` (huggingface_hub 2.4.0, the version the serving locks pin:
``src/huggingface_hub/hf_api.py`` ``model_info``; error codes from ``utils/_http.py``
``hf_raise_for_status``). The answer's ``sha`` is the commit; each of its ``siblings`` carries
``lfs.sha256`` (a file stored in LFS) or ``blobId`` (the git blob id of any other file).

Both are recorded in the stack's state (`llmctl.state.StackPins.models`) and rendered: the workload's
blueprint names the commit (the mirror prefix, the mirror Job, each pod's download), and the serving
pods get the checksums in their own spec (``LLMCTL_MODEL_FILES``, `serving/model_files.py`), so a
file changed in the shared S3 mirror is refused however it got there. A later `up` keeps the
recorded commit without asking the Hub. A Hub that cannot be reached leaves the revision as written,
said in a note (the pods then download the branch and have no checksums to check); a model or
revision the Hub does not have is an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llmctl.blueprints import hub
from llmctl.blueprints.hub_names import is_path_id
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BadInput, PrerequisiteError
from llmctl.infra.workload.pins.mirror_formats import mirrored
from llmctl.state import ModelPin, load_pins, model_pin_key, save_pins

COMMIT = re.compile(r"^[0-9a-f]{40}$")
TIMEOUT_S = 20.0
#: the most bytes of checksums a pod's spec carries (one env value; Linux refuses a single
#: environment string over MAX_ARG_STRLEN = 32 pages, 128 KiB with 4 KiB pages, at exec:
#: include/uapi/linux/binfmts.h); a quarter of that is left for the name and later growth. Only the
#: files the mirror Job copies count: the spec carries no other file's checksum
MAX_FILES_BYTES = 96 * 1024


class HubUnreachable(Exception):
    """The Hub did not answer (network, proxy, offline mode, a server error)."""


def is_hub_id(model_id: str) -> bool:
    """Whether a blueprint's ``model.id`` names a Hub repository (not a path inside the image); the
    schema allows nothing else (`llmctl.blueprints.hub_names`)."""
    return not is_path_id(model_id)


def files_value(pin: ModelPin) -> str:
    """The ``LLMCTL_MODEL_FILES`` value of a pin: compact JSON, file name -> checksum, of the files the
    mirror Job copies (`mirror_formats.py`): the pods check no other file, and get none from the mirror."""
    return json.dumps(mirrored(pin.files), separators=(",", ":"))


def _checksums(siblings: Any) -> dict[str, str]:
    files: dict[str, str] = {}
    for sibling in siblings or []:
        if sibling.lfs is not None:
            files[sibling.rfilename] = f"sha256:{sibling.lfs.sha256}"
        elif sibling.blob_id:
            files[sibling.rfilename] = f"git-blob:{sibling.blob_id}"
    return files


def fetch_pin(model_id: str, revision: str, token: str | None) -> ModelPin:
    """The commit ``revision`` names and the checksum of each of its files, from the Hub, asked with
    huggingface_hub's own client (``HfApi.model_info(..., files_metadata=True)``).

    Raises HubUnreachable when the Hub does not answer, BadInput/PrerequisiteError when it answers
    that the model or revision is not there or not readable with this token.
    """
    if hub.offline():
        raise HubUnreachable(f"{hub.OFFLINE_ENV} is set")
    import httpx2  # huggingface_hub 2.x's HTTP client (huggingface_hub/utils/_http.py)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"model {model_id!r} revision {revision!r}"
    # token=False: never a token stored on this machine, only the one the workload is given
    api = HfApi(endpoint=hub.endpoint(), token=token or False)
    try:
        info = api.model_info(model_id, revision=revision, files_metadata=True, timeout=TIMEOUT_S)
    except RevisionNotFoundError:
        raise BadInput(
            f"the Hugging Face Hub has no revision {revision!r} of {model_id!r}",
            "set `model.revision` in the blueprint to a branch, tag or commit of the repository",
        ) from None
    except (GatedRepoError, RepositoryNotFoundError, HfHubHTTPError) as error:
        status = error.response.status_code if error.response is not None else None
        if isinstance(error, GatedRepoError) or status == 403:
            raise PrerequisiteError(
                f"the Hugging Face Hub refuses {where} to this token (gated: HTTP {status})",
                "accept the model's license on the Hub with the account of your HF token",
            ) from None
        if isinstance(error, RepositoryNotFoundError) or status in (401, 404):
            raise BadInput(
                f"the Hugging Face Hub has no model {model_id!r}, or it is private to another account "
                f"(HTTP {status})",
                "check `model.id` in the blueprint, or give a token that may read it (--hf-token-file, HF_TOKEN)",
            ) from None
        raise HubUnreachable(f"HTTP {status} from {hub.endpoint()}") from None
    except httpx2.HTTPError as error:  # no answer at all: DNS, refused, timeout, proxy
        raise HubUnreachable(f"{type(error).__name__}: {error}") from None
    if not isinstance(info.sha, str) or not COMMIT.match(info.sha):
        raise HubUnreachable(f"{hub.endpoint()} answered without a commit id")
    return ModelPin(commit=info.sha, files=_checksums(info.siblings))


def pin_model(
    blueprint: Blueprint,
    stack: str,
    token: str | None,
    *,
    note: Callable[[str], None] = lambda _text: None,
) -> ModelPin | None:
    """The stack's pin of the blueprint's model revision: the recorded one, else resolved at the Hub
    now and recorded; None (with a note) when the Hub cannot be reached and nothing was recorded."""
    model = blueprint.model
    if not is_hub_id(model.id):
        return None
    key = model_pin_key(model.id, model.revision)
    recorded = load_pins(stack, blueprint.name)
    if key in recorded.models:
        return recorded.models[key]
    try:
        pin = fetch_pin(model.id, model.revision, token)
    except HubUnreachable as why:
        note(
            f"    not pinned: {model.id} stays at revision {model.revision!r} and the pods get no checksums "
            f"of its files (could not reach the Hugging Face Hub: {why}); the next `up` pins it"
        )
        return None
    if blueprint.caches.model_mirror and len(files_value(pin)) > MAX_FILES_BYTES:
        raise PrerequisiteError(
            f"{model.id} has too many files the mirror copies ({len(mirrored(pin.files))}) for their "
            "checksums to go into the pods' spec",
            "turn the model mirror off (`caches.model_mirror: false`): the pods then download from the Hub",
        )
    save_pins(stack, blueprint.name, replace(recorded, models={**recorded.models, key: pin}))
    if pin.commit != model.revision:
        note(f"    pinned {model.id} revision {model.revision!r} to commit {pin.commit}")
    return pin


def recorded_model_pin(blueprint: Blueprint, stack: str) -> ModelPin | None:
    """The pin the stack recorded for the blueprint's model revision (for `render` and `plan`)."""
    return load_pins(stack, blueprint.name).models.get(
        model_pin_key(blueprint.model.id, blueprint.model.revision)
    )


def pinned_blueprint(blueprint: Blueprint, pin: ModelPin | None) -> Blueprint:
    """The blueprint with its model revision replaced by the pinned commit (unchanged without one)."""
    if pin is None or blueprint.model.revision == pin.commit:
        return blueprint
    return blueprint.model_copy(update={"model": blueprint.model.model_copy(update={"revision": pin.commit})})
