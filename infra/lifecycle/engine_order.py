"""The order in which the Pulumi engine creates and deletes a stack's resources, from its graph.

A graph comes from an offline run (:class:`llmctl.infra.plan.offline.Registered` records) or from a
stack's state (`pulumi stack export`, or the stand-in engine's saved state): the same fields Pulumi
keeps per resource. The rules follow the engine (`pkg/resource/graph/dependency_graph.go` and the
step generator's delete scheduling):

- A resource depends on its parent, its provider, its `dependencies` (explicit `depends_on` plus,
  as the SDKs send them, the resources its Output inputs came from), its `propertyDependencies` and
  its `deletedWith` resource. A dependency on a local component counts as one on each of the
  component's descendants (the SDK already sends them expanded; state from other SDKs may not).
- Create: a resource is registered, hence created, only after everything it depends on is created
  (the SDK awaits its inputs' resources and its `depends_on` URNs; a child waits for its parent).
  Components create nothing; they take no wave of their own.
- Delete: the engine deletes, together, every condemned resource that no remaining condemned
  resource depends on, then repeats: dependents (and children) before what they depend on.

A *wave* is a set that may run in parallel; what is in a later wave *may* wait, and what is on a
dependency path from another resource *must* wait (:meth:`OrderGraph.must_wait`). Invariants about
"X exists while Y exists" are checked against paths, never against wave numbers alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Phase = Literal["create", "delete"]
STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class Node:
    """One resource of a stack, with what the engine orders it by."""

    urn: str
    type: str
    custom: bool
    parent: str | None = None
    dependencies: tuple[str, ...] = ()
    property_dependencies: tuple[tuple[str, tuple[str, ...]], ...] = ()
    provider: str | None = None
    deleted_with: str | None = None
    remote: bool = False
    inputs: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        """The logical name (the URN's last part)."""
        return self.urn.rsplit("::", 1)[-1]

    @property
    def label(self) -> str:
        """`<type> <name>`, as messages name a resource."""
        return f"{self.type} {self.name}"

    @property
    def takes_a_step(self) -> bool:
        """Whether the engine runs a step for it (custom resources, providers, remote components)."""
        return self.custom or self.remote

    def direct(self) -> set[str]:
        """Every URN this resource names as something it depends on."""
        found = set(self.dependencies)
        for _, urns in self.property_dependencies:
            found.update(urns)
        for urn in (self.parent, self.provider, self.deleted_with):
            if urn:
                found.add(urn)
        return found


class _Recorded(Protocol):
    urn: str
    type: str
    parent: str | None
    inputs: dict[str, Any]
    dependencies: list[str]
    custom: bool
    property_dependencies: dict[str, list[str]]
    provider: str | None
    deleted_with: str | None
    remote: bool


def _provider_urn(reference: str | None) -> str | None:
    """The provider's URN from a state's provider reference (`<urn>::<id>`)."""
    return reference.rsplit("::", 1)[0] if reference else None


def nodes_from_registered(records: Iterable[_Recorded]) -> list[Node]:
    """Nodes of an offline run (the recording monitor's records, in registration order)."""
    return [
        Node(
            urn=r.urn,
            type=r.type,
            custom=r.custom,
            parent=r.parent,
            dependencies=tuple(r.dependencies),
            property_dependencies=tuple(
                (key, tuple(urns)) for key, urns in sorted(r.property_dependencies.items())
            ),
            provider=r.provider,
            deleted_with=r.deleted_with,
            remote=r.remote,
            inputs=r.inputs,
        )
        for r in records
    ]


def nodes_from_state(resources: Iterable[Mapping[str, Any]]) -> list[Node]:
    """Nodes of a stack's state: the `resources` of `pulumi stack export` (deployment v3), or the
    stand-in engine's saved resources (same keys)."""
    return [
        Node(
            urn=str(res["urn"]),
            type=str(res["type"]),
            custom=bool(res.get("custom")),
            parent=res.get("parent") or None,
            dependencies=tuple(res.get("dependencies") or ()),
            property_dependencies=tuple(
                (key, tuple(urns)) for key, urns in sorted((res.get("propertyDependencies") or {}).items())
            ),
            provider=_provider_urn(res.get("provider")),
            deleted_with=res.get("deletedWith") or None,
            remote=bool(res.get("remote")),
            inputs=res.get("inputs") or {},
        )
        for res in resources
    ]


class CycleError(ValueError):
    """The graph has a dependency cycle (the engine would refuse it too)."""


class OrderGraph:
    """A stack's dependency graph and the create/delete schedules the engine derives from it."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = {node.urn: node for node in nodes}
        self._children: dict[str, list[str]] = {}
        for node in nodes:
            if node.parent in self.nodes:
                self._children.setdefault(node.parent, []).append(node.urn)
        self._deps = {urn: self._dependencies_of(node) for urn, node in self.nodes.items()}
        self._dependents: dict[str, set[str]] = {urn: set() for urn in self.nodes}
        for urn, deps in self._deps.items():
            for dep in deps:
                self._dependents[dep].add(urn)

    def _descendants(self, urn: str) -> set[str]:
        found: set[str] = set()
        stack = list(self._children.get(urn, ()))
        while stack:
            child = stack.pop()
            if child not in found:
                found.add(child)
                stack.extend(self._children.get(child, ()))
        return found

    def _dependencies_of(self, node: Node) -> set[str]:
        """What the engine's DependenciesOf returns (within this graph)."""
        deps = {urn for urn in node.direct() if urn in self.nodes}
        for urn in list(deps):
            target = self.nodes[urn]
            # A dependency on a local component (not the resource's own parent) covers its descendants.
            if not target.takes_a_step and urn != node.parent:
                deps |= self._descendants(urn) - {node.urn}
        deps.discard(node.urn)
        return deps

    def dependencies(self, urn: str) -> set[str]:
        """The direct dependencies of a resource."""
        return set(self._deps[urn])

    def dependents(self, urn: str) -> set[str]:
        """The resources that depend directly on a resource."""
        return set(self._dependents[urn])

    def must_wait(self, first: str, then: str, phase: Phase) -> list[str] | None:
        """The dependency path that makes `then`'s step wait for `first`'s to finish, or None.

        Create: `then` transitively depends on `first`. Delete: `first` transitively depends on
        `then` (dependents go first). The path runs from `then` to `first`.
        """
        step = self._deps if phase == "create" else self._dependents
        previous: dict[str, str] = {}
        seen = {then}
        queue = [then]
        while queue:
            current = queue.pop(0)
            if current == first:
                path = [current]
                while path[-1] in previous:
                    path.append(previous[path[-1]])
                return list(reversed(path))
            for nxt in sorted(step[current] - seen):
                seen.add(nxt)
                previous[nxt] = current
                queue.append(nxt)
        return None

    def create_waves(self) -> list[list[str]]:
        """Resources whose steps can run together, in the order the engine can start them
        (components are left out: creating one is only its registration)."""
        level: dict[str, int] = {}
        for urn in self._topological():
            deps = [level[d] + (1 if self.nodes[d].takes_a_step else 0) for d in self._deps[urn]]
            level[urn] = max(deps, default=0)
        return self._group({u: n for u, n in level.items() if self.nodes[u].takes_a_step})

    def delete_waves(self) -> list[list[str]]:
        """Resources deleted together, wave by wave: each wave is every resource that nothing still
        alive depends on (components included, as in the engine)."""
        alive = set(self.nodes)
        waves: list[list[str]] = []
        while alive:
            wave = sorted(urn for urn in alive if not (self._dependents[urn] & alive))
            if not wave:
                raise CycleError(f"dependency cycle among {sorted(self.nodes[u].label for u in alive)}")
            waves.append(wave)
            alive -= set(wave)
        return waves

    def _topological(self) -> list[str]:
        order: list[str] = []
        done: set[str] = set()
        pending = set(self.nodes)
        while pending:
            ready = sorted(urn for urn in pending if self._deps[urn] <= done)
            if not ready:
                raise CycleError(f"dependency cycle among {sorted(self.nodes[u].label for u in pending)}")
            order += ready
            done |= set(ready)
            pending -= set(ready)
        return order

    @staticmethod
    def _group(level: dict[str, int]) -> list[list[str]]:
        waves: dict[int, list[str]] = {}
        for urn, number in level.items():
            waves.setdefault(number, []).append(urn)
        return [sorted(waves[number]) for number in sorted(waves)]

    def wave_of(self, urn: str, phase: Phase) -> int:
        """The 1-based wave a resource's step is in (0: it takes no create step)."""
        waves = self.create_waves() if phase == "create" else self.delete_waves()
        return next((index for index, wave in enumerate(waves, start=1) if urn in wave), 0)

    def without_edge(self, dependent: str, dependency: str) -> OrderGraph:
        """A copy with one dependency edge dropped everywhere it is recorded (tests build broken
        graphs with it)."""
        node = self.nodes[dependent]
        changed = Node(
            urn=node.urn,
            type=node.type,
            custom=node.custom,
            parent=None if node.parent == dependency else node.parent,
            dependencies=tuple(d for d in node.dependencies if d != dependency),
            property_dependencies=tuple(
                (key, tuple(u for u in urns if u != dependency)) for key, urns in node.property_dependencies
            ),
            provider=None if node.provider == dependency else node.provider,
            deleted_with=None if node.deleted_with == dependency else node.deleted_with,
            remote=node.remote,
            inputs=node.inputs,
        )
        return OrderGraph([changed if n.urn == dependent else n for n in self.nodes.values()])


__all__ = [
    "CycleError",
    "Node",
    "OrderGraph",
    "Phase",
    "nodes_from_registered",
    "nodes_from_state",
]
