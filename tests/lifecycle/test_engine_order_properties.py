"""Properties of the engine's create and delete order (`infra/lifecycle/engine_order.py`), for any graph.

The rules, from the module's docstring (Pulumi's dependency_graph.go and the step generator's
delete scheduling): a resource depends on its parent, provider, dependencies, property
dependencies and `deletedWith`, and a dependency on a local component (not its own parent) counts
as one on each of the component's descendants; a resource is created after everything it depends
on, components take no create wave; deletes run dependents first, each wave being every resource no
remaining one depends on; `must_wait` gives the path that makes a step wait, or None. So for any
graph of custom resources, components and remote components linked by any of those fields:

- a resource depends on exactly the fields it names, and on a component's descendants;
- every step is in exactly one create wave, the first after every step it depends on (transitively);
- every resource is in exactly one delete wave, before everything it depends on, and each wave is
  exactly what nothing alive depends on;
- `must_wait` finds a path exactly when one exists, and the path follows dependency edges;
- a graph the waves refuse (CycleError) really has a cycle.

And of its invariant checks (`infra/lifecycle/order_invariants.py`: "X exists while Y exists" is
checked against dependency paths, never against wave numbers alone):

- `check_order` reports a pair exactly when no dependency path orders it, and a pair it passes is
  in order in the engine's own waves (the required step created in an earlier wave, deleted later);
- `check_recorded_deletes` reports a pair exactly when the protected resource was not deleted in a
  strictly earlier wave (or run) than what it requires;
- `check_images` reports exactly the containers and init containers, at any depth, whose image no
  earlier step produced.
"""

from __future__ import annotations

import itertools

from hypothesis import example, given
from hypothesis import strategies as st
from test_engine_order_rules import RULE, _spec, urn

from llmctl.infra.lifecycle.engine_order import CycleError, Node, OrderGraph
from llmctl.infra.lifecycle.order_invariants import (
    StackGraph,
    check_images,
    check_order,
    check_recorded_deletes,
)


@st.composite
def graphs(draw: st.DrawFn) -> OrderGraph:
    count = draw(st.integers(1, 7))
    nodes = []
    for n in range(count):
        role = draw(st.sampled_from(("app", "base", "other")))  # what RULE's selectors pick by name
        kind = draw(st.sampled_from(("custom", "custom", "component", "remote")))
        earlier = [node.urn for node in nodes]
        others = earlier + [urn(f"{r}{i}") for i in range(n + 1, count) for r in ("app", "base", "other")]
        # mostly earlier resources (a DAG); now and then any other (a cycle the waves must refuse)
        targets = others if others and draw(st.integers(0, 9)) == 0 else earlier

        def some(size: int, among: list[str] = targets) -> list[str]:
            return draw(st.lists(st.sampled_from(among), max_size=size, unique=True)) if among else []

        def one(among: list[str] = earlier) -> str | None:
            return draw(st.one_of(st.none(), st.sampled_from(among))) if among else None

        nodes.append(
            Node(
                urn=urn(f"{role}{n}"),
                type="c:m:C" if kind == "component" else "t:m:R",
                custom=kind == "custom",
                remote=kind == "remote",
                parent=one(),
                dependencies=tuple(some(2)),
                property_dependencies=(("k", tuple(some(1))),),
                provider=one(),
                deleted_with=one(),
            )
        )
    return OrderGraph(nodes)


def _closure(graph: OrderGraph, urn_: str) -> set[str]:
    found: set[str] = set()
    stack = list(graph.dependencies(urn_))
    while stack:
        dep = stack.pop()
        if dep not in found:
            found.add(dep)
            stack.extend(graph.dependencies(dep))
    return found


def _has_cycle(graph: OrderGraph) -> bool:
    return any(u in _closure(graph, u) for u in graph.nodes)


