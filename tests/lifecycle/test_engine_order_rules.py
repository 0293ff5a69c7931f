"""The engine-order rules and the invariant checks one decision at a time, on graphs of a few hand-made
nodes (no Pulumi run, no stand-in engine): what counts as a dependency, the create and delete waves,
the dependency path that makes a step wait, the selectors, the stack order across stacks, the
recorded deletes and the image check. Fast, so `make mutation` runs it first for the
order-invariants module (the catalog tests in test_engine_order.py take a minute)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from llmctl.infra.lifecycle.engine_order import CycleError, Node, OrderGraph, nodes_from_state
from llmctl.infra.lifecycle.order_invariants import (
    ImageInvariant,
    Invariant,
    OrderInvariants,
    ProducedBy,
    Selector,
    StackGraph,
    StackOrder,
    Violation,
    check_images,
    check_order,
    check_recorded_deletes,
    pod_images,
    produced_images,
)


def urn(name: str, type_: str = "t:m:R") -> str:
    return f"urn:pulumi:dev::p::{type_}::{name}"


def res(name: str, **fields: Any) -> Node:
    return Node(urn=urn(name), type="t:m:R", custom=True, **fields)


def comp(name: str, **fields: Any) -> Node:
    return Node(urn=urn(name, "c:m:C"), type="c:m:C", custom=False, **fields)


def names(graph: OrderGraph, waves: list[list[str]]) -> list[list[str]]:
    return [[graph.nodes[u].name for u in wave] for wave in waves]


# ---- engine_order ---------------------------------------------------------------------------------


def test_a_node_names_every_field_it_depends_on_and_only_those_set() -> None:
    node = res(
        "x",
        parent=urn("p"),
        dependencies=(urn("d"),),
        property_dependencies=(("k", (urn("e"), urn("f"))),),
        provider=urn("prov"),
        deleted_with=urn("w"),
    )
    assert node.direct() == {urn(n) for n in ("p", "d", "e", "f", "prov", "w")}
    assert res("bare").direct() == set()
    assert (node.name, node.label) == ("x", "t:m:R x")
    assert res("a").takes_a_step and not comp("c").takes_a_step
    assert comp("r", remote=True).takes_a_step


def test_a_node_is_a_frozen_value_named_by_its_urn_and_edges_not_its_inputs() -> None:
    assert len({res("a", inputs={"v": 1}), res("a", inputs={"v": 2})}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        res("a").parent = urn("b")  # type: ignore[misc]


def test_state_fields_read_with_their_defaults() -> None:
    [bare, full] = nodes_from_state(
        [
            {"urn": urn("a"), "type": "t:m:R", "parent": "", "deletedWith": "", "provider": ""},
            {
                "urn": urn("b"),
                "type": "t:m:R",
                "custom": True,
                "remote": True,
                "parent": urn("a"),
                "dependencies": [urn("a")],
                "propertyDependencies": {"z": [urn("a")], "a": []},
                "provider": f"{urn('prov')}::id-1::x",
                "deletedWith": urn("a"),
                "inputs": {"k": 1},
            },
        ]
    )
    assert (bare.custom, bare.parent, bare.provider, bare.deleted_with, bare.remote) == (
        False,
        None,
        None,
        None,
        False,
    )
    assert bare.dependencies == () and bare.property_dependencies == () and dict(bare.inputs) == {}
    assert (full.custom, full.remote, full.parent, full.deleted_with) == (True, True, urn("a"), urn("a"))
    assert full.provider == f"{urn('prov')}::id-1"  # only the last `::` part is the provider's id
    assert full.property_dependencies == (("a", ()), ("z", (urn("a"),)))
    assert full.dependencies == (urn("a"),) and dict(full.inputs) == {"k": 1}


def test_a_dependency_on_a_component_covers_its_descendants_but_not_for_its_own_children() -> None:
    group = comp("group")
    inner = comp("inner", parent=group.urn)
    a = res("a", parent=group.urn)
    b = res("b", parent=inner.urn)
    user = res("user", dependencies=(group.urn,))
    custom_parent = res("cp")
    child_of_custom = res("cc", parent=custom_parent.urn)
    on_custom = res("oc", dependencies=(custom_parent.urn,))
    outside = res("out", dependencies=(urn("not-in-graph"),))
    graph = OrderGraph([group, inner, a, b, user, custom_parent, child_of_custom, on_custom, outside])
    assert graph.dependencies(user.urn) == {group.urn, inner.urn, a.urn, b.urn}
    assert graph.dependencies(a.urn) == {group.urn}  # its own parent component: no expansion
    assert graph.dependencies(b.urn) == {inner.urn}
    assert graph.dependencies(on_custom.urn) == {custom_parent.urn}  # a custom resource covers nothing
    assert graph.dependencies(outside.urn) == set()
    assert graph.dependents(a.urn) == {user.urn} and graph.dependents(custom_parent.urn) == {
        child_of_custom.urn,
        on_custom.urn,
    }
    # a member that depends on its own group does not depend on itself
    member = res("m", parent=group.urn, dependencies=(group.urn,))
    looped = OrderGraph([group, member, res("z", parent=group.urn, dependencies=(group.urn,))])
    assert member.urn not in looped.dependencies(member.urn)
    # a child whose parent is not in the graph is nobody's child
    orphan = OrderGraph([res("o", parent=urn("gone")), comp("gone2")])
    assert orphan.dependencies(urn("o")) == set()


def test_must_wait_returns_the_path_in_each_phase_or_none() -> None:
    a = res("a")
    b = res("b", dependencies=(a.urn,))
    c = res("c", dependencies=(b.urn,))
    d = res("d", dependencies=(a.urn,))
    graph = OrderGraph([a, b, c, d])
    assert graph.must_wait(a.urn, c.urn, "create") == [c.urn, b.urn, a.urn]
    assert graph.must_wait(c.urn, a.urn, "create") is None
    assert graph.must_wait(c.urn, a.urn, "delete") == [a.urn, b.urn, c.urn]
    assert graph.must_wait(a.urn, c.urn, "delete") is None
    assert graph.must_wait(d.urn, c.urn, "create") is None and graph.must_wait(d.urn, c.urn, "delete") is None
    assert graph.must_wait(a.urn, a.urn, "create") == [a.urn]
    # the shortest path is the one given
    e = res("e", dependencies=(a.urn, c.urn))
    graph = OrderGraph([a, b, c, e])
    assert graph.must_wait(a.urn, e.urn, "create") == [e.urn, a.urn]


def test_create_waves_skip_components_without_adding_a_wave_for_them() -> None:
    first = res("first")
    group = comp("group", dependencies=(first.urn,))
    inside = res("inside", parent=group.urn)
    after = res("after", dependencies=(inside.urn,))
    lone = res("lone")
    beside = res("beside", dependencies=(first.urn,))
    graph = OrderGraph([first, group, inside, after, lone, beside])
    # `inside` waits for `first` through its component, `beside` directly: the same wave
    assert names(graph, graph.create_waves()) == [["first", "lone"], ["beside", "inside"], ["after"]]
    assert [graph.wave_of(u, "create") for u in (first.urn, inside.urn, after.urn, group.urn)] == [1, 2, 3, 0]
    assert names(graph, graph.delete_waves()) == [
        ["after", "beside", "lone"],
        ["inside"],
        ["group"],
        ["first"],
    ]
    assert [graph.wave_of(u, "delete") for u in (after.urn, group.urn, first.urn)] == [1, 3, 4]
    assert OrderGraph([]).create_waves() == [] and OrderGraph([]).delete_waves() == []


def test_cycles_are_refused_in_both_phases() -> None:
    a = res("a", dependencies=(urn("b"),))
    b = res("b", dependencies=(a.urn,))
    free = res("free")
    with pytest.raises(CycleError, match=r"^dependency cycle among \['t:m:R a', 't:m:R b'\]$"):
        OrderGraph([a, b, free]).create_waves()
    with pytest.raises(CycleError, match=r"^dependency cycle among \['t:m:R a', 't:m:R b'\]$"):
        OrderGraph([a, b, free]).delete_waves()


def test_without_edge_drops_the_edge_from_every_field_and_keeps_the_rest() -> None:
    target, other = res("t"), res("o")
    node = res(
        "n",
        parent=target.urn,
        dependencies=(target.urn, other.urn),
        property_dependencies=(("k", (target.urn, other.urn)),),
        provider=target.urn,
        deleted_with=target.urn,
        remote=True,
        inputs={"i": 1},
    )
    graph = OrderGraph([target, other, node]).without_edge(node.urn, target.urn)
    cut = graph.nodes[node.urn]
    assert (cut.parent, cut.provider, cut.deleted_with) == (None, None, None)
    assert cut.dependencies == (other.urn,) and cut.property_dependencies == (("k", (other.urn,)),)
    assert cut.remote and dict(cut.inputs) == {"i": 1}
    assert graph.dependencies(node.urn) == {other.urn}
    kept = OrderGraph([target, other, node]).without_edge(node.urn, urn("elsewhere")).nodes[node.urn]
    assert (kept.parent, kept.provider, kept.deleted_with) == (target.urn, target.urn, target.urn)


# ---- selectors and the order check -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "kind", "node", "matches"),
    [
        (Selector(label="l", type="t:*"), "platform", res("x"), True),
        (Selector(label="l", type="t:m:Q"), "platform", res("x"), False),
        (Selector(label="l", type="t:*", name="x*"), "workload", res("xy"), True),
        (Selector(label="l", type="t:*", name="x*"), "workload", res("yx"), False),
        (Selector(label="l", type="T:*"), "platform", res("x"), False),  # case counts
        (Selector(label="l", type="t:*", stack="workload"), "platform", res("x"), False),
        (Selector(label="l", type="t:*", stack="workload"), "workload", res("x"), True),
        (
            Selector(label="l", type="t:*", where={"a.b": "v*"}),
            "platform",
            res("x", inputs={"a": {"b": "v1"}}),
            True,
        ),
        (
            Selector(label="l", type="t:*", where={"a.b": "v*"}),
            "platform",
            res("x", inputs={"a": {"b": "w"}}),
            False,
        ),
        (Selector(label="l", type="t:*", where={"a.b": "v*"}), "platform", res("x", inputs={"a": {}}), False),
        (
            Selector(label="l", type="t:*", where={"a.b": "v*"}),
            "platform",
            res("x", inputs={"a": "v"}),
            False,
        ),
        (
            Selector(label="l", type="t:*", where={"a.b": "*"}),
            "platform",
            res("x", inputs={"a": {"b": None}}),
            False,
        ),
        (
            Selector(label="l", type="t:*", where={"a.b": "*"}),
            "platform",
            res("x", inputs={"a": {"b": ["v"]}}),
            False,
        ),
        (Selector(label="l", type="t:*", where={"n": "3"}), "platform", res("x", inputs={"n": 3}), True),
        (Selector(label="l", type="t:*", where={"n": "3*"}), "platform", res("x", inputs={"n": 3.5}), True),
        (
            Selector(label="l", type="t:*", where={"a": "1", "b": "2"}),
            "platform",
            res("x", inputs={"a": "1", "b": "3"}),
            False,
        ),
    ],
)
def test_a_selector_matches_type_name_stack_and_input_values(
    selector: Selector, kind: Any, node: Node, matches: bool
) -> None:
    assert selector.matches(kind, node) is matches


def _spec(
    *invariants: Invariant, create: list[Any] | None = None, delete: list[Any] | None = None
) -> OrderInvariants:
    images = ImageInvariant(
        id="img", why="w", produced_by=ProducedBy(pinned=False, blueprint_fields=[], config_fields=[])
    )
    order = StackOrder(create=create or ["platform", "workload"], delete=delete or ["workload", "platform"])
    return OrderInvariants(stack_order=order, invariants=list(invariants), images=images)


HELD = Selector(label="the app", type="t:*", name="app*")
NEEDED = Selector(label="the base", type="t:*", name="base*")
RULE = Invariant(id="app-needs-base", why="w", while_any=[HELD], requires=[NEEDED])


def test_within_a_stack_a_dependency_path_keeps_the_order_in_both_phases() -> None:
    base = res("base")
    app = res("app", dependencies=(base.urn,))
    assert check_order([StackGraph("platform", "p", OrderGraph([base, app]))], _spec(RULE)) == []
    loose = OrderGraph([base, res("app")])
    violations = check_order([StackGraph("platform", "p", loose)], _spec(RULE))
    assert [str(v) for v in violations] == [
        "[app-needs-base] create: t:m:R base (p) (the base) may not exist yet when t:m:R app (p) is created: "
        "no dependency path makes the engine wait (create waves 1 and 1)",
        "[app-needs-base] delete: t:m:R base (p) (the base) can be deleted while t:m:R app (p) still exists: "
        "no dependency path makes the engine wait (delete waves 1 and 1)",
    ]
    # the wrong way round: the app first, the base after it
    backwards = OrderGraph([res("base", dependencies=(urn("app"),)), res("app")])
    messages = [v.message for v in check_order([StackGraph("platform", "p", backwards)], _spec(RULE))]
    assert (
        len(messages) == 2
        and "(create waves 1 and 2)" in messages[0]
        and "(delete waves 2 and 1)" in messages[1]
    )


def test_across_stacks_the_stack_order_decides() -> None:
    rule = RULE.model_copy(update={"while_any": [HELD.model_copy(update={"stack": "workload"})]})
    platform = StackGraph("platform", "platform", OrderGraph([res("base")]))
    workload = StackGraph("workload", "workload w", OrderGraph([res("app")]))
    assert check_order([platform, workload], _spec(rule)) == []
    create_wrong = check_order([platform, workload], _spec(rule, create=["workload", "platform"]))
    assert [(v.phase, v.message.split(": ", 1)[1]) for v in create_wrong] == [
        ("create", "the stack order (create: workload then platform) does not put one before the other")
    ]
    delete_wrong = check_order([platform, workload], _spec(rule, delete=["platform", "workload"]))
    assert [v.phase for v in delete_wrong] == ["delete"]
    assert delete_wrong[0].message.startswith(
        "t:m:R base (platform) (the base) can be deleted while t:m:R app (workload w) still exists"
    )
    # two stacks of the same kind have no order between them
    other = StackGraph("workload", "workload v", OrderGraph([res("base")]))
    assert [v.phase for v in check_order([other, workload], _spec(RULE))] == ["create", "delete"]


def test_a_missing_requirement_is_named_unless_optional_and_a_resource_never_needs_itself() -> None:
    apps = [res(f"app{i}") for i in range(4)]
    stack = StackGraph("platform", "p", OrderGraph(apps))
    [violation] = check_order([stack], _spec(RULE))
    assert violation == Violation(
        "app-needs-base",
        "create",
        "t:m:R app0 (p), t:m:R app1 (p), t:m:R app2 (p) need(s) the base, which no stack has",
    )
    optional = RULE.model_copy(update={"requires": [NEEDED.model_copy(update={"optional": True})]})
    assert check_order([stack], _spec(optional)) == []
    # nothing held: nothing required
    assert check_order([StackGraph("platform", "p", OrderGraph([res("other")]))], _spec(RULE)) == []
    # a selector matching the same resource on both sides compares it with the others only
    both = Invariant(id="i", why="w", while_any=[HELD], requires=[HELD])
    assert check_order([StackGraph("platform", "p", OrderGraph([res("app")]))], _spec(both)) == []


def test_an_invariant_nothing_holds_is_passed_over_and_the_next_one_is_still_checked() -> None:
    idle = Invariant(
        id="idle", why="w", while_any=[Selector(label="no one", type="t:*", name="none*")], requires=[NEEDED]
    )
    loose = StackGraph("platform", "p", OrderGraph([res("base"), res("app")]))
    assert [(v.invariant, v.phase) for v in check_order([loose], _spec(idle, RULE))] == [
        ("app-needs-base", "create"),
        ("app-needs-base", "delete"),
    ]


def test_recorded_deletes_need_the_protected_resource_gone_strictly_first() -> None:
    base, app = res("base"), res("app")
    stack = StackGraph("platform", "p", OrderGraph([base, app]))
    assert check_recorded_deletes([(stack, [[app.urn], [base.urn]])], _spec(RULE)) == []
    [together] = check_recorded_deletes([(stack, [[app.urn, base.urn]])], _spec(RULE))
    assert together.message == (
        "t:m:R base (p) (the base) was deleted (run 1, wave 1) while t:m:R app (p) still existed "
        "(deleted in run 1, wave 1)"
    )
    [late] = check_recorded_deletes([(stack, [[base.urn], [], [app.urn]])], _spec(RULE))
    assert "(run 1, wave 1)" in late.message and "(deleted in run 1, wave 3)" in late.message
    assert check_recorded_deletes([(stack, [[base.urn]])], _spec(RULE)) == []  # app never deleted
    assert check_recorded_deletes([(stack, [[app.urn]])], _spec(RULE)) == []
    # across runs: the run order counts before the wave
    other = StackGraph("platform", "q", OrderGraph([res("base")]))
    apps = StackGraph("platform", "r", OrderGraph([res("app")]))
    assert check_recorded_deletes([(apps, [[], [app.urn]]), (other, [[base.urn]])], _spec(RULE)) == []
    [wrong] = check_recorded_deletes([(other, [[], [base.urn]]), (apps, [[app.urn]])], _spec(RULE))
    assert "(run 1, wave 2)" in wrong.message and "(deleted in run 2, wave 1)" in wrong.message


# ---- images ---------------------------------------------------------------------------------------


def test_pod_images_finds_every_container_at_any_depth() -> None:
    obj = {
        "kind": "RayService",
        "metadata": {"name": "r"},
        "spec": {
            "groups": [
                {
                    "template": {
                        "spec": {
                            "initContainers": [{"name": "i", "image": "a"}],
                            "containers": [{"image": "b"}],
                        }
                    }
                },
                {"containers": [{"name": "no-image"}, "not a mapping"]},
            ]
        },
    }
    assert pod_images([obj, {"kind": "ConfigMap"}]) == [
        ("RayService/r", "i", "a"),
        ("RayService/r", "?", "b"),
    ]


def test_produced_images_read_the_named_fields_and_the_pins_when_asked() -> None:
    produced_by = ProducedBy(
        pinned=False, blueprint_fields=["image.serving"], config_fields=["image", "pushed"]
    )
    spec = _spec().model_copy(update={"images": ImageInvariant(id="img", why="w", produced_by=produced_by)})
    blueprint = SimpleNamespace(image=SimpleNamespace(serving="bp/img"))
    config = SimpleNamespace(blueprint=blueprint, image="", pushed=["x", "", "y"])
    assert produced_images(config, spec) == {"bp/img", "x", "y"}
    pinned = spec.model_copy(
        update={
            "images": spec.images.model_copy(
                update={"produced_by": produced_by.model_copy(update={"pinned": True})}
            )
        }
    )
    with_pins = produced_images(config, pinned)
    assert {"bp/img", "x", "y"} < with_pins and len(with_pins) > 3
    missing = SimpleNamespace(blueprint=SimpleNamespace(), image=None, pushed=None)
    assert produced_images(missing, spec) == set()
    [violation] = check_images(
        [
            {
                "kind": "Job",
                "metadata": {"name": "j"},
                "spec": {"containers": [{"name": "c", "image": "z"}, {"name": "d", "image": "x"}]},
            }
        ],
        {"x"},
        spec,
    )
    assert violation.invariant == "img" and violation.phase == "image"
    assert violation.message.startswith("Job/j container 'c' uses z, which no earlier step produced")
    assert violation.message.endswith("recorded as delivered in the workload config (image, pushed))")


def test_recorded_deletes_check_every_required_resource_after_one_that_was_in_order() -> None:
    """A protected resource that outlived the first base but not the second: the second is named
    (the loop goes on past a pair in order instead of leaving the resource's other requirements)."""
    first, second, app = res("base-1"), res("base-2"), res("app")
    stack = StackGraph("platform", "p", OrderGraph([first, second, app]))
    [violation] = check_recorded_deletes([(stack, [[second.urn], [app.urn], [first.urn]])], _spec(RULE))
    assert violation.message.startswith("t:m:R base-2 (p) (the base) was deleted (run 1, wave 1)")


def test_the_invariants_and_their_results_cannot_be_changed_after_they_are_made() -> None:
    """Selectors, invariants and results are values: shared by every check of a run, never edited."""
    with pytest.raises(ValueError):
        HELD.label = "changed"  # type: ignore[misc]
    stack = StackGraph("platform", "p", OrderGraph([res("base")]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        stack.name = "q"  # type: ignore[misc]
    violation = Violation("i", "create", "m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        violation.message = "other"  # type: ignore[misc]
