"""The create/delete-order invariants (`order_invariants.yaml`) and their checks.

`check_order` takes the graphs of one environment's stacks (the platform and its workloads) and
reports, per invariant and phase, every pair "X exists while Y does not" that the engine's order
(:mod:`llmctl.infra.lifecycle.engine_order`) allows. `check_images` checks that every container
image of a workload's pods was produced by an earlier step. Messages name the resources.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llmctl.infra.lifecycle.engine_order import Node, OrderGraph, Phase
from llmctl.infra.platform.addons import ADDONS, Addon, addon

StackKind = Literal["platform", "workload"]
INVARIANTS_FILE = Path(__file__).with_name("order_invariants.yaml")
_MISSING = object()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Selector(_Strict):
    """Which resources a side of an invariant means."""

    label: str = Field(description="What the selector means, as messages say it.")
    type: str = Field(description="Pulumi type token, a glob (e.g. 'kubernetes:*').")
    name: str = Field("*", description="Logical resource name, a glob.")
    where: dict[str, str] = Field(
        default_factory=dict, description="Input values to match: dotted input path -> glob."
    )
    stack: StackKind | None = Field(None, description="Only resources of this kind of stack (None: any).")
    optional: bool = Field(False, description="May match nothing (a requirement some configs do not create).")

    def matches(self, kind: StackKind, node: Node) -> bool:
        """Whether a resource of a stack of this kind is selected."""
        if self.stack is not None and self.stack != kind:
            return False
        if not (fnmatch.fnmatchcase(node.type, self.type) and fnmatch.fnmatchcase(node.name, self.name)):
            return False
        return all(_matches_value(_lookup(node.inputs, path), glob) for path, glob in self.where.items())


class Invariant(_Strict):
    """While any `while_any` resource exists, every `requires` resource exists."""

    id: str = Field(description="Stable identifier, used in messages and tests.")
    why: str = Field(description="What breaks when the order is wrong.")
    while_any: list[Selector] = Field(description="The resources whose lifetime is protected.")
    requires: list[Selector] = Field(description="What must be created before and deleted after them.")


class StackOrder(_Strict):
    """The order of the stacks of one environment (orchestrate.Lifecycle up/down)."""

    create: list[StackKind] = Field(description="Kinds of stack in the order `up` creates them.")
    delete: list[StackKind] = Field(description="Kinds of stack in the order `down` destroys them.")


class ProducedBy(_Strict):
    """Where a pod's image may come from."""

    pinned: bool = Field(description="Images pinned in blueprints/data/versions.yaml count as produced.")
    blueprint_fields: list[str] = Field(description="Blueprint fields (dotted) naming produced images.")
    config_fields: list[str] = Field(
        description="Workload config fields (dotted) recording delivered images."
    )


class ImageInvariant(_Strict):
    """No pod references an image that no earlier step produced."""

    id: str = Field(description="Stable identifier.")
    why: str = Field(description="What breaks when a pod names a missing image.")
    produced_by: ProducedBy = Field(description="The steps that produce images.")


class OrderInvariants(_Strict):
    """The whole file."""

    stack_order: StackOrder = Field(description="Stack order of up and down.")
    invariants: list[Invariant] = Field(description="Resource-order invariants.")
    images: ImageInvariant = Field(description="The image invariant.")


@functools.cache
def load_invariants(path: Path = INVARIANTS_FILE) -> OrderInvariants:
    """The invariants file, validated, with one invariant per `after` of the add-on registry."""
    loaded = OrderInvariants.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    return loaded.model_copy(update={"invariants": [*loaded.invariants, *addon_invariants()]})


def addon_invariants() -> list[Invariant]:
    """An add-on is created after, and deleted before, each add-on its registry row comes after."""

    def side(row: Addon) -> Selector:
        type_, where = row.selector()
        return Selector(label=f"the {row.key} {row.kind}", type=type_, where=where, stack="platform")

    return [
        Invariant(
            id=f"addon-{row.key}-after-{key}",
            why=f"the add-on registry (infra/platform/addons.py): {row.key} comes after {key}",
            while_any=[side(row)],
            requires=[side(addon(key))],
        )
        for row in ADDONS
        for key in row.after
    ]


