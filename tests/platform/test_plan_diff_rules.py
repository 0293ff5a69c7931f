"""`plan diff`'s decisions one at a time, on plan documents built by hand (no CLI, no Pulumi): how a
path is written, when a list is matched by name, when a string is compared as a document, which
resource changes and stack/violation/cost differences are reported, and when the diff counts as a
change (the exit code). Fast, so `make mutation` runs it first for the plan-diff module."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from llmctl.infra.plan.diff import CostDiff, InputChange, PlanDiff, ResourceChange, diff_plans, diff_values

PLATFORM = "llmctl-platform/dev"


def _res(name: str, inputs: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "urn": f"urn:pulumi:dev::p::t:m:R::{name}",
        "type": "t:m:R",
        "name": name,
        "inputs": inputs or {},
        **extra,
    }


def _plan(*stacks: tuple[str, list[dict[str, Any]]], **extra: Any) -> dict[str, Any]:
    return {"stacks": [{"id": sid, "resources": resources} for sid, resources in stacks], **extra}


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("image", "spec.image"),
        ("_x-1", "spec._x-1"),  # letters, digits, `_` and `-` after a letter or `_`: plain
        ("1x", 'spec["1x"]'),  # starts with a digit
        ("k.io/x", 'spec["k.io/x"]'),
        ('say "hi"', 'spec["say \\"hi\\""]'),
        ("back\\slash", 'spec["back\\\\slash"]'),
    ],
)
def test_a_key_is_written_plain_only_when_it_is_an_identifier(key: str, path: str) -> None:
    assert diff_values({"spec": {key: 1}}, {"spec": {key: 2}}) == [InputChange(path, "changed", 1, 2)]


def test_top_level_keys_have_no_leading_dot_and_document_keys_follow_the_marker() -> None:
    assert diff_values({"a": 1}, {"a": 2}) == [InputChange("a", "changed", 1, 2)]
    assert diff_values({"a": 1}, {}) == [InputChange("a", "removed", 1, None)]
    assert diff_values({}, {"a": 1}) == [InputChange("a", "added", None, 1)]
    assert diff_values({"c": "x: 1\ny: 2\n"}, {"c": "x: 1\ny: 3\n"}) == [
        InputChange("c > y", "changed", 2, 3)
    ]
    assert diff_values({"c": "x: 1\n"}, {"c": "x: 1\nz: [a]\n"}) == [
        InputChange("c > z", "added", None, ["a"])
    ]
    assert diff_values({"c": "x: 1\nz: 0\n"}, {"c": "x: 1\n"}) == [InputChange("c > z", "removed", 0, None)]


def test_equal_values_give_nothing_and_scalars_one_change() -> None:
    assert diff_values({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]}) == []
    assert diff_values(1, 2) == [InputChange("", "changed", 1, 2)]
    assert diff_values({"a": 1}, [1]) == [InputChange("", "changed", {"a": 1}, [1])]


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        # one line of plain text is never parsed (a scalar that YAML would read as a mapping)
        ("a: 1", "a: 2", [InputChange("v", "changed", "a: 1", "a: 2")]),
        # one line that opens a JSON object or list is, leading blanks allowed
        ('{"a": 1}', '{"a": 2}', [InputChange("v > a", "changed", 1, 2)]),
        (' {"a": [1, 2]}', ' {"a": [1, 3]}', [InputChange("v > a[1]", "changed", 2, 3)]),
        ("  [1, 2]", "  [1, 2, 3]", [InputChange("v >[2]", "added", None, 3)]),
        # both must be documents
        ('{"a": 1}', "plain", [InputChange("v", "changed", '{"a": 1}', "plain")]),
        ("plain", '{"a": 1}', [InputChange("v", "changed", "plain", '{"a": 1}')]),
        # many lines that are a scalar, or not YAML at all, are compared as text
        ("one\ntwo", "one\nthree", [InputChange("v", "changed", "one\ntwo", "one\nthree")]),
        ("a: [\n", "a: ]\n", [InputChange("v", "changed", "a: [\n", "a: ]\n")]),
    ],
)
def test_strings_are_compared_inside_only_when_both_are_documents(
    old: str, new: str, changes: list[InputChange]
) -> None:
    assert diff_values({"v": old}, {"v": new}) == changes


def test_lists_are_matched_by_name_only_when_every_item_has_a_distinct_string_name() -> None:
    named_old = [{"name": "a", "v": 1}, {"name": "b", "v": 1}]
    named_new = [{"name": "c", "v": 1}, {"name": "b", "v": 2}, {"name": "d", "v": 1}]
    # old names first in their order, then the new ones in theirs
    assert diff_values(named_old, named_new) == [
        InputChange("[name=a]", "removed", {"name": "a", "v": 1}, None),
        InputChange("[name=b].v", "changed", 1, 2),
        InputChange("[name=c]", "added", None, {"name": "c", "v": 1}),
        InputChange("[name=d]", "added", None, {"name": "d", "v": 1}),
    ]
    duplicate = [{"name": "a"}, {"name": "a"}]
    # matched by name; items that only changed places are one change of the list's order (the engine
    # sends the new order: it was no change before, found by the properties)
    assert diff_values([{"name": "a"}, {"name": "b"}], [{"name": "b"}, {"name": "a"}]) == [
        InputChange("", "changed", ["a", "b"], ["b", "a"])
    ]
    assert diff_values(duplicate, [{"name": "b"}, {"name": "a"}]) == [
        InputChange("[0].name", "changed", "a", "b")
    ]
    assert diff_values([{"name": "a"}, {"name": "b"}], [{"name": "b"}, {"x": 1}]) == [
        InputChange("[0].name", "changed", "a", "b"),
        InputChange("[1].name", "removed", "b", None),
        InputChange("[1].x", "added", None, 1),
    ]
    assert diff_values([{"name": "a"}, {"name": 2}], [{"name": 2}, {"name": "a"}]) == [
        InputChange("[0].name", "changed", "a", 2),
        InputChange("[1].name", "changed", 2, "a"),
    ]
    assert diff_values(["a", "b"], ["b", "a"]) == [
        InputChange("[0]", "changed", "a", "b"),
        InputChange("[1]", "changed", "b", "a"),
    ]
    # an empty list is positional: its other side is listed item by item
    assert diff_values([], [{"name": "a"}]) == [InputChange("[0]", "added", None, {"name": "a"})]
    assert diff_values([{"name": "a"}], []) == [InputChange("[0]", "removed", {"name": "a"}, None)]


def test_positional_lists_report_added_and_removed_tails() -> None:
    assert diff_values([1, 2, 3], [1, 5]) == [
        InputChange("[1]", "changed", 2, 5),
        InputChange("[2]", "removed", 3, None),
    ]
    assert diff_values([1], [1, 2, 3]) == [
        InputChange("[1]", "added", None, 2),
        InputChange("[2]", "added", None, 3),
    ]


def test_resources_added_removed_and_changed_in_stack_then_urn_order() -> None:
    old = _plan(
        ("b/dev", [_res("x", {"v": 1})]),
        (PLATFORM, [_res("keep", {"v": 1}), _res("gone"), _res("edit", {"v": 1})]),
    )
    new = _plan(
        ("b/dev", [_res("x", {"v": 1})]),
        (PLATFORM, [_res("keep", {"v": 1}), _res("edit", {"v": 2}), _res("born")]),
        ("a/dev", [_res("x")]),
    )
    diff = diff_plans(old, new)
    assert [(r.stack, r.name, r.action) for r in diff.resources] == [
        ("a/dev", "x", "add"),
        (PLATFORM, "born", "add"),
        (PLATFORM, "edit", "change"),
        (PLATFORM, "gone", "remove"),
    ]
    assert diff.of("change") == [
        ResourceChange(
            PLATFORM, _res("edit")["urn"], "t:m:R", "edit", "change", [InputChange("v", "changed", 1, 2)]
        )
    ]
    assert diff.of("add")[0].inputs == [] and diff.of("remove")[0].type == "t:m:R"
    assert diff.stacks() == ["a/dev", PLATFORM]
    assert (diff.stacks_added, diff.stacks_removed) == (["a/dev"], [])
    assert diff.resource_counts == (4, 5)
    assert diff_plans(new, old).stacks_removed == ["a/dev"]


def test_a_new_parent_or_dependency_is_a_change_even_with_the_same_inputs() -> None:
    old = _plan((PLATFORM, [_res("r", {"v": 1}, parent="p1", depends_on=["a"])]))
    moved = _plan((PLATFORM, [_res("r", {"v": 1}, parent="p2", depends_on=["a"])]))
    rewired = _plan((PLATFORM, [_res("r", {"v": 2}, parent="p1", depends_on=["a", "b"])]))
    [change] = diff_plans(old, moved).resources
    assert change.inputs == [InputChange("(parent)", "changed", "p1", "p2")]
    [change] = diff_plans(old, rewired).resources
    assert change.inputs == [
        InputChange("v", "changed", 1, 2),
        InputChange("(depends_on)", "changed", ["a"], ["a", "b"]),
    ]
    assert diff_plans(old, old).resources == []
    no_inputs = _plan((PLATFORM, [{k: v for k, v in _res("r").items() if k != "inputs"}]))
    assert diff_plans(no_inputs, _plan((PLATFORM, [_res("r", {})]))).resources == []


def _cost(hourly: float, platform: float, **workloads: float) -> dict[str, Any]:
    rows = [{"blueprint": name, "serving_hourly_usd": usd} for name, usd in workloads.items()]
    return {"hourly_usd": hourly, "platform_hourly_usd": platform, "workloads": rows}


def test_cost_parts_keep_the_old_order_then_the_new_parts_sorted() -> None:
    old = _plan(cost=_cost(3.0, 1.0, b=2.0))
    new = _plan(cost=_cost(4.5, 1.5, z=1.0, b=1.5, a=0.5))
    cost = diff_plans(old, new).cost
    assert (cost.before, cost.after, cost.delta) == (3.0, 4.5, 1.5)
    assert cost.parts == {
        "platform": (1.0, 1.5),
        "workload b": (2.0, 1.5),
        "workload a": (None, 0.5),
        "workload z": (None, 1.0),
    }
    assert list(cost.parts) == ["platform", "workload b", "workload a", "workload z"]
    gone = diff_plans(new, old).cost.parts
    assert gone["workload z"] == (1.0, None)
    assert diff_plans(_plan(), _plan(cost=None)).cost == CostDiff(0.0, 0.0, {"platform": (0.0, 0.0)})


def test_cost_delta_is_rounded_to_four_places_and_shaped_for_json() -> None:
    cost = CostDiff(0.1, 0.3, {"platform": (0.1, None)})
    assert cost.delta == 0.2  # 0.3 - 0.1 is 0.19999999999999998 unrounded
    assert CostDiff(1.0, 1.00004).delta == 0.0 and CostDiff(1.0, 1.00006).delta == 0.0001
    assert CostDiff(2.0, 1.5).delta == -0.5
    assert cost.to_dict() == {
        "hourly_usd_before": 0.1,
        "hourly_usd_after": 0.3,
        "hourly_usd_delta": 0.2,
        "parts": [{"part": "platform", "hourly_usd_before": 0.1, "hourly_usd_after": None}],
    }


def _violation(rule: str, **fields: str) -> dict[str, Any]:
    return {"rule": rule, "urn": "u", "message": "m", "severity": "error", **fields}


def test_violations_are_matched_on_rule_urn_message_and_severity() -> None:
    kept, moved = _violation("r1"), _violation("r2")
    old = _plan(violations=[kept, moved, _violation("r3", severity="warning")])
    new = _plan(violations=[kept, _violation("r2", urn="v"), _violation("r3", severity="error")])
    diff = diff_plans(old, new)
    assert diff.violations_added == [_violation("r2", urn="v"), _violation("r3")]
    assert diff.violations_removed == [moved, _violation("r3", severity="warning")]
    changed = diff_plans(_plan(violations=[kept]), _plan(violations=[_violation("r1", message="n")]))
    assert (changed.violations_added, changed.violations_removed) == (
        [_violation("r1", message="n")],
        [kept],
    )


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (_plan(), _plan(), False),
        (_plan(cost=_cost(1.0, 1.0)), _plan(cost=_cost(1.0, 1.0)), False),
        (_plan(cost=_cost(1.0, 1.0)), _plan(cost=_cost(1.5, 1.0)), True),  # total only
        (_plan(cost=_cost(2.0, 1.0, a=1.0)), _plan(cost=_cost(2.0, 1.5, a=0.5)), True),  # parts only
        (_plan(cost=_cost(1.0, 1.0)), _plan(cost=_cost(1.0, 1.0, a=0.0)), True),  # a new part
        (_plan(violations=[]), _plan(violations=[_violation("r")]), True),
        (_plan(violations=[_violation("r")]), _plan(violations=[]), True),
        ((PLATFORM, [_res("a")]), (PLATFORM, [_res("b")]), True),
    ],
)
def test_changed_is_true_for_any_difference_and_only_then(old: Any, new: Any, changed: bool) -> None:
    old = _plan(old) if isinstance(old, tuple) else old
    new = _plan(new) if isinstance(new, tuple) else new
    diff = diff_plans(old, new)
    assert diff.changed is changed and diff.to_dict()["changed"] is changed


def test_versions_and_missing_blueprints_show_only_when_they_differ() -> None:
    same = diff_plans(_plan(llmctl_version="1.0"), _plan(llmctl_version="1.0"))
    assert same.versions == ("1.0", "1.0") and "llmctl_versions" not in same.to_dict()
    assert same.missing == ([], []) and "missing_blueprints" not in same.to_dict() and same.notes() == []
    other = diff_plans(
        _plan(llmctl_version="1.0", missing_blueprints=["b", "a"]),
        _plan(llmctl_version="1.1", missing_blueprints="not a list"),
    )
    data = other.to_dict()
    assert data["llmctl_versions"] == {"old": "1.0", "new": "1.1"}
    assert data["missing_blueprints"] == {"old": ["a", "b"], "new": []}
    assert other.notes() == ["not in the old revision: a, b (its workload stack shows as new)"]
    newer = diff_plans(_plan(), _plan(missing_blueprints=["c"]))
    assert newer.to_dict()["missing_blueprints"] == {"old": [], "new": ["c"]}
    assert newer.notes() == ["not in the new revision: c (its workload stack shows as removed)"]


def test_json_shape_counts_each_action() -> None:
    old = _plan((PLATFORM, [_res("gone"), _res("edit", {"v": 1})]))
    new = _plan((PLATFORM, [_res("edit", {"v": 2}), _res("born1"), _res("born2")]))
    data = PlanDiff.to_dict(diff_plans(old, new))
    assert data["summary"] == {"added": 2, "removed": 1, "changed": 1}
    assert json.loads(json.dumps(data))["resources"][2]["inputs"] == [
        {"path": "v", "change": "changed", "old": 1, "new": 2}
    ]


def test_a_diff_made_without_plans_is_empty_and_unchanged() -> None:
    empty = PlanDiff(resources=[], cost=CostDiff(1.0, 1.0))
    assert (empty.resource_counts, empty.versions, empty.missing) == ((0, 0), ("", ""), ([], []))
    assert not empty.changed and empty.notes() == [] and empty.stacks() == []


def test_changes_are_frozen_values() -> None:
    change = InputChange("a", "changed", 1, 2)
    resource = ResourceChange("s", "u", "t", "n", "add")
    assert len({change, InputChange("a", "changed", 1, 2)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.new = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        resource.action = "remove"  # type: ignore[misc]
