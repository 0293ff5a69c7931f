"""Which Karpenter pools' running nodes a change replaces ("drift"), from the old and new inputs of
their NodePool and EC2NodeClass. `plan diff` compares two plans with it, `plan` the deployed platform
stack with the planned one.

The rules, read from Karpenter's source (chart 1.14.1: aws/karpenter-provider-aws at commit
1d927085dd81a9df9301e613f371dac5b4d16bfe; its core is sigs.k8s.io/karpenter v1.14.0, go.mod line 54):

* EC2NodeClass, static (provider pkg/apis/v1/ec2nodeclass.go, `EC2NodeClass.Hash`, lines 541-555):
  the whole `spec` is hashed but the fields tagged `hash:"ignore"` (subnetSelectorTerms,
  securityGroupSelectorTerms, capacityReservationSelectorTerms, ipPrefixCount, amiSelectorTerms,
  amiFamily, kubelet); kubelet is hashed all the same (`Spec.Kubelet.String()`), the AMI family as
  `AMIFamily()` resolves it (amiFamily, else the alias's family). Lists hash as sets (`SlicesAsSets`),
  an absent field as null (`ZeroNil`). A node whose NodeClaim carries another hash is drifted,
  `NodeClassDrift` (pkg/cloudprovider/drift.go `areStaticFieldsDrifted`): userData,
  blockDeviceMappings, tags, role, metadataOptions... replace every node.
* EC2NodeClass, dynamic (pkg/cloudprovider/drift.go `isNodeClassDrifted`): each node is held to what
  the ignored selectors resolve to now: `AMIDrift` (its AMI is not one the amiSelectorTerms resolve
  to for its instance type: a pinned alias that moves replaces every node), `SubnetDrift` (its subnet
  is not one selected), `SecurityGroupDrift` (its security groups are not exactly those selected),
  `CapacityReservationDrift` (it runs in a reservation no longer selected). ipPrefixCount is neither.
* EC2NodeClass `placementGroupSelector` is both: it is hashed (no `hash:"ignore"`), so a change is
  `NodeClassDrift` for every node, and each node's `karpenter.k8s.aws/placement-group-id` label is held
  to the id the selector resolves to now (drift.go `isPlacementGroupDrifted`, `PlacementGroupDrift`:
  "placementGroupSelector was added, removed, or changed"), which also replaces every node of a
  group that was deleted and made again under the same name.
* NodePool, core pkg/apis/v1/nodepool.go `NodePool.Hash` (line 336): only `spec.template` is
  hashed, without `spec.template.spec.requirements` (`hash:"ignore"`, line 234): its labels,
  annotations, taints, startupTaints, nodeClassRef, expireAfter, terminationGracePeriod replace every
  node (`NodePoolDrifted`, pkg/controllers/nodeclaim/disruption/drift.go `areStaticFieldsDrifted`).
  The requirements are held to each node's labels (`areRequirementsDrifted`): a node they no longer
  admit drifts (`RequirementsDrifted`); values added replace none. `spec.disruption`, `spec.limits`,
  `spec.weight` are outside the hash ("behavioral fields", docs v1.14 concepts/disruption.md): no
  node is replaced.
* How (core pkg/controllers/disruption/drift.go, types.go `NewCandidate`; concepts/disruption.md):
  drifted nodes are replaced within the NodePool's disruption budgets (`nodes: "10%"` when none is
  set), each replacement launched and ready before the drifted node is drained. Drift is "eventual"
  disruption: a node running a pod annotated `karpenter.sh/do-not-disrupt` (our Ray heads) is no
  candidate unless its NodeClaim has a terminationGracePeriod; it stays, drifted, until that pod leaves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from llmctl.infra.plan.offline import UNKNOWN
from llmctl.infra.platform.manifests import NODECLASS_API, NODEPOOL_API

Obj = dict[str, Any]
Nodes = Literal["every", "some", "none", "unknown"]
Rule = Literal["static", "dynamic", "none", "unknown"]
DEFAULT_BUDGET = {"nodes": "10%"}  # the NodePool CRD's default of spec.disruption.budgets (one budget)
DRIFT_REASON = "Drifted"

# EC2NodeClass selectors resolved per node (pkg/cloudprovider/drift.go): reason, the nodes replaced
RESOLVED = {
    "amiSelectorTerms": ("AMIDrift", "nodes whose AMI is not one the new amiSelectorTerms resolve to"),
    "subnetSelectorTerms": ("SubnetDrift", "nodes in a subnet the new subnetSelectorTerms do not select"),
    "securityGroupSelectorTerms": (
        "SecurityGroupDrift",
        "nodes whose security groups are not those the new securityGroupSelectorTerms select",
    ),
    "capacityReservationSelectorTerms": (
        "CapacityReservationDrift",
        "nodes in a capacity reservation the new capacityReservationSelectorTerms no longer select",
    ),
}
_NOT_HASHED = "outside EC2NodeClass.Hash() and not resolved per node"
_PLACEMENT = (
    "hashed, and every node's karpenter.k8s.aws/placement-group-id label no longer matches the group "
    "it resolves to (PlacementGroupDrift)"
)
_BEHAVIOURAL = "a behavioural field: NodePool.Hash() hashes spec.template only"


@dataclass(frozen=True)
class DriftField:
    """One changed field of a pool's NodePool or EC2NodeClass and what it does to the running nodes."""

    kind: str  # NodePool or EC2NodeClass
    path: str
    change: Literal["added", "removed", "changed"]
    rule: Rule  # static: a hashed field; dynamic: resolved per node; none: no drift
    nodes: Nodes
    reason: str = ""  # Karpenter's drift reason (NodeClassDrift, AMIDrift, NodePoolDrifted, ...)
    detail: str = ""  # which nodes (some), or why none

    def cause(self) -> str:
        """'EC2NodeClass spec.userData added'; a dynamic one with its reason (', AMIDrift')."""
        return f"{self.kind} {self.path} {self.change}" + (
            f", {self.reason}" if self.rule == "dynamic" else ""
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "object": self.kind,
            "path": self.path,
            "change": self.change,
            "drift": self.rule,
            "nodes": self.nodes,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass
class PoolDrift:
    """A pool whose NodePool or EC2NodeClass changes, and which of its running nodes are replaced."""

    pool: str
    fields: list[DriftField]
    budget: str  # "10% of nodes"
    blocked_by_do_not_disrupt: bool = True  # no terminationGracePeriod: do-not-disrupt pods hold nodes
    workloads: list[str] = field(default_factory=list)  # deployed workloads serving on the pool

    @property
    def nodes(self) -> Nodes:
        """every, some, unknown or none: the widest of the fields."""
        for level in ("every", "some", "unknown"):
            if any(f.nodes == level for f in self.fields):
                return level
        return "none"

    @property
    def replaces(self) -> bool:
        return self.nodes in ("every", "some")

    def lines(self) -> list[str]:
        """One line for the nodes replaced (or unknown), one per field that replaces none."""
        out = []
        drifting = [f for f in self.fields if f.nodes in ("every", "some")]
        how = f"Karpenter drift, within the NodePool's budget of {self.budget} at a time"
        if self.nodes == "every":
            causes = "; ".join(f.cause() for f in drifting)
            out.append(
                f"pool {self.pool}: every node is replaced ({causes}; {how}){self._serving(maybe=False)}"
            )
        elif self.nodes == "some":
            for item in drifting:
                out.append(
                    f"pool {self.pool}: {item.detail} are replaced ({item.cause()}; {how}){self._serving(maybe=True)}"
                )
        for item in self.fields:
            if item.nodes == "unknown":
                out.append(f"pool {self.pool}: {item.cause()}: {item.detail}")
            elif item.nodes == "none":
                out.append(f"pool {self.pool}: {item.cause()}: no node is replaced ({item.detail})")
        return out

    def _serving(self, *, maybe: bool) -> str:
        """'; serving llama2-inf2 and tiny-cpu restart' (the deployed workloads on the pool)."""
        names = self.workloads
        if not names:
            return ""
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        verb = "may restart" if maybe else "restarts" if len(names) == 1 else "restart"
        return f"; serving {listed} {verb}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "nodes": self.nodes,
            "budget": self.budget,
            "do_not_disrupt_blocks": self.blocked_by_do_not_disrupt,
            "workloads": list(self.workloads),
            "fields": [f.to_dict() for f in self.fields],
        }


