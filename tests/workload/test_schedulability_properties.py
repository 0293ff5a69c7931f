"""Properties of the schedulability check (`infra/workload/schedulability.py`), for any input.

The rules, from the module's docstring and Kubernetes' own node-affinity code
(kubernetes/kubernetes@d572249d3056b06877dff30c8ddbe30e75d3d353,
staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go and
apimachinery's labels/selector.go):

- the terms of a required node affinity are ORed, the expressions of one term ANDed, and a term
  with no expressions selects no node ("nil or empty term selects no objects");
- `NotIn` is the negation of `In`, `DoesNotExist` of `Exists`; `Gt`/`Lt` compare a label that is a
  base-10 int64 (`strconv.ParseInt(value, 10, 64)`) and match nothing else;
- a nodeSelector needs every key equal, so it matches exactly when each of its pairs does;
- a pod fits a pool when each request is at most Karpenter's allocatable of one of its instance
  types (`capacity.allocatable`), so the verdict agrees with that arithmetic and a pod that fits
  keeps fitting when its requests shrink;
- a toleration tolerates a taint exactly as Kubernetes' `ToleratesTaint` decides; one added never
  makes a taint blocking; `operator: Exists` without a key tolerates all.

Hypothesis searches the inputs (profiles in tests/conftest.py); the failures it found are kept as
`@example`s."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from llmctl.blueprints.allocatable import node_allocatable
from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.config import PoolFacts
from llmctl.infra.workload.schedulability import check_schedulable, selector_matches, untolerated

KEYS = ("a", "b", "c")
# the int64 bounds on both sides (Go's ParseInt refuses what is past them)
INT64 = ("9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809")
VALUES = ("x", "y", "0", "1", "7", "-3", "+2", "1_0", " 1", *INT64)
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
expression_st = st.fixed_dictionaries(
    {
        "key": st.sampled_from(KEYS),
        "operator": st.sampled_from(OPERATORS),
        "values": st.lists(st.sampled_from(VALUES), min_size=1, max_size=2),
    }
)
term_st = st.lists(expression_st, max_size=3).map(lambda exprs: {"matchExpressions": exprs})


def _spec(*terms: dict[str, Any], selector: dict[str, str] | None = None) -> dict[str, Any]:
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }
    return {"nodeSelector": selector or {}, "affinity": affinity}


def _int64(text: str) -> int | None:
    """What Go's strconv.ParseInt(text, 10, 64) accepts (ASCII digits, an optional sign)."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not all("0" <= ch <= "9" for ch in body):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


@given(st.lists(term_st, min_size=1, max_size=3), labels_st)
@example([{"matchExpressions": []}], {})  # an empty term selected every node (Kubernetes: none)
def test_terms_are_ored_expressions_anded_and_an_empty_term_selects_nothing(
    terms: list[dict[str, Any]], labels: dict[str, str]
) -> None:
    def term_matches(term: dict[str, Any]) -> bool:
        exprs = term["matchExpressions"]
        return bool(exprs) and all(selector_matches(_spec({"matchExpressions": [e]}), labels) for e in exprs)

    assert selector_matches(_spec(*terms), labels) is any(term_matches(t) for t in terms)


@given(expression_st, labels_st)
@example({"key": "a", "operator": "Gt", "values": ["0"]}, {"a": "1_0"})  # Python's int() reads "1_0"
@example({"key": "a", "operator": "Lt", "values": ["0"]}, {"a": "-9223372036854775809"})
@example({"key": "a", "operator": "Gt", "values": ["0", "x"]}, {"a": "1"})  # Kubernetes: exactly one value
@example({"key": "a", "operator": "Lt", "values": ["0"]}, {"a": "-9223372036854775808"})  # int64's ends
@example({"key": "a", "operator": "Gt", "values": ["0"]}, {"a": "9223372036854775807"})
@example({"key": "a", "operator": "Gt", "values": ["0"]}, {"a": "9223372036854775808"})
def test_each_operator_against_its_definition(expr: dict[str, Any], labels: dict[str, str]) -> None:
    def matches(op: str) -> bool:
        return selector_matches(_spec({"matchExpressions": [{**expr, "operator": op}]}), labels)

    key, values = expr["key"], expr["values"]
    assert matches("In") is (key in labels and labels[key] in values)
    assert matches("NotIn") is not matches("In")
    assert matches("Exists") is (key in labels)
    assert matches("DoesNotExist") is not matches("Exists")
    have, want = _int64(labels.get(key, "")), _int64(values[0]) if len(values) == 1 else None
    comparable = have is not None and want is not None
    assert matches("Gt") is (comparable and have > want)  # type: ignore[operator]
    assert matches("Lt") is (comparable and have < want)  # type: ignore[operator]