def _lookup(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, Mapping) or part not in data:
            return _MISSING
        data = data[part]
    return data


def _matches_value(value: Any, glob: str) -> bool:
    return (
        value is not _MISSING
        and isinstance(value, (str, int, float))
        and fnmatch.fnmatchcase(str(value), glob)
    )


@dataclass(frozen=True)
class StackGraph:
    """One stack of an environment: its kind, a name for messages, its graph."""

    kind: StackKind
    name: str
    graph: OrderGraph


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which, in which phase, and a message naming the resources."""

    invariant: str
    phase: Phase | Literal["image"]
    message: str

    def __str__(self) -> str:
        return f"[{self.invariant}] {self.phase}: {self.message}"


def _selected(stacks: Sequence[StackGraph], selector: Selector) -> Iterator[tuple[StackGraph, Node]]:
    for stack in stacks:
        for node in stack.graph.nodes.values():
            if selector.matches(stack.kind, node):
                yield stack, node


def _where(stack: StackGraph, node: Node) -> str:
    return f"{node.label} ({stack.name})"


def _pair(
    order: StackOrder,
    invariant: Invariant,
    needed: Selector,
    held: tuple[StackGraph, Node],
    need: tuple[StackGraph, Node],
) -> list[Violation]:
    (x_stack, x), (y_stack, y) = held, need
    found: list[Violation] = []
    for phase in ("create", "delete"):
        if x_stack is y_stack:
            first, then = (y.urn, x.urn) if phase == "create" else (x.urn, y.urn)
            if x_stack.graph.must_wait(first, then, phase) is not None:
                continue
            waves = f"{phase} waves {x_stack.graph.wave_of(x.urn, phase)} and {x_stack.graph.wave_of(y.urn, phase)}"
            reason = f"no dependency path makes the engine wait ({waves})"
        else:
            kinds = order.create if phase == "create" else order.delete
            # create: the required one's stack first; delete: the protected one's stack first.
            early, late = (y_stack, x_stack) if phase == "create" else (x_stack, y_stack)
            if early.kind != late.kind and kinds.index(early.kind) < kinds.index(late.kind):
                continue
            reason = f"the stack order ({phase}: {' then '.join(kinds)}) does not put one before the other"
        if phase == "create":
            what = f"{_where(y_stack, y)} ({needed.label}) may not exist yet when {_where(x_stack, x)} is created"
        else:
            what = f"{_where(y_stack, y)} ({needed.label}) can be deleted while {_where(x_stack, x)} still exists"
        found.append(Violation(invariant.id, phase, f"{what}: {reason}"))
    return found


def check_order(stacks: Sequence[StackGraph], invariants: OrderInvariants | None = None) -> list[Violation]:
    """Every violation of the order invariants by one environment's stacks."""
    spec = invariants or load_invariants()
    found: list[Violation] = []
    for invariant in spec.invariants:
        held = [pair for selector in invariant.while_any for pair in _selected(stacks, selector)]
        if not held:
            continue
        for needed in invariant.requires:
            required = list(_selected(stacks, needed))
            if not required and not needed.optional:
                names = ", ".join(_where(s, n) for s, n in held[:3])
                found.append(
                    Violation(invariant.id, "create", f"{names} need(s) {needed.label}, which no stack has")
                )
            for x in held:
                for y in required:
                    if x[1].urn != y[1].urn:
                        found += _pair(spec.stack_order, invariant, needed, x, y)
    return found


