"""Where llmctl keeps its local state, and the registry of deployed endpoints.

Paths follow the XDG base directory spec: ``$XDG_STATE_HOME/llmctl`` (default
``~/.local/state/llmctl``); ``LLMCTL_STATE_DIR`` overrides it (tests and CI use this).

The endpoint registry is how `llmctl chat`, `llmctl bench` and `llmctl connect` find what
`llmctl up` deployed: one JSON file per (stack, blueprint) (per (stack, workload, blueprint) for a
named workload, `up --workload`), written when a deployment becomes ready and removed by `llmctl down`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmctl.errors import BadInput, LlmctlError, NotDeployed

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def state_dir() -> Path:
    """The root of llmctl's local state (created on first use, user-only permissions)."""
    override = os.environ.get("LLMCTL_STATE_DIR")
    if override:
        root = Path(override)
    else:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        root = Path(base) / "llmctl"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


def check_name(kind: str, value: str) -> str:
    """``value`` if it is safe as one path component (a stack or blueprint name), else LlmctlError."""
    if not _SAFE.match(value):
        raise BadInput(
            f"invalid {kind} name {value!r}",
            "use letters, digits, '.', '_' or '-' (at most 63 characters, starting with a letter or digit)",
        )
    return value


@dataclass(frozen=True)
class Endpoint:
    """A deployed, reachable serving endpoint."""

    stack: str
    blueprint: str
    target: str
    base_url: str
    model: str
    dashboard_url: str | None = None
    ui_url: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    workload: str | None = None  # a named workload of the environment (`up --workload pr-42`)


def _endpoint_path(stack: str, blueprint: str, workload: str | None = None) -> Path:
    folder = state_dir() / "endpoints" / check_name("stack", stack)
    if workload:
        folder = folder / check_name("workload", workload)
    return folder / f"{check_name('blueprint', blueprint)}.json"


def save_endpoint(endpoint: Endpoint) -> Path:
    """Record an endpoint (atomically) so other commands can find it."""
    path = _endpoint_path(endpoint.stack, endpoint.blueprint, endpoint.workload)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(endpoint), indent=2))
    tmp.replace(path)
    return path


def _last_up_path(stack: str, blueprint: str, workload: str | None) -> Path:
    folder = state_dir() / "last-up" / check_name("stack", stack)
    if workload:
        folder = folder / check_name("workload", workload)
    return folder / f"{check_name('blueprint', blueprint)}.txt"


def remember_up(stack: str, blueprint: str, workload: str | None, command: str) -> None:
    """Keep the `llmctl up` command line last used for a blueprint (its target and flags): hints
    repeat it, after a `down` too."""
    path = _last_up_path(stack, blueprint, workload)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(command + "\n", encoding="utf-8")


def last_up(stack: str, blueprint: str, workload: str | None = None) -> str | None:
    """The `llmctl up` command line last used for a blueprint, or None."""
    path = _last_up_path(stack, blueprint, workload)
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def last_up_commands(stack: str) -> list[str]:
    """Every `llmctl up` command line that ran in a stack (each blueprint's last, named workloads
    included), kept after `down` too."""
    folder = state_dir() / "last-up" / check_name("stack", stack)
    return [path.read_text(encoding="utf-8").strip() for path in sorted(folder.rglob("*.txt"))]


def recorded_targets(stack: str, blueprint: str | None = None) -> set[str]:
    """The targets the stack's recorded endpoints (of one blueprint, if given) run on."""
    return {e.target for e in list_endpoints(stack) if blueprint is None or e.blueprint == blueprint}


def recorded_blueprints() -> set[str]:
    """Every blueprint name this machine has a record of, in any stack: a recorded endpoint, or the
    `llmctl up` that ran for it."""
    names = {e.blueprint for e in list_endpoints()}
    names.update(path.stem for path in (state_dir() / "last-up").rglob("*.txt"))
    return names


def load_endpoint(stack: str, blueprint: str, workload: str | None = None) -> Endpoint:
    """The endpoint of a deployed blueprint, or an error that says how to deploy it."""
    path = _endpoint_path(stack, blueprint, workload)
    if not path.exists():
        known = [
            e.blueprint + (f" (--workload {e.workload})" if e.workload else "") for e in list_endpoints(stack)
        ]
        flag = f" --workload {workload}" if workload else ""
        # the `up` that was used last for it (its target and flags), else the plain one
        command = (
            last_up(stack, blueprint, workload) or f"llmctl up --blueprint {blueprint} --stack {stack}{flag}"
        )
        hint = f"run `{command}` first"
        if known:
            hint += f"; deployed in stack {stack!r}: {', '.join(sorted(known))}"
        where = f"stack {stack!r}" + (f" as workload {workload!r}" if workload else "")
        raise NotDeployed(f"blueprint {blueprint!r} is not deployed in {where}", hint)
    return _read_endpoint(path)