def drift_lines(drifts: Sequence[PoolDrift], heading: str) -> list[str]:
    """The heading, each pool's lines (indented), and how Karpenter goes about it; none without drifts."""
    if not drifts:
        return []
    out = [heading, *(f"  {line}" for d in drifts for line in d.lines())]
    if any(d.replaces for d in drifts):
        out.append(
            "  (each replacement node is launched and ready before the drifted node drains; "
            + (
                "a node running a pod annotated karpenter.sh/do-not-disrupt (a Ray head) stays until that pod leaves)"
                if any(d.replaces and d.blocked_by_do_not_disrupt for d in drifts)
                else "with the NodePool's terminationGracePeriod, nodes with do-not-disrupt pods are taken too)"
            )
        )
    return out


# ---- comparison -----------------------------------------------------------------------------------
def pool_drift(old: Sequence[Obj], new: Sequence[Obj]) -> list[PoolDrift]:
    """The pools (NodePools in both `old` and `new`, Kubernetes objects as their inputs) whose NodePool
    or EC2NodeClass changes, in name order. Pools added or removed are not drift (the resource diff
    says so)."""
    old_pools, old_classes = _karpenter(old)
    new_pools, new_classes = _karpenter(new)
    found = []
    for name in sorted(set(old_pools) & set(new_pools)):
        was, now = old_pools[name], new_pools[name]
        fields: list[DriftField] = []
        class_old, class_new = old_classes.get(_class_ref(was)), new_classes.get(_class_ref(now))
        if class_old is not None and class_new is not None:
            fields += nodeclass_fields(class_old, class_new)
        fields += nodepool_fields(was, now)
        if fields:
            template = (now.get("spec") or {}).get("template") or {}
            grace = ((template.get("spec") or {}).get("terminationGracePeriod")) is not None
            found.append(PoolDrift(name, fields, budget_text(now), blocked_by_do_not_disrupt=not grace))
    return found