def _wave_of(graph: OrderGraph, phase: str) -> dict[str, int] | None:
    """Each resource's wave in the phase; None when the waves are refused, which only a graph with a
    cycle may be."""
    try:
        waves = graph.create_waves() if phase == "create" else graph.delete_waves()
    except CycleError:
        assert _has_cycle(graph)
        return None
    assert not _has_cycle(graph)
    return {u: n for n, wave in enumerate(waves) for u in wave}


@given(graphs())
def test_create_waves_put_every_step_after_what_it_depends_on(graph: OrderGraph) -> None:
    wave_of = _wave_of(graph, "create")
    if wave_of is None:
        return
    steps = {u for u, node in graph.nodes.items() if node.takes_a_step}
    assert sorted(wave_of) == sorted(steps) and sum(map(len, graph.create_waves())) == len(steps)
    for u in steps:
        before = [wave_of[dep] for dep in _closure(graph, u) & steps]
        # after every step it waits for, and as early as that allows (a component takes no wave)
        assert wave_of[u] == max(before, default=-1) + 1, graph.nodes[u].name


@given(graphs())
def test_delete_waves_put_dependents_first_and_take_all_that_nothing_alive_needs(graph: OrderGraph) -> None:
    wave_of = _wave_of(graph, "delete")
    if wave_of is None:
        return
    waves = graph.delete_waves()
    assert sorted(wave_of) == sorted(graph.nodes) and sum(map(len, waves)) == len(graph.nodes)
    for u in graph.nodes:
        for dep in graph.dependencies(u):
            assert wave_of[u] < wave_of[dep]
    for n, wave in enumerate(waves):
        alive = {u for u, m in wave_of.items() if m >= n}
        assert set(wave) == {u for u in alive if not (graph.dependents(u) & alive)}


@given(graphs(), st.data())
def test_must_wait_finds_a_path_exactly_when_one_exists(graph: OrderGraph, data: st.DataObject) -> None:
    first = data.draw(st.sampled_from(sorted(graph.nodes)))
    then = data.draw(st.sampled_from(sorted(graph.nodes)))
    for phase in ("create", "delete"):
        path = graph.must_wait(first, then, phase)
        exists = first in _closure(graph, then) if phase == "create" else then in _closure(graph, first)
        assert (path is not None) is (exists or first == then)
        if path is not None:
            assert path[0] == then and path[-1] == first
            for a, b in itertools.pairwise(path):
                assert b in (graph.dependencies(a) if phase == "create" else graph.dependents(a))


def _nested() -> OrderGraph:
    """A component whose child has a child, named both through the component and directly."""
    component = Node(urn("c1", "c:m:C"), "c:m:C", custom=False)
    child = Node(urn("r2"), "t:m:R", custom=True, parent=component.urn)
    grandchild = Node(urn("r4"), "t:m:R", custom=True, parent=child.urn)
    user = Node(
        urn("r3"),
        "t:m:R",
        custom=True,
        dependencies=(component.urn,),
        property_dependencies=(("k", (child.urn,)),),
    )
    return OrderGraph([component, child, user, grandchild])


@given(graphs())
@example(_nested())  # the test's own walk stopped at a descendant named directly (thorough profile)
def test_a_resource_depends_on_each_field_it_names_and_a_components_descendants(graph: OrderGraph) -> None:
    """Its parent, dependencies, property dependencies, provider and `deletedWith` (those in the
    graph), and for a component it names other than its parent, each of that component's
    descendants."""
    children: dict[str, set[str]] = {}
    for node in graph.nodes.values():
        if node.parent:
            children.setdefault(node.parent, set()).add(node.urn)
    for node in graph.nodes.values():
        named = {*node.dependencies, *(u for _, urns in node.property_dependencies for u in urns)}
        named |= {u for u in (node.parent, node.provider, node.deleted_with) if u}
        expected = named & set(graph.nodes)
        for target in list(expected):
            if graph.nodes[target].takes_a_step or target == node.parent:
                continue
            stack, below = list(children.get(target, ())), set()
            while stack:
                child = stack.pop()
                if child not in below:
                    below.add(child)
                    stack.extend(children.get(child, ()))
            expected |= below
        assert graph.dependencies(node.urn) == expected - {node.urn}


