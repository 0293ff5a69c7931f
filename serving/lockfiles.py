"""The dependency locks (``serving/locks/``): one per component and base image, as data.

A component is a runtime (its serving pods), a workload UI (the Gradio pod) or a job (the model-mirror
Job). ``locks/locks.yaml``
names, per base image (a ``versions.yaml`` image key), its Python version, its platform (glibc) and
the constraints file of what it ships; per lock, the component, the base image and the requirements
file with the component's top-level pins. ``make locks`` writes ``locks/<lock>.txt``
(:mod:`llmctl.serving.lock_compile`); ``serving/image.sh`` and the pod start install that file with
``--require-hashes``. Pure data: reads packaged files, imports nothing heavy, reaches no network.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llmctl.errors import LlmctlError

LOCKS_DIR = Path(__file__).with_name("locks")
SERVING_DIR = Path(__file__).parent


#: what installs a lock: a runtime's serving pods, a workload UI's pod, a workload's job
LockKind = Literal["runtime", "ui", "job"]
_KIND_WORDS = {"runtime": "runtime", "ui": "UI", "job": "job"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BaseImage(_Strict):
    """The interpreter and packages of one pinned base image."""

    python: str = Field(
        description="The image's Python version (major.minor), as `uv --python-version` takes it."
    )
    platform: str = Field(
        description="The image's platform as `uv --python-platform` takes it (glibc of its OS)."
    )
    constraints: str = Field(
        description="File under locks/constraints/: what the image ships, with its source."
    )
    source: str = Field(description="Where the Python version and OS were read.")


class LockSpec(_Strict):
    """One lock: a component's requirements resolved for one base image."""

    name: str = Field(description="The lock's name (its file is locks/<name>.txt).")
    kind: LockKind = Field(
        description="What installs it: a runtime's serving pods, the pod of a workload UI, or a workload's job."
    )
    component: str = Field(
        description="The runtime (data/runtimes.yaml), the UI (a blueprint's `ui:` value) or the job "
        "(`model-mirror`) whose pods install it."
    )
    image: str = Field(description="Key of the base image under `images:` in versions.yaml and locks.yaml.")
    requirements: str = Field(description="The component's top-level pins, relative to serving/.")
    outside_lock: dict[str, str] = Field(
        default_factory=dict,
        description="Projects of the input that the lock leaves out, with the reason: the build the image "
        "needs is served by no index the resolver reaches (a CPU torch); the pods install them apart.",
    )

    @property
    def label(self) -> str:
        """The component in words: e.g. `the <runtime> runtime`, `the gradio UI`, `the model-mirror job`."""
        return f"the {self.component} {_KIND_WORDS[self.kind]}"

    @property
    def path(self) -> Path:
        """The generated lock file."""
        return LOCKS_DIR / f"{self.name}.txt"

    @property
    def outside_path(self) -> Path:
        """What the lock leaves out, as pip arguments (written by `make locks` when `outside_lock` is set)."""
        return LOCKS_DIR / f"{self.name}.outside.txt"

    @property
    def requirements_path(self) -> Path:
        """The hand-edited input."""
        return SERVING_DIR / self.requirements


class Locks(_Strict):
    """locks.yaml."""

    images: dict[str, BaseImage] = Field(description="Base images by versions.yaml key.")
    locks: dict[str, LockSpec] = Field(description="Locks by name.")

    def base(self, spec: LockSpec) -> BaseImage:
        """The base image of a lock."""
        return self.images[spec.image]

    def constraints_path(self, spec: LockSpec) -> Path:
        """The constraints file of a lock's base image."""
        return LOCKS_DIR / "constraints" / self.base(spec).constraints


@functools.lru_cache(maxsize=1)
def locks() -> Locks:
    """locks.yaml, validated (the lock's name is its key)."""
    raw = yaml.safe_load((LOCKS_DIR / "locks.yaml").read_text(encoding="utf-8"))
    raw["locks"] = {name: {"name": name, **row} for name, row in raw["locks"].items()}
    return Locks.model_validate(raw)


def lock_for(component: str, image: str, kind: LockKind = "runtime") -> LockSpec:
    """The lock a component's pods install on `image` (a full image reference): a runtime by default,
    a UI (`kind="ui"`, the blueprint's `ui:` value) or a job (`kind="job"`).

    The image must be the pinned image of a versions.yaml key that has a lock for this component;
    anything else is refused with the fix, since nothing was resolved for its interpreter.
    """
    from llmctl.blueprints.versions import versions

    pinned = versions().images
    image = image.split("@", 1)[0]  # the same image pinned by digest
    mine = [s for s in locks().locks.values() if (s.kind, s.component) == (kind, component)]
    for spec in mine:
        if spec.image in pinned and pinned[spec.image].image == image:
            return spec
    known = [f"{pinned[s.image].image}" for s in mine if s.image in pinned]
    what = _KIND_WORDS[kind]
    raise LlmctlError(
        f"no dependency lock for the {component} {what} on {image}: nothing was resolved for that image's Python",
        f"use a pinned base image ({', '.join(known) or 'none'}), or add the image to "
        "serving/locks/locks.yaml with its constraints and run `make locks`; or push a built image "
        "(llmctl images build --push) and name it in image.serving_image",
    )


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """{normalised name: (version, sha256 hashes)} of a hashed requirements file (uv's output)."""
    pins: dict[str, tuple[str, frozenset[str]]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _PIN.match(stripped)
        if match:
            current = normalize(match.group(1))
            pins[current] = (match.group(3), frozenset())
        elif current is not None:
            version, hashes = pins[current]
            pins[current] = (version, hashes | frozenset(_HASH.findall(stripped)))
    for name, (_, hashes) in pins.items():
        if not hashes:
            raise LlmctlError(f"the lock pins {name} without a hash", "regenerate it: make locks")
    return pins


def requirement_names(path: Path) -> list[str]:
    """The normalised project names a requirements or constraints file names (options skipped)."""
    names = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
            if match:
                names.append(normalize(match.group(0)))
    return names