def _karpenter(objects: Sequence[Obj]) -> tuple[dict[str, Obj], dict[str, Obj]]:
    pools, classes = {}, {}
    for obj in objects:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if obj.get("apiVersion") == NODEPOOL_API and obj.get("kind") == "NodePool":
            pools[name] = obj
        elif obj.get("apiVersion") == NODECLASS_API and obj.get("kind") == "EC2NodeClass":
            classes[name] = obj
    return pools, classes


def _class_ref(pool: Obj) -> str:
    ref = (((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
    return str(ref.get("name", ""))


def _hashed(value: Any) -> Any:
    """The value as Karpenter's hash sees it: lists as sets, null members as absent."""
    if isinstance(value, dict):
        return {key: _hashed(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return sorted((_hashed(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    return value


def _change(old: Any, new: Any) -> Literal["added", "removed", "changed"]:
    return "added" if old is None else "removed" if new is None else "changed"


def _unknown(value: Any) -> bool:
    return UNKNOWN in json.dumps(value, default=str)


def _changed_keys(old: Obj, new: Obj) -> list[str]:
    return [key for key in sorted(set(old) | set(new)) if _hashed(old.get(key)) != _hashed(new.get(key))]


def _family(nodeclass: Obj) -> str:
    """`EC2NodeClass.AMIFamily()`: spec.amiFamily, else the alias's family (`al2023@v2025...`)."""
    spec = nodeclass.get("spec") or {}
    if spec.get("amiFamily"):
        return str(spec["amiFamily"]).lower()
    aliases = [
        str(t["alias"]) for t in spec.get("amiSelectorTerms") or [] if isinstance(t, dict) and t.get("alias")
    ]
    return aliases[0].split("@")[0].lower() if aliases else "custom"


def _pinned(terms: Any) -> str | None:
    """The alias a term list pins to one release (`al2023@v20250410`), else None (`@latest`, ids, tags)."""
    aliases = [t.get("alias") for t in terms or [] if isinstance(t, dict) and t.get("alias")]
    return str(aliases[0]) if aliases and not str(aliases[0]).endswith("@latest") else None


def nodeclass_fields(old: Obj, new: Obj) -> list[DriftField]:
    """The changed `spec` fields of an EC2NodeClass, each with the nodes it replaces."""
    was, now = old.get("spec") or {}, new.get("spec") or {}
    found = []
    for key in _changed_keys(was, now):
        a, b = was.get(key), now.get(key)
        path, change = f"spec.{key}", _change(a, b)
        if _unknown(a) or _unknown(b):
            found.append(
                DriftField("EC2NodeClass", path, change, "unknown", "unknown", "", "known only at `up`")
            )
        elif _family(old) != _family(new) and key in ("amiSelectorTerms", "amiFamily"):
            detail = f"AMI family {_family(old)} -> {_family(new)}"
            found.append(
                DriftField("EC2NodeClass", path, change, "static", "every", "NodeClassDrift", detail)
            )
        elif key in RESOLVED:
            reason, who = RESOLVED[key]
            moved = key == "amiSelectorTerms" and _pinned(a) and _pinned(b)
            nodes: Nodes = "every" if moved else "some"
            found.append(DriftField("EC2NodeClass", path, change, "dynamic", nodes, reason, who))
        elif key == "placementGroupSelector":
            found.append(
                DriftField("EC2NodeClass", path, change, "static", "every", "NodeClassDrift", _PLACEMENT)
            )
        elif key in ("ipPrefixCount", "amiFamily"):
            detail = "the AMI family it resolves to is the same" if key == "amiFamily" else _NOT_HASHED
            found.append(DriftField("EC2NodeClass", path, change, "none", "none", "", detail))
        else:
            found.append(DriftField("EC2NodeClass", path, change, "static", "every", "NodeClassDrift"))
    return found


def nodepool_fields(old: Obj, new: Obj) -> list[DriftField]:
    """The changed `spec` fields of a NodePool, each with the nodes it replaces."""
    was, now = old.get("spec") or {}, new.get("spec") or {}
    found = [
        DriftField(
            "NodePool", f"spec.{key}", _change(was.get(key), now.get(key)), "none", "none", "", _BEHAVIOURAL
        )
        for key in _changed_keys(was, now)
        if key != "template"
    ]
    t_old, t_new = was.get("template") or {}, now.get("template") or {}
    for part in ("metadata", "spec"):
        p_old, p_new = t_old.get(part) or {}, t_new.get(part) or {}
        for key in _changed_keys(p_old, p_new):
            path, change = f"spec.template.{part}.{key}", _change(p_old.get(key), p_new.get(key))
            if part == "spec" and key == "requirements":
                found.append(_requirements(p_old.get(key) or [], p_new.get(key) or [], change))
            else:
                found.append(DriftField("NodePool", path, change, "static", "every", "NodePoolDrifted"))
    return found


def _requirements(old: list[Obj], new: list[Obj], change: Any) -> DriftField:
    """Requirements drift (core drift.go `areRequirementsDrifted`): a node drifts when its labels no
    longer satisfy every requirement; one only widened (values added, a requirement removed) admits
    every node it admitted."""
    before = {str(r.get("key")): r for r in old if isinstance(r, dict)}
    narrowed = []
    for req in new:
        key, op, values = str(req.get("key")), req.get("operator"), list(req.get("values") or [])
        was = before.get(key)
        if was is not None and _hashed(was) == _hashed(req):
            continue
        if was is not None and op == "In" and was.get("operator") == "In":
            gone = sorted(set(was.get("values") or []) - set(values))
            if gone:
                narrowed.append(f"{key} is {' or '.join(gone)}")
        else:
            narrowed.append(
                f"{key} does not satisfy {op} {values}" if values else f"{key} does not satisfy {op}"
            )
    path = "spec.template.spec.requirements"
    if not narrowed:
        detail = "every running node still satisfies them: values added or requirements removed only"
        return DriftField("NodePool", path, change, "none", "none", "", detail)
    detail = "nodes whose " + " or whose ".join(narrowed)
    return DriftField("NodePool", path, change, "dynamic", "some", "RequirementsDrifted", detail)


def budget_text(nodepool: Obj) -> str:
    """The NodePool's disruption budgets that limit drift, in words ("10% of nodes"): those without
    reasons or naming Drifted (core: the smallest of them applies); Karpenter's default when unset."""
    disruption = (nodepool.get("spec") or {}).get("disruption") or {}
    budgets = disruption.get("budgets")
    budgets = [DEFAULT_BUDGET] if budgets is None else budgets
    parts = []
    for budget in budgets:
        if budget.get("reasons") and DRIFT_REASON not in budget["reasons"]:
            continue
        nodes = str(budget.get("nodes", ""))
        text = f"{nodes} of nodes" if nodes.endswith("%") else f"{nodes} node{'' if nodes == '1' else 's'}"
        if budget.get("schedule"):
            text += f" (from {budget['schedule']} for {budget.get('duration')})"
        parts.append(text)
    if not parts:
        return "any number of nodes (no budget limits drift)"
    return parts[0] if len(parts) == 1 else "the smallest of " + ", ".join(parts)