def check_recorded_deletes(
    runs: Sequence[tuple[StackGraph, Sequence[Sequence[str]]]], invariants: OrderInvariants | None = None
) -> list[Violation]:
    """Violations in deletes an engine actually ran: `runs` are the destroys in the order they ran,
    each a stack (its graph from the state before the destroy) and its delete waves (URNs), each
    wave finished before the next began. A protected resource must be gone strictly before what it
    requires is deleted."""
    spec = invariants or load_invariants()
    position: dict[tuple[int, str], tuple[int, int]] = {}
    for run_index, (_, waves) in enumerate(runs):
        for wave_index, wave in enumerate(waves):
            for urn in wave:
                position[(id(runs[run_index][0]), urn)] = (run_index, wave_index)
    stacks = [stack for stack, _ in runs]
    found: list[Violation] = []
    for invariant in spec.invariants:
        held = [pair for selector in invariant.while_any for pair in _selected(stacks, selector)]
        for needed in invariant.requires:
            for x_stack, x in held:
                for y_stack, y in _selected(stacks, needed):
                    x_at, y_at = position.get((id(x_stack), x.urn)), position.get((id(y_stack), y.urn))
                    if x_at is None or y_at is None or x_at < y_at:
                        continue
                    found.append(
                        Violation(
                            invariant.id,
                            "delete",
                            f"{_where(y_stack, y)} ({needed.label}) was deleted (run {y_at[0] + 1}, wave "
                            f"{y_at[1] + 1}) while {_where(x_stack, x)} still existed (deleted in run "
                            f"{x_at[0] + 1}, wave {x_at[1] + 1})",
                        )
                    )
    return found


# ---- images -------------------------------------------------------------------------------------


def pod_images(manifests: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """(object, container, image) for every container and init container of every pod template."""
    found: list[tuple[str, str, str]] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, Mapping):
            for key in ("initContainers", "containers"):
                for container in value.get(key) or []:
                    if isinstance(container, Mapping) and "image" in container:
                        found.append((where, str(container.get("name", "?")), str(container["image"])))
            for key, item in value.items():
                if key not in ("initContainers", "containers"):
                    walk(item, where)
        elif isinstance(value, list):
            for item in value:
                walk(item, where)

    for obj in manifests:
        walk(obj, f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}")
    return found


def produced_images(config: Any, invariants: OrderInvariants | None = None) -> set[str]:
    """The images earlier steps produced for a workload config (pinned, blueprint, delivered)."""
    spec = (invariants or load_invariants()).images.produced_by
    produced: set[str] = set()
    if spec.pinned:
        from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

        produced |= {image.image for image in versions().images.values()}
        produced |= {f"{image.image}@{image.digest}" for image in versions().images.values() if image.digest}
    # a tag by the digest the stack pinned at its first `up` (infra/workload/prepare/digests.py)
    produced |= {f"{image}@{digest}" for image, digest in (getattr(config, "image_pins", None) or {}).items()}
    sources = [(config.blueprint, spec.blueprint_fields), (config, spec.config_fields)]
    for root, fields in sources:
        for path in fields:
            value: Any = root
            for part in path.split("."):
                value = getattr(value, part, None)
            if isinstance(value, str) and value:
                produced.add(value)
            elif isinstance(value, (list, tuple, set)):
                produced |= {str(v) for v in value if v}
    return produced


def check_images(
    manifests: Sequence[Mapping[str, Any]], produced: set[str], invariants: OrderInvariants | None = None
) -> list[Violation]:
    """Pods whose image no earlier step produced."""
    spec = invariants or load_invariants()
    fields = ", ".join(spec.images.produced_by.config_fields)
    return [
        Violation(
            spec.images.id,
            "image",
            f"{obj} container {container!r} uses {image}, which no earlier step produced (not pinned in "
            f"versions.yaml, not the blueprint's image, not recorded as delivered in the workload "
            f"config ({fields}))",
        )
        for obj, container, image in pod_images(manifests)
        if image not in produced
    ]


__all__ = [
    "INVARIANTS_FILE",
    "ImageInvariant",
    "Invariant",
    "OrderInvariants",
    "Selector",
    "StackGraph",
    "Violation",
    "check_images",
    "check_order",
    "check_recorded_deletes",
    "load_invariants",
    "pod_images",
    "produced_images",
]
