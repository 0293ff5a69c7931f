"""Can every pod the workload creates be scheduled on the platform? (`llmctl validate`)

The seeds' most reported failure is a pod Pending forever: a nodeSelector no NodePool satisfies,
a taint nobody tolerates, a request larger than any node, or several Neuron devices handed out by
the default scheduler. For every pod template (Deployments, Jobs, the RayService head and worker
groups) this checks, offline:

1. its nodeSelector and required node affinity match the labels of some pool's nodes;
2. its tolerations cover that pool's NoSchedule/NoExecute taints;
3. its requests (cpu, memory, aws.amazon.com/neuron, aws.amazon.com/neuroncore, nvidia.com/gpu)
   fit ONE node of an instance type the pool can launch: Karpenter's allocatable for that type less
   the platform's DaemonSets (:mod:`llmctl.blueprints.allocatable`, through
   :mod:`llmctl.infra.workload.scheduling.capacity`), so a pod this passes is one Karpenter can place;
4. a pod asking for more than one Neuron device or core sets `schedulerName: my-scheduler`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.hardware import HardwareCatalog, Instance, hardware
from llmctl.blueprints.pools import NEURON_SCHEDULER
from llmctl.blueprints.runtimes import runtime
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import BlueprintError, LlmctlError
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.scheduling.capacity import (
    NEURON_CORE,
    NEURON_DEVICE,
    allocatable,
    format_amount,
    instance_types,
)
from llmctl.infra.workload.scheduling.pods import PodTemplate, pod_requests, pod_templates
from llmctl.infra.workload.scheduling.pool_facts import PoolFacts

Obj = dict[str, Any]


@dataclass(frozen=True)
class Problem:
    """One reason a pod would stay Pending, with the fix."""

    kind: str
    name: str
    where: str
    message: str
    hint: str

    @property
    def path(self) -> str:
        """'RayService/llama2-inf2 (worker group inf2)'."""
        return f"{self.kind}/{self.name}" + (f" ({self.where})" if self.where else "")

    def __str__(self) -> str:
        return f"{self.path}: {self.message}; fix: {self.hint}"

    def as_dict(self) -> dict[str, str]:
        """Stable keys for `--json`."""
        return {
            "kind": self.kind,
            "name": self.name,
            "where": self.where,
            "message": self.message,
            "hint": self.hint,
        }


# --- label matching -------------------------------------------------------------------------------


def _expression_matches(expr: Obj, labels: dict[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:  # Kubernetes: exactly one value
        have, want = _int64(labels[key]), _int64(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


_INT64 = re.compile(r"[+-]?[0-9]+")


def _int64(text: str) -> int | None:
    """A label value as Kubernetes compares it for `Gt`/`Lt`: Go's `strconv.ParseInt(text, 10, 64)`
    (ASCII digits with an optional sign, within int64), else None (Python's `int` would also read
    `1_0`, spaces and other scripts' digits)."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def selector_matches(spec: Obj, labels: dict[str, str]) -> bool:
    """Whether a pod's nodeSelector and required node affinity accept a node with these labels."""
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    # a term without expressions selects no node (Kubernetes' nodeaffinity.go: "nil or empty term
    # selects no objects"); the node's name (`matchFields`) is unknown before Karpenter launches it
    return any(
        bool(exprs) and all(_expression_matches(e, labels) for e in exprs)
        for exprs in (term.get("matchExpressions") or [] for term in terms)
    )


def _tolerates(toleration: Obj, taint: Any) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.effect:
        return False
    if not toleration.get("key"):
        return bool(toleration.get("operator") == "Exists")
    if toleration["key"] != taint.key:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool((toleration.get("value") or None) == taint.value)


def untolerated(spec: Obj, pool: PoolFacts) -> list[Any]:
    """The pool's blocking taints the pod does not tolerate."""
    tolerations = spec.get("tolerations") or []
    return [
        taint
        for taint in pool.taints
        if taint.effect != "PreferNoSchedule" and not any(_tolerates(t, taint) for t in tolerations)
    ]


# --- the check ------------------------------------------------------------------------------------


def _taint_text(taint: Any) -> str:
    return f"{taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect}"


def _closest_pool_text(spec: Obj, pools: list[PoolFacts]) -> str:
    """Which pool came closest to the selector, and which labels differ."""
    selector = spec.get("nodeSelector") or {}
    if not pools:
        return "the platform has no pools"

    def score(pool: PoolFacts) -> tuple[int, int, int]:
        labels = pool.node_labels()
        matches = sum(labels.get(k) == v for k, v in selector.items())
        tolerated = len(pool.taints) - len(
            untolerated(spec, pool)
        )  # the pod meant a pool whose taints it tolerates
        return (matches, tolerated, sum(k in labels for k in selector))

    best = max(pools, key=score)
    labels = best.node_labels()
    diffs = [
        f"{k}={labels[k]} (not {v})" if k in labels else f"no label {k}"
        for k, v in selector.items()
        if labels.get(k) != v and k != "node.kubernetes.io/instance-type"
    ]
    if "node.kubernetes.io/instance-type" in selector and not diffs:
        families = ", ".join(best.instance_types or best.instance_families)
        diffs.append(f"it launches {families}, not {selector['node.kubernetes.io/instance-type']}")
    return f"closest pool {best.name!r}: " + "; ".join(diffs or ["affinity terms differ"])


def _candidates(pools: list[PoolFacts], catalog: HardwareCatalog) -> list[tuple[PoolFacts, Instance | None]]:
    result: list[tuple[PoolFacts, Instance | None]] = []
    for pool in pools:
        types = instance_types(catalog, pool.instance_families, pool.instance_types)
        result.extend((pool, row) for row in types) if types else result.append((pool, None))
    return result


def _check_template(template: PodTemplate, pools: list[PoolFacts], catalog: HardwareCatalog) -> list[Problem]:
    def problem(message: str, hint: str) -> Problem:
        return Problem(template.kind, template.name, template.where, message, hint)

    spec = template.spec
    requests = pod_requests(template)
    problems: list[Problem] = []
    neuron = max(requests.get(NEURON_DEVICE, 0.0), requests.get(NEURON_CORE, 0.0))
    if neuron > 1 and spec.get("schedulerName") != NEURON_SCHEDULER:
        resource = NEURON_DEVICE if requests.get(NEURON_DEVICE, 0) > 1 else NEURON_CORE
        problems.append(
            problem(
                f"requests {format_amount(resource, requests[resource])} {resource} but uses the "
                f"{spec.get('schedulerName') or 'default'} scheduler, which may hand out devices that are not "
                "adjacent on the Neuron ring",
                f"set schedulerName: {NEURON_SCHEDULER} (the Neuron scheduler extension of the platform)",
            )
        )
    candidates = _candidates(pools, catalog)
    matching = [
        (p, i)
        for p, i in candidates
        if any(selector_matches(spec, labels) for labels in p.node_label_sets(i.name if i else None))
    ]
    if not matching:
        selector = ", ".join(f"{k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()) or "(none)"
        return [
            *problems,
            problem(
                f"nodeSelector/affinity {selector} matches no node of any pool; {_closest_pool_text(spec, pools)}",
                "use the labels of a pool the platform has (`llmctl validate --json` lists them), e.g. "
                "karpenter.sh/nodepool=<pool> and an instance type that pool launches",
            ),
        ]
    tolerated = [(p, i) for p, i in matching if not untolerated(spec, p)]
    if not tolerated:
        pool = matching[0][0]
        missing = untolerated(spec, pool)
        example = ", ".join(f"{{key: {t.key}, operator: Exists, effect: {t.effect}}}" for t in missing)
        return [
            *problems,
            problem(
                f"lands only on pool {pool.name!r} but does not tolerate its taint(s) "
                f"{', '.join(_taint_text(t) for t in missing)}",
                f"add tolerations: [{example}]",
            ),
        ]
    sized = [(p, i) for p, i in tolerated if i is not None]
    if not sized:
        return problems  # pools without known instance types: sizes cannot be checked
    fits = [
        (p, i)
        for p, i in sized
        if all(amount <= allocatable(i).of(r) + 1e-9 for r, amount in requests.items())
    ]
    if fits:
        return problems

    def excess(item: tuple[PoolFacts, Instance | None]) -> tuple[int, float]:
        node = allocatable(item[1])  # type: ignore[arg-type]
        over = [r for r, amount in requests.items() if amount > node.of(r) + 1e-9]
        return (len(over), -node.cpu)

    pool, instance = min(sized, key=excess)
    assert instance is not None
    node = allocatable(instance)
    over = [
        f"{r} {format_amount(r, amount)} > {format_amount(r, node.of(r))}"
        for r, amount in requests.items()
        if amount > node.of(r) + 1e-9
    ]
    return [
        *problems,
        problem(
            f"requests do not fit one node: {'; '.join(over)} allocatable on {instance.name} "
            f"(pool {pool.name!r}; Karpenter's allocatable less the platform's DaemonSets)",
            "lower compute.tensor_parallel, cpus_per_replica or memory_gib_per_replica, or choose a larger "
            "instance type",
        ),
    ]


def check_schedulable(
    manifests: list[Obj], pools: list[PoolFacts], catalog: HardwareCatalog
) -> list[Problem]:
    """Every reason a pod of these manifests would stay Pending on these pools."""
    problems: list[Problem] = []
    for manifest in manifests:
        for template in pod_templates(manifest):
            problems.extend(_check_template(template, pools, catalog))
    return problems


def validate_workload(blueprint: Blueprint, facts: PlatformFacts | None = None) -> list[Problem]:
    """Build the blueprint's workload for a platform (offline facts by default) and check it."""

    facts = facts or PlatformFacts.for_blueprint(blueprint)
    problems: list[Problem] = []
    if blueprint.exposure.api_key and not runtime(blueprint.runtime).api_key_check:
        problems.append(
            Problem(
                "Blueprint",
                blueprint.name,
                "exposure",
                f"{blueprint.runtime} cannot check an API key, so the endpoint would be open",
                "use a Ray runtime for a public endpoint, or exposure.mode: internal-lb without api_key",
            )
        )
    try:
        config = WorkloadConfig(blueprint=blueprint, platform=facts)
        manifests = build_manifests(config, hf_token=None)
    except LlmctlError as error:
        return [*problems, Problem("Blueprint", blueprint.name, "", error.message, error.hint or "")]
    return problems + check_schedulable(manifests, facts.pools, hardware())


def ensure_schedulable(blueprint: Blueprint, facts: PlatformFacts | None = None) -> None:
    """Raise a BlueprintError listing every problem when the workload cannot be scheduled."""
    problems = validate_workload(blueprint, facts)
    if problems:
        raise BlueprintError(
            f"blueprint {blueprint.name!r} would leave pods Pending ({len(problems)} problem(s))",
            "fix the problems listed, then run `llmctl validate --blueprint " + blueprint.name + "`",
            problems=[(p.path, f"{p.message}; fix: {p.hint}") for p in problems],
        )
