"""The schedulability check's rules one decision at a time, on hand-made pod specs and pools: each
node-affinity operator on both sides, each toleration rule, the Neuron scheduler threshold, the fit
boundary (a request equal to the allocatable fits) and which pool a message names. Fast (no
manifests are rendered), so `make mutation` runs it first for the schedulability module."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from workload_helpers import existing_cluster

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.hardware import hardware
from llmctl.infra.workload.config import PoolFacts
from llmctl.infra.workload.schedulability import (
    Problem,
    check_schedulable,
    selector_matches,
    untolerated,
    validate_workload,
)
from llmctl.infra.workload.scheduling.capacity import allocatable
from llmctl.infra.workload.scheduling.pods import PodTemplate

NEURON = "aws.amazon.com/neuron"
CORE = "aws.amazon.com/neuroncore"


def _affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    term = {"matchExpressions": list(expressions)}
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    }


def _expr(op: str, *values: str, key: str = "k") -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


@pytest.mark.parametrize(
    ("expression", "labels", "matches"),
    [
        (_expr("In", "a", "b"), {"k": "b"}, True),
        (_expr("In", "a"), {"k": "c"}, False),
        (_expr("In", "a"), {}, False),
        (_expr("NotIn", "a"), {}, True),
        (_expr("NotIn", "a"), {"k": "a"}, False),
        (_expr("NotIn", "a"), {"k": "c"}, True),
        (_expr("Exists"), {"k": ""}, True),
        (_expr("Exists"), {"other": "x"}, False),
        (_expr("DoesNotExist"), {}, True),
        (_expr("DoesNotExist"), {"k": "x"}, False),
        (_expr("Gt", "4"), {"k": "5"}, True),
        (_expr("Gt", "4"), {"k": "4"}, False),  # strictly greater
        (_expr("Gt", "4"), {"k": "3"}, False),
        (_expr("Gt", "4"), {}, False),
        (_expr("Lt", "4"), {"k": "3"}, True),
        (_expr("Lt", "4"), {"k": "4"}, False),  # strictly less
        (_expr("Lt", "4"), {"k": "5"}, False),
        (_expr("Lt", "4"), {}, False),
        (_expr("Gt", "4"), {"k": "five"}, False),  # not an integer: no match, no error
        (_expr("Gt"), {"k": "5"}, False),  # no value to compare with
        (_expr("Near", "a"), {"k": "a"}, False),  # an operator Kubernetes does not have
    ],
)
def test_each_affinity_operator_on_both_sides(
    expression: dict[str, Any], labels: dict[str, str], matches: bool
) -> None:
    assert selector_matches(_affinity(expression), labels) is matches


def test_node_selector_and_affinity_terms() -> None:
    assert selector_matches({}, {"any": "x"})
    assert selector_matches({"nodeSelector": {"a": "1"}}, {"a": "1", "b": "2"})
    assert not selector_matches({"nodeSelector": {"a": "1"}}, {"a": "2"})
    assert not selector_matches(
        {"nodeSelector": {"a": "1"}, **_affinity(_expr("Exists", key="b"))}, {"a": "2", "b": "x"}
    )
    # every expression of a term must hold; any one term is enough
    both = _affinity(_expr("In", "x", key="a"), _expr("In", "y", key="b"))
    assert selector_matches(both, {"a": "x", "b": "y"})
    assert not selector_matches(both, {"a": "x", "b": "z"})
    terms = [
        {"matchExpressions": [_expr("In", "x", key="a")]},
        {"matchExpressions": [_expr("In", "y", key="b")]},
    ]
    either = {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    }
    assert selector_matches(either, {"b": "y"})
    assert not selector_matches(either, {"a": "y", "b": "x"})
    # a term without expressions selects no node, as in Kubernetes (nodeaffinity.go: "nil or empty
    # term selects no objects"; it was read as no constraint before, found by the properties)
    assert not selector_matches(
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
                }
            }
        },
        {},
    )


def _pool(*taints: str, **fields: Any) -> PoolFacts:
    return PoolFacts.model_validate({"name": "p", "taints": list(taints), **fields})


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "t", "operator": "Exists"}, "t:NoSchedule", True),
        ({"key": "t", "operator": "Exists", "effect": "NoSchedule"}, "t:NoSchedule", True),
        ({"key": "t", "operator": "Exists", "effect": "NoExecute"}, "t:NoSchedule", False),
        ({"key": "u", "operator": "Exists"}, "t:NoSchedule", False),
        ({"operator": "Exists"}, "t=v:NoExecute", True),  # no key + Exists: every taint
        ({"effect": "NoSchedule"}, "t:NoSchedule", False),  # no key, no Exists: nothing
        ({"key": "t", "value": "v"}, "t=v:NoSchedule", True),  # operator defaults to Equal
        ({"key": "t", "operator": "Equal", "value": "v"}, "t=w:NoSchedule", False),
        ({"key": "t", "operator": "Equal", "value": "v"}, "t:NoSchedule", False),
        ({"key": "t", "operator": "Equal"}, "t:NoSchedule", True),  # no value tolerates a key-only taint
        ({"key": "t", "operator": "Equal", "value": ""}, "t:NoSchedule", True),
    ],
)
def test_each_toleration_rule(toleration: dict[str, Any], taint: str, tolerated: bool) -> None:
    pool = _pool(taint)
    assert (untolerated({"tolerations": [toleration]}, pool) == []) is tolerated


def test_prefer_no_schedule_never_blocks_and_every_blocking_taint_is_listed() -> None:
    pool = _pool("soft:PreferNoSchedule", "a:NoSchedule", "b=1:NoExecute")
    assert [t.key for t in untolerated({}, pool)] == ["a", "b"]
    assert [t.key for t in untolerated({"tolerations": [{"key": "a", "operator": "Exists"}]}, pool)] == ["b"]
    assert untolerated({}, _pool("soft:PreferNoSchedule")) == []


def _template(spec: dict[str, Any], **requests: str) -> PodTemplate:
    container = {"name": "c", "resources": {"requests": dict(requests)}}
    return PodTemplate("Deployment", "app", "pod", {**spec, "containers": [container]})


def _problems(template: PodTemplate, pools: list[PoolFacts]) -> list[Problem]:
    manifest = {
        "kind": "Deployment",
        "metadata": {"name": template.name},
        "spec": {"template": {"spec": template.spec}},
    }
    return check_schedulable([manifest], pools, hardware())


M5 = _pool(labels={"pool": "cpu"}, instance_types=["m5.xlarge"], managed_by="existing")


def test_a_request_equal_to_the_allocatable_fits_and_one_more_millicore_does_not() -> None:
    node = allocatable(hardware().instance("m5.xlarge"))
    cpu = f"{round(node.cpu * 1000)}m"
    assert _problems(_template({"nodeSelector": {"pool": "cpu"}}, cpu=cpu), [M5]) == []
    over = f"{round(node.cpu * 1000) + 1}m"
    [problem] = _problems(_template({"nodeSelector": {"pool": "cpu"}}, cpu=over), [M5])
    assert problem.message.startswith(
        f"requests do not fit one node: cpu {node.cpu + 0.001:g} > {node.cpu:g}"
    )
    assert "allocatable on m5.xlarge (pool 'p'" in problem.message


def test_the_smallest_excess_names_the_instance_and_only_the_resources_over() -> None:
    pool = _pool(labels={"pool": "cpu"}, instance_types=["m5.large", "m5.xlarge"], managed_by="existing")
    # 5 CPUs fit neither; 10 GiB fits m5.xlarge only: the message names m5.xlarge, over on cpu alone
    [problem] = _problems(_template({"nodeSelector": {"pool": "cpu"}}, cpu="5", memory="10Gi"), [pool])
    assert "cpu 5 > 3.44 allocatable on m5.xlarge" in problem.message
    assert "memory" not in problem.message
    # over on both everywhere: the larger node (fewer CPUs short) is named
    [problem] = _problems(_template({"nodeSelector": {"pool": "cpu"}}, cpu="5", memory="100Gi"), [pool])
    assert "on m5.xlarge" in problem.message and "; memory 100 GiB > " in problem.message


def test_a_pool_without_known_instance_types_is_not_size_checked() -> None:
    unknown = _pool(labels={"pool": "cpu"}, managed_by="existing")
    assert _problems(_template({"nodeSelector": {"pool": "cpu"}}, cpu="500"), [unknown]) == []
    # but one sized pool that fits among the tolerated ones is enough
    assert _problems(_template({"nodeSelector": {"pool": "cpu"}}, cpu="3"), [unknown, M5]) == []


@pytest.mark.parametrize(
    ("requests", "scheduler", "says"),
    [
        ({NEURON: "1"}, None, None),
        ({NEURON: "2"}, None, f"requests 2 {NEURON} but uses the default scheduler"),
        ({NEURON: "2"}, "other", f"requests 2 {NEURON} but uses the other scheduler"),
        ({NEURON: "2"}, "my-scheduler", None),
        ({CORE: "1"}, None, None),
        ({CORE: "2"}, None, f"requests 2 {CORE} but uses the default scheduler"),
        ({NEURON: "1", CORE: "2"}, None, f"requests 2 {CORE} but"),
        ({NEURON: "2", CORE: "2"}, None, f"requests 2 {NEURON} but"),
    ],
)
def test_more_than_one_neuron_device_or_core_needs_the_neuron_scheduler(
    requests: dict[str, str], scheduler: str | None, says: str | None
) -> None:
    pool = _pool(
        "aws.amazon.com/neuron:NoSchedule",
        labels={"pool": "inf2"},
        instance_types=["inf2.48xlarge"],
        managed_by="existing",
    )
    spec: dict[str, Any] = {"nodeSelector": {"pool": "inf2"}, "tolerations": [{"operator": "Exists"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    problems = _problems(_template(spec, **requests), [pool])
    if says is None:
        assert problems == []
    else:
        [problem] = problems
        assert (
            problem.message.startswith(says)
            and problem.hint
            == "set schedulerName: my-scheduler (the Neuron scheduler extension of the platform)"
        )


def test_a_pod_tolerating_only_some_matching_pools_lands_on_those() -> None:
    tainted = _pool("t:NoSchedule", labels={"pool": "x"}, instance_types=["m5.xlarge"], managed_by="existing")
    clean = tainted.model_copy(update={"name": "clean", "taints": []})
    assert _problems(_template({"nodeSelector": {"pool": "x"}}, cpu="1"), [tainted, clean]) == []
    [problem] = _problems(_template({"nodeSelector": {"pool": "x"}}, cpu="1"), [tainted])
    assert problem.message == "lands only on pool 'p' but does not tolerate its taint(s) t:NoSchedule"
    assert problem.hint == "add tolerations: [{key: t, operator: Exists, effect: NoSchedule}]"
    valued = _pool("t=v:NoExecute", labels={"pool": "x"}, managed_by="existing")
    [problem] = _problems(_template({"nodeSelector": {"pool": "x"}}), [valued])
    assert problem.message.endswith("its taint(s) t=v:NoExecute")


def test_the_closest_pool_is_the_one_with_most_matching_labels_then_tolerated_taints() -> None:
    a = PoolFacts(name="a", labels={"role": "serve", "zone": "1"}, managed_by="existing")
    b = PoolFacts(name="b", labels={"role": "serve", "zone": "2"}, managed_by="existing")
    spec = {"nodeSelector": {"role": "serve", "zone": "3"}}
    [problem] = _problems(_template(spec), [a, b])
    assert problem.message == (
        "nodeSelector/affinity role=serve, zone=3 matches no node of any pool; closest pool 'a': zone=1 (not 3)"
    )
    closer = PoolFacts(name="c", labels={"role": "other", "zone": "3", "x": "1"}, managed_by="existing")
    [problem] = _problems(_template({"nodeSelector": {"role": "serve", "zone": "3", "x": "1"}}), [a, closer])
    assert problem.message.endswith("closest pool 'c': role=other (not serve)")
    # same labels: the pool whose taints the pod tolerates is the one it meant
    kept = PoolFacts.model_validate(
        {"name": "kept", "labels": {"role": "serve"}, "taints": ["g:NoSchedule"], "managed_by": "existing"}
    )
    spec = {
        "nodeSelector": {"role": "serve", "zone": "9"},
        "tolerations": [{"key": "g", "operator": "Exists"}],
    }
    other = PoolFacts.model_validate(
        {"name": "o", "labels": {"role": "serve"}, "taints": ["h:NoSchedule"], "managed_by": "existing"}
    )
    [problem] = _problems(_template(spec), [other, kept])
    assert "closest pool 'kept': no label zone" in problem.message
    # a label the pool lacks beats one it has with another value only by count
    has_key = PoolFacts(name="k", labels={"zone": "1"}, managed_by="existing")
    lacks = PoolFacts(name="l", labels={}, managed_by="existing")
    [problem] = _problems(_template({"nodeSelector": {"zone": "3"}}), [lacks, has_key])
    assert "closest pool 'k': zone=1 (not 3)" in problem.message


def test_closest_pool_text_for_no_pools_and_for_instance_types_and_affinity() -> None:
    [problem] = _problems(_template({"nodeSelector": {"a": "b"}}), [])
    assert problem.message.endswith("matches no node of any pool; the platform has no pools")
    [problem] = _problems(_template({}), [])
    assert "nodeSelector/affinity (none) matches" in problem.message
    inf2 = PoolFacts(name="inf", instance_families=["inf2"])
    spec = {"nodeSelector": {"karpenter.sh/nodepool": "inf", "node.kubernetes.io/instance-type": "m5.large"}}
    [problem] = _problems(_template(spec), [inf2])
    assert problem.message.endswith("closest pool 'inf': it launches inf2, not m5.large")
    exact = PoolFacts(name="inf", instance_types=["inf2.xlarge"])
    [problem] = _problems(_template(spec), [exact])
    assert problem.message.endswith("it launches inf2.xlarge, not m5.large")
    wrong_pool = {
        "nodeSelector": {"karpenter.sh/nodepool": "gpu", "node.kubernetes.io/instance-type": "m5.large"}
    }
    [problem] = _problems(_template(wrong_pool), [inf2])
    assert problem.message.endswith("closest pool 'inf': karpenter.sh/nodepool=inf (not gpu)")
    [problem] = _problems(_template(_affinity(_expr("In", "z", key="zone"))), [inf2])
    assert problem.message.endswith("closest pool 'inf': affinity terms differ")


def test_an_equal_amount_is_not_counted_as_over_when_choosing_the_node_to_name() -> None:
    # inf2.xlarge has exactly the one Neuron device asked for, too few CPUs; m5.4xlarge has more CPUs
    # but no device: the message names the node short of one resource (cpu), not of two
    pool = _pool(
        "aws.amazon.com/neuron:NoSchedule",
        labels={"pool": "mixed"},
        instance_types=["inf2.xlarge", "m5.4xlarge"],
        managed_by="existing",
    )
    spec = {"nodeSelector": {"pool": "mixed"}, "tolerations": [{"operator": "Exists"}]}
    [problem] = _problems(_template(spec, cpu="20", **{NEURON: "1"}), [pool])
    assert problem.message == (
        "requests do not fit one node: cpu 20 > 3.184 allocatable on inf2.xlarge (pool 'p'; Karpenter's "
        "allocatable less the platform's DaemonSets)"
    )


def test_the_untolerated_message_names_the_first_matching_pool() -> None:
    first = _pool("a:NoSchedule", labels={"pool": "x"}, managed_by="existing")
    second = PoolFacts.model_validate(
        {"name": "second", "labels": {"pool": "x"}, "taints": ["b:NoSchedule"], "managed_by": "existing"}
    )
    [problem] = _problems(_template({"nodeSelector": {"pool": "x"}}), [first, second])
    assert problem.message == "lands only on pool 'p' but does not tolerate its taint(s) a:NoSchedule"
    [problem] = _problems(_template({"nodeSelector": {"pool": "x"}}), [second, first])
    assert problem.message == "lands only on pool 'second' but does not tolerate its taint(s) b:NoSchedule"


def test_a_problem_is_a_frozen_value() -> None:
    problem = Problem("Deployment", "app", "pod", "m", "h")
    assert {problem, Problem("Deployment", "app", "pod", "m", "h")} == {problem}
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.message = "other"  # type: ignore[misc]
    assert str(problem) == "Deployment/app (pod): m; fix: h"
    assert Problem("Blueprint", "b", "", "m", "h").path == "Blueprint/b"
    assert problem.as_dict() == {
        "kind": "Deployment",
        "name": "app",
        "where": "pod",
        "message": "m",
        "hint": "h",
    }


def test_a_workload_that_cannot_be_built_keeps_the_error_and_its_hint() -> None:
    bp = load_blueprint("llama2-triton-vllm-gpu")
    facts = existing_cluster(
        [PoolFacts(name="cpu", labels={"pool": "cpu"}, instance_types=["m5.xlarge"], managed_by="existing")]
    )
    [problem] = validate_workload(bp, facts)
    assert (problem.kind, problem.name, problem.where) == ("Blueprint", bp.name, "")
    assert problem.message == "no pool of the cluster runs g5.2xlarge (pools: cpu)"
    assert problem.hint == "name a pool with that instance type or family in the kubeconfig target's pools"
