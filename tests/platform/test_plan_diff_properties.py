"""Properties of `llmctl plan diff` (`infra/plan/diff.py`), for any pair of plans.

The rule, from the module's docstring and the command's purpose (what changes between two plans):
a change to any input, parent, dependency, stack, policy verdict or cost shows in the diff, and no
change shows none. So for any JSON inputs (nested mappings and lists, lists of named items, and
strings holding YAML or JSON documents):

- a value compared with itself has no change; a value compared with any different one has at least
  one (`true` is not `1`; a document re-laid out, or named items that only changed places, are
  changes the engine would send);
- the diff from new to old is the mirror of the diff from old to new (added and removed swapped);
- for plan documents, changing one resource's inputs, parent or dependencies shows that resource as
  changed and nothing else, adding a stack or a policy verdict shows it added (removing one, removed),
  and an unchanged plan is not `changed`.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from llmctl.infra.plan.diff import diff_plans, diff_values

KEYS = st.sampled_from(("a", "b", "name", "image", "k.io/x", "1x"))
leaf_st = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from(("", "x", "y", "x: 1\n", "x:  1\n", "[1, 2]", "[1,2]")),
)
named_st = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(("p", "q", "r")), "v": leaf_st}),
    max_size=3,
)
value_st = st.recursive(
    st.one_of(leaf_st, named_st),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@given(value_st, value_st)
@example({"a": True}, {"a": 1})  # Python's == called these equal
@example({"a": "x: 1\n"}, {"a": "x:  1\n"})  # the same document laid out differently
@example([{"name": "p", "v": 1}, {"name": "q", "v": 1}], [{"name": "q", "v": 1}, {"name": "p", "v": 1}])
@example(
    [{"name": "p", "v": 1}, {"name": "p", "v": 2}], [{"name": "p", "v": 2}]
)  # one name twice: by position
def test_any_change_shows_and_no_change_shows_none(old: Any, new: Any) -> None:
    assert diff_values(old, copy.deepcopy(old)) == []
    changes = diff_values(old, new)
    assert bool(changes) is (_canonical(old) != _canonical(new))


@given(value_st, value_st)
def test_the_diff_back_is_the_mirror_of_the_diff_forward(old: Any, new: Any) -> None:
    mirror = {"added": "removed", "removed": "added", "changed": "changed"}
    forward = sorted(
        (c.path, mirror[c.change], _canonical(c.new), _canonical(c.old)) for c in diff_values(old, new)
    )
    back = sorted((c.path, c.change, _canonical(c.old), _canonical(c.new)) for c in diff_values(new, old))
    assert forward == back


def _plan(
    resources: list[dict[str, Any]], stacks: tuple[str, ...] = ("llmctl-platform/dev",)
) -> dict[str, Any]:
    return {"stacks": [{"id": sid, "resources": copy.deepcopy(resources)} for sid in stacks], "cost": {}}


resource_st = st.builds(
    lambda name, inputs, parent, deps: {
        "urn": f"urn:pulumi:dev::p::t:m:R::{name}",
        "type": "t:m:R",
        "name": name,
        "inputs": inputs,
        "parent": parent,
        "depends_on": deps,
    },
    st.sampled_from(("r1", "r2", "r3")),
    st.dictionaries(KEYS, value_st, max_size=3),
    st.sampled_from((None, "urn:p1", "urn:p2")),
    st.lists(st.sampled_from(("urn:d1", "urn:d2")), max_size=2, unique=True),
)


@given(
    st.lists(resource_st, min_size=1, max_size=3, unique_by=lambda r: r["name"]),
    st.data(),
)
def test_a_change_to_one_resource_shows_that_resource_only_and_no_change_shows_none(
    resources: list[dict[str, Any]], data: st.DataObject
) -> None:
    old = _plan(resources)
    assert not diff_plans(old, copy.deepcopy(old)).changed
    index = data.draw(st.integers(0, len(resources) - 1))
    field = data.draw(st.sampled_from(("inputs", "parent", "depends_on")))
    value = data.draw(
        {
            "inputs": st.dictionaries(KEYS, value_st, max_size=3),
            "parent": st.sampled_from((None, "urn:p3")),
            "depends_on": st.just(["urn:d3"]),
        }[field]
    )
    new = copy.deepcopy(old)
    new["stacks"][0]["resources"][index][field] = value
    diff = diff_plans(old, new)
    moved = _canonical(resources[index][field]) != _canonical(value)
    assert [r.name for r in diff.resources] == ([resources[index]["name"]] if moved else [])
    assert diff.changed is moved
    grown = diff_plans(old, _plan(resources, ("llmctl-platform/dev", "llmctl-a/dev")))
    assert grown.stacks_added == ["llmctl-a/dev"] and grown.changed
    verdict = {
        "rule": data.draw(st.sampled_from(("r1", "r2"))),
        "urn": "urn:x",
        "message": "m",
        "severity": "mandatory",
    }
    judged = diff_plans(old, {**copy.deepcopy(old), "violations": [verdict]})
    assert judged.violations_added == [verdict] and judged.changed and not judged.resources
    assert diff_plans({**copy.deepcopy(old), "violations": [verdict]}, old).violations_removed == [verdict]