@given(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3), labels_st, labels_st)
def test_a_node_selector_needs_every_pair_and_extra_node_labels_never_matter(
    selector: dict[str, str], labels: dict[str, str], extra: dict[str, str]
) -> None:
    spec = {"nodeSelector": selector}
    assert selector_matches(spec, labels) is all(labels.get(k) == v for k, v in selector.items())
    if selector_matches(spec, labels):
        assert selector_matches(spec, {**{k: v for k, v in extra.items() if k not in labels}, **labels})


TAINT_KEYS = ("t", "u")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
taint_st = st.builds(
    lambda key, value, effect: f"{key}{'=' + value if value else ''}:{effect}",
    st.sampled_from(TAINT_KEYS),
    st.sampled_from(("", "v", "w")),
    st.sampled_from(EFFECTS),
)
toleration_st = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(TAINT_KEYS),
        "operator": st.sampled_from(("Equal", "Exists")),
        "value": st.sampled_from(("", "v", "w")),
        "effect": st.sampled_from(EFFECTS),
    },
)


@given(taint_st, toleration_st)
def test_a_toleration_tolerates_a_taint_as_kubernetes_decides(taint: str, toleration: dict[str, str]) -> None:
    """Kubernetes' `Toleration.ToleratesTaint` (kubernetes/kubernetes@19c6083b5c8b499f3bdd52e5f58a0b6f645d0fd3,
    staging/src/k8s.io/api/core/v1/toleration.go): an empty effect matches every effect; an empty key
    matches every key (the API then requires `Exists`); `Exists` matches every value, `Equal` (or no
    operator) the same value."""
    if not toleration.get("key") and toleration.get("operator") != "Exists":
        return  # the API refuses a toleration without a key unless its operator is Exists
    pool = PoolFacts(name="p", taints=[taint], managed_by="existing")
    [parsed] = pool.taints
    expected = (
        (not toleration.get("effect") or toleration["effect"] == parsed.effect)
        and (not toleration.get("key") or toleration["key"] == parsed.key)
        and (
            toleration.get("operator") == "Exists" or (toleration.get("value") or "") == (parsed.value or "")
        )
    )
    blocking = parsed.effect != "PreferNoSchedule"
    assert (untolerated({"tolerations": [toleration]}, pool) == []) is (expected or not blocking)


@given(st.lists(taint_st, max_size=3), st.lists(toleration_st, max_size=3), toleration_st)
def test_a_toleration_added_never_blocks_more_and_exists_without_a_key_tolerates_all(
    taints: list[str], tolerations: list[dict[str, str]], more: dict[str, str]
) -> None:
    pool = PoolFacts(name="p", taints=taints, managed_by="existing")
    before = untolerated({"tolerations": tolerations}, pool)
    after = untolerated({"tolerations": [*tolerations, more]}, pool)
    assert all(t in before for t in after)
    assert all(t.effect != "PreferNoSchedule" for t in before)
    assert untolerated({"tolerations": [{"operator": "Exists"}]}, pool) == []


ROWS = sorted(hardware().instances)


def _fits(instance: str, cpu_m: int, memory_mi: int) -> bool:
    pool = PoolFacts(name="p", labels={"pool": "p"}, instance_types=[instance], managed_by="existing")
    container = {"name": "c", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{memory_mi}Mi"}}}
    spec = {"nodeSelector": {"pool": "p"}, "containers": [container]}
    manifest = {"kind": "Deployment", "metadata": {"name": "app"}, "spec": {"template": {"spec": spec}}}
    return not check_schedulable([manifest], [pool], hardware())


@given(st.sampled_from(ROWS), st.floats(0.01, 1.5), st.floats(0.01, 1.5), st.floats(0.0, 1.0))
def test_fits_exactly_when_karpenters_allocatable_holds_the_requests_and_keeps_fitting_smaller(
    name: str, cpu_share: float, memory_share: float, shrink: float
) -> None:
    node = node_allocatable(hardware().instance(name))
    cpu_m, memory_mi = max(1, int(node.cpu_m * cpu_share)), max(1, int(node.pod_memory_mib * memory_share))
    fits = _fits(name, cpu_m, memory_mi)
    assert fits is (cpu_m <= node.cpu_m and memory_mi <= node.pod_memory_mib)
    if fits:
        assert _fits(name, max(1, int(cpu_m * shrink)), max(1, int(memory_mi * shrink)))
