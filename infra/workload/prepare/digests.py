"""Each image tag a workload's pods run, pinned by digest at the stack's first `up` (and by `llmctl
images pin`): the registry is asked through the distribution API (`infra/aws/image_checks.py`, the same
client as `llmctl doctor`'s registry checks), the answer is recorded in the stack's state
(`llmctl.state.StackPins`, `<state>/pins/<stack>/<blueprint>.json`), and the manifests name
`image@sha256:...` from then on (`image_pins.py`).

A later `up` asks again: a tag that names another digest now is refused (nothing is changed) unless
`--accept-moved-tags` is given, which records the new digest and rolls the pods onto it. A registry
that cannot be read keeps the recorded digest (said in a note); an image never pinned stays a tag,
and the note says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from llmctl.errors import PrerequisiteError
from llmctl.infra.aws.image_checks import ACCEPT_FLAG, lookup
from llmctl.infra.aws.registry_http import registry_client
from llmctl.infra.names import split_stack
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.pins.image_pins import tagged_images
from llmctl.state import last_up, load_pins, save_pins


@dataclass
class PinReport:
    """What one pinning found, image by image."""

    stack: str
    blueprint: str
    images: dict[str, str] = field(default_factory=dict)  # every image pinned now, with its digest
    new: list[str] = field(default_factory=list)  # pinned for the first time
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (image, recorded, now): accepted
    kept: list[tuple[str, str]] = field(default_factory=list)  # recorded, registry unreadable: (image, why)
    unpinned: list[tuple[str, str]] = field(default_factory=list)  # never pinned, unreadable: (image, why)

    def notes(self) -> list[str]:
        """One line per image that was pinned, moved, kept unchecked or left a tag."""
        lines = [f"pinned {image} to {self.images[image]}" for image in self.new]
        lines += [f"moved {image} from {old} to {now} ({ACCEPT_FLAG})" for image, old, now in self.moved]
        lines += [
            f"kept {image}@{self.images[image]} as recorded (could not check the tag: {why})"
            for image, why in self.kept
        ]
        lines += [
            f"not pinned: {image} runs by tag (could not read its registry: {why}); the next `up` or "
            f"`llmctl images pin` pins it"
            for image, why in self.unpinned
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys."""
        return {
            "stack": self.stack,
            "blueprint": self.blueprint,
            "images": dict(sorted(self.images.items())),
            "new": self.new,
            "moved": [{"image": i, "recorded": o, "now": n} for i, o, n in self.moved],
            "kept": [{"image": i, "why": w} for i, w in self.kept],
            "unpinned": [{"image": i, "why": w} for i, w in self.unpinned],
        }


def stack_flags(stack: str) -> str:
    """`--stack ci --workload pr-42` for the workload stack `ci.pr-42`; `--stack dev` otherwise."""
    env, workload = split_stack(stack)
    return f"--stack {env}" + (f" --workload {workload}" if workload else "")


def _digest(client: Any, image: str) -> tuple[str | None, str]:
    found, why = lookup(client, image)
    return (found.digest, "") if found else (None, why)


def compare(
    stack: str,
    blueprint: str,
    wanted: list[str],
    recorded: dict[str, str],
    answer: Callable[[str], tuple[str | None, str]],
) -> PinReport:
    """Each wanted image's registry answer (`answer`: (digest, "") or (None, why unreadable)) against
    the recorded digest: new, moved (to be refused unless accepted), kept as recorded, or unpinned."""
    report = PinReport(stack, blueprint)
    for image in wanted:
        now, why = answer(image)
        old = recorded.get(image)
        if now is None:
            if old:
                report.images[image] = old
                report.kept.append((image, why))
            else:
                report.unpinned.append((image, why))
            continue
        report.images[image] = now
        if old is None:
            report.new.append(image)
        elif old != now:
            report.moved.append((image, old, now))
    return report


def pin_images(
    config: WorkloadConfig,
    *,
    accept_moved: bool = False,
    note: Callable[[str], None] = lambda _text: None,
    client: Any = None,
) -> PinReport:
    """Resolve every image tag the workload's pods run (`config`'s delivery, else the plan), compare
    with the stack's record and record the digests (see the module docstring)."""
    bp = config.blueprint.name
    wanted = tagged_images(build_manifests(config.model_copy(update={"image_pins": {}}), hf_token=None))
    recorded = load_pins(config.stack, bp)
    own = client is None
    client = client or registry_client()
    try:
        report = compare(config.stack, bp, wanted, recorded.images, lambda image: _digest(client, image))
    finally:
        if own:
            client.close()
    if report.moved and not accept_moved:
        env, workload = split_stack(config.stack)
        command = last_up(env, bp, workload) or f"llmctl up -b {bp} {stack_flags(config.stack)}"
        raise PrerequisiteError(
            f"{len(report.moved)} image tag(s) of stack {config.stack} now name another image: "
            + "; ".join(f"{i}: pinned {o}, the registry now says {n}" for i, o, n in report.moved),
            f"nothing was changed: the pods keep the pinned digests. Review the new image(s), then move the "
            f"stack onto them with `{command} {ACCEPT_FLAG}` (or "
            f"`llmctl images pin -b {bp} {stack_flags(config.stack)} {ACCEPT_FLAG}`)",
        )
    # images of an earlier delivery (the base image before an ECR image was pushed) stay recorded
    save_pins(config.stack, bp, replace(recorded, images={**recorded.images, **report.images}))
    for line in report.notes():
        note(f"    {line}")
    return report


def recorded_images(stack: str, blueprint: str) -> dict[str, str]:
    """The image digests the stack recorded (for `render` and the workload program)."""
    return load_pins(stack, blueprint).images