def _read_endpoint(path: Path) -> Endpoint:
    """One registry file as an Endpoint; a clear error (not a traceback) when it is damaged."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Endpoint(**data)
    except (OSError, ValueError, TypeError) as exc:
        raise LlmctlError(
            f"the endpoint record {path} is damaged ({type(exc).__name__}: {exc})",
            f"delete {path} and run `llmctl up` again to record the endpoint",
        ) from None


def list_endpoints(stack: str | None = None) -> list[Endpoint]:
    """Every recorded endpoint, optionally of one stack."""
    root = state_dir() / "endpoints"
    if not root.exists():
        return []
    stacks = [root / check_name("stack", stack)] if stack else sorted(p for p in root.iterdir() if p.is_dir())
    found: list[Endpoint] = []
    for folder in stacks:  # the default workloads, then each named workload's folder
        for file in (
            [*sorted(folder.glob("*.json")), *sorted(folder.glob("*/*.json"))] if folder.exists() else []
        ):
            found.append(_read_endpoint(file))
    return found


def remove_endpoint(stack: str, blueprint: str, workload: str | None = None) -> bool:
    """Forget an endpoint; True when one was recorded."""
    path = _endpoint_path(stack, blueprint, workload)
    if path.exists():
        path.unlink()
        return True
    return False


# --- what a workload stack's first `up` pinned -------------------------------------------------


@dataclass(frozen=True)
class ModelPin:
    """A model revision (a branch, tag or commit) resolved at the Hugging Face Hub: the commit it named
    and each file of that commit with the checksum the Hub reports (``sha256:<hex>`` of an LFS file,
    ``git-blob:<sha1>`` of any other)."""

    commit: str
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StackPins:
    """What a workload stack pinned at its first `up` (or `llmctl images pin`): each image tag its pods
    run, by the digest the registry named then, each wheel outside its runtime's lock (a CPU torch and
    what it needs) by the sha256 of the file downloaded then, and the model revision by the commit the
    Hub named then (keyed ``<model id>@<revision>``)."""

    images: dict[str, str] = field(default_factory=dict)  # image as named (a tag) -> sha256:...
    wheels: dict[str, str] = field(default_factory=dict)  # wheel file name -> sha256 hex
    models: dict[str, ModelPin] = field(default_factory=dict)  # "<id>@<revision>" -> its commit and files


def model_pin_key(model_id: str, revision: str) -> str:
    """The key of a model revision in :attr:`StackPins.models`."""
    return f"{model_id}@{revision}"


def _model_pins(raw: object) -> dict[str, ModelPin]:
    if not isinstance(raw, dict):
        raise TypeError("models is not a mapping")
    pins = {}
    for key, value in raw.items():
        files = dict(value.get("files") or {})
        if not isinstance(value.get("commit"), str) or not all(isinstance(v, str) for v in files.values()):
            raise TypeError(f"the model pin {key} is not a commit and file checksums")
        pins[str(key)] = ModelPin(commit=value["commit"], files=files)
    return pins


def pins_to_json(pins: StackPins) -> dict[str, Any]:
    """The pins as JSON data (the record file, the workload stack's `llmctl_pins` output)."""
    return {
        "images": dict(sorted(pins.images.items())),
        "wheels": dict(sorted(pins.wheels.items())),
        "models": {key: asdict(pin) for key, pin in sorted(pins.models.items())},
    }


def pins_from_json(data: Any) -> StackPins:
    """The pins of :func:`pins_to_json`'s data (TypeError/AttributeError when it is not that shape)."""
    return StackPins(
        images=dict(data.get("images") or {}),
        wheels=dict(data.get("wheels") or {}),
        models=_model_pins(data.get("models") or {}),
    )


def pins_path(stack: str, blueprint: str) -> Path:
    """The record of a workload stack (`dev`, or `ci.pr-42` for a named workload) of one blueprint."""
    return state_dir() / "pins" / check_name("stack", stack) / f"{check_name('blueprint', blueprint)}.json"


def load_pins(stack: str, blueprint: str) -> StackPins:
    """The stack's pins (empty when nothing was pinned yet); a clear error when the file is damaged."""
    path = pins_path(stack, blueprint)
    if not path.exists():
        return StackPins()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        pins = pins_from_json(data)
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise LlmctlError(
            f"the pin record {path} is damaged ({type(exc).__name__}: {exc})",
            f"delete {path} and run `llmctl images pin -b {blueprint}` to pin the images again",
        ) from None
    if not all(isinstance(v, str) for v in (*pins.images.values(), *pins.wheels.values())):
        raise LlmctlError(
            f"the pin record {path} is damaged (a digest is not a string)",
            f"delete {path} and run `llmctl images pin -b {blueprint}` to pin the images again",
        )
    return pins


def save_pins(stack: str, blueprint: str, pins: StackPins) -> Path:
    """Record the stack's pins (atomically)."""
    path = pins_path(stack, blueprint)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(pins_to_json(pins), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