def _pairs(graph: OrderGraph) -> list[tuple[str, str]]:
    held = [
        u for u, node in graph.nodes.items() if node.name.startswith("app") and node.type.startswith("t:")
    ]
    needed = [
        u for u, node in graph.nodes.items() if node.name.startswith("base") and node.type.startswith("t:")
    ]
    return [(x, y) for x in held for y in needed]


@given(graphs())
def test_check_order_reports_exactly_the_unordered_pairs_and_a_passed_pair_is_ordered_in_the_waves(
    graph: OrderGraph,
) -> None:
    if _has_cycle(graph):
        return
    found = check_order([StackGraph("platform", "p", graph)], _spec(RULE))
    expected = []
    for x, y in _pairs(graph):
        for phase, first, then in (("create", y, x), ("delete", x, y)):
            if graph.must_wait(first, then, phase) is None:  # type: ignore[arg-type]
                expected.append((phase, graph.nodes[x].name, graph.nodes[y].name))
            elif graph.nodes[x].takes_a_step and graph.nodes[y].takes_a_step:
                assert graph.wave_of(first, phase) < graph.wave_of(then, phase)  # type: ignore[arg-type]
    held = {x for x, _ in _pairs(graph)} or {
        u for u, n in graph.nodes.items() if n.name.startswith("app") and n.type.startswith("t:")
    }
    missing = [v for v in found if v.message.endswith("which no stack has")]
    assert len(missing) == (1 if held and not _pairs(graph) else 0)
    reported = [(v.phase, v.message) for v in found if v not in missing]
    assert len(reported) == len(expected)
    for (phase, x, y), (got_phase, message) in zip(expected, reported, strict=True):
        assert got_phase == phase and f" {x} " in message and f" {y} " in message


@given(graphs(), st.data())
def test_recorded_deletes_are_reported_exactly_when_the_protected_one_was_not_gone_first(
    graph: OrderGraph, data: st.DataObject
) -> None:
    urns = sorted(graph.nodes)
    wave_of = {u: data.draw(st.integers(0, 3)) for u in urns}
    waves = [[u for u in urns if wave_of[u] == n] for n in range(4)]
    found = check_recorded_deletes([(StackGraph("platform", "p", graph), waves)], _spec(RULE))
    late = [(x, y) for x, y in _pairs(graph) if wave_of[x] >= wave_of[y]]
    assert len(found) == len(late)


image_st = st.sampled_from(("a:1", "b:2", "c@sha256:00", "d"))
container_st = st.fixed_dictionaries({"name": st.sampled_from(("s", "t")), "image": image_st})
pod_st = st.fixed_dictionaries(
    {"containers": st.lists(container_st, max_size=2)},
    optional={"initContainers": st.lists(container_st, max_size=2)},
)


@given(
    st.lists(
        st.one_of(
            pod_st.map(lambda spec: {"kind": "Deployment", "spec": {"template": {"spec": spec}}}),
            pod_st.map(
                lambda spec: {"kind": "RayService", "spec": {"groups": [{"template": {"spec": spec}}]}}
            ),
        ),
        max_size=3,
    ),
    st.sets(image_st),
)
def test_check_images_reports_exactly_the_containers_whose_image_nobody_produced(
    manifests: list[dict[str, object]], produced: set[str]
) -> None:
    def containers(value: object) -> list[str]:
        if isinstance(value, dict):
            own = [c["image"] for key in ("initContainers", "containers") for c in value.get(key, [])]
            return own + [
                i
                for k, v in value.items()
                if k not in ("initContainers", "containers")
                for i in containers(v)
            ]
        return [i for v in value for i in containers(v)] if isinstance(value, list) else []

    images = [image for obj in manifests for image in containers(obj)]
    found = check_images(manifests, produced, _spec())
    assert len(found) == sum(image not in produced for image in images)
    assert all(any(f"uses {image}," in v.message for image in images if image not in produced) for v in found)
