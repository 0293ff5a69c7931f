"""The next `up` against a deployed workload, said before it runs (issue 51).

The deployed objects (the Kubernetes resources' inputs in the workload stack's saved state) are
compared with what this `up` would render (its delivery decided without uploading), and the
controllers' rules (:mod:`llmctl.infra.workload.scheduling.rollout`) say what rolls: which pods and in what
order, whether KubeRay builds a second RayCluster, with its nodes and their cost while both run.
Then: the limits those extra nodes meet (vCPU quota with the running nodes counted, the NodePool's
limits, reservations: :mod:`llmctl.infra.aws.surge`), the caches the change makes cold, and the
uploads it needs. `plan` prints it, `up` prints it before asking and refuses a surge that cannot fit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmctl.blueprints.runtimes import runtime
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import LlmctlError, PrerequisiteError
from llmctl.infra.aws.checks import Check
from llmctl.infra.lifecycle.cold_start import last_start
from llmctl.infra.lifecycle.ray_bounds import PLAN_LINE, GroupBounds, wanted_bounds
from llmctl.infra.workload.scheduling.capacity import parse_quantity
from llmctl.infra.workload.scheduling.rollout import Rollout, Strategy, extra_nodes, predict

Obj = dict[str, Any]
POOL_LABEL = "karpenter.sh/nodepool"
_WHEEL = re.compile(r"s3://[^\s\"'/]+/llmctl/wheels/[0-9a-f]{64}/[^\s\"'/]+\.whl")
_WHEELHOUSE = re.compile(r"s3://[^\s\"'/]+/llmctl/wheelhouse/[0-9a-f]{64}/")
_MODEL = re.compile(r"s3://[^\s\"'/]+/models/[^\s\"']+")
NEURONX_ENGINE = "transformers-neuronx"  # runtimes whose pods compute compile_key (the registry's `engine`)


@dataclass
class DayTwo:
    """What the next `up` does to the deployed workload, beyond Pulumi's resource diff."""

    blueprint: str
    strategy: Strategy
    rollouts: list[Rollout]
    caches: list[str] = field(default_factory=list)
    uploads: list[str] = field(default_factory=list)
    capacity: list[Check] = field(default_factory=list)
    downtime: str | None = None  # replace: how long the endpoint is down, from the last recorded start
    bounds: list[GroupBounds] = field(default_factory=list)  # worker bounds `up` patches (ray_bounds.py)

    @property
    def moved_bounds(self) -> list[GroupBounds]:
        """The worker groups whose bounds this change moves (KubeRay does not carry them)."""
        return [b for b in self.bounds if b.moved]

    @property
    def extra(self) -> dict[str, int]:
        """Accelerator nodes needed beside the running ones, per instance type."""
        return extra_nodes(self.rollouts)

    @property
    def extra_usd_per_hour(self) -> float:
        return sum(r.extra_usd_per_hour for r in self.rollouts)

    @property
    def refused(self) -> list[Check]:
        """The limits the extra nodes do not fit."""
        return [check for check in self.capacity if check.ok is False]

    @property
    def replaces_cluster(self) -> bool:
        """Whether `up` deletes the running RayCluster after the update (strategy replace)."""
        return any(r.kind == "replace-cluster" for r in self.rollouts)

    @property
    def builds_cluster(self) -> bool:
        """Whether KubeRay builds a second RayCluster for this change (a surge of a RayService)."""
        return any(r.kind == "new-cluster" for r in self.rollouts)

    @property
    def has_downtime(self) -> bool:
        return any(r.downtime for r in self.rollouts)

    def lines(self) -> list[str]:
        """The plan's lines (`plan`, and `up` before it asks); none when no serving pod restarts."""
        if not self.rollouts:
            return []
        out = [f"day two ({self.strategy}): what the controllers do with this change"]
        for order, item in enumerate(self.rollouts, start=1):
            out.append(f"  {order}. {item.object}: {item.kind}: {item.text}")
            if item.extra_nodes:
                when = "for the rebuilt cluster" if item.kind == "replace-cluster" else "while both run"
                out.append(
                    f"     +{item.extra_nodes} x {item.instance_type} {when}: "
                    f"${item.extra_usd_per_hour:,.2f}/h more"
                )
            out.append(f"     source: {item.source}")
        for moved in self.moved_bounds:
            out.append(f"  RayService/{moved.rayservice}: {PLAN_LINE} ({moved.text()})")
        if self.extra:
            nodes = ", ".join(f"{n} x {t}" for t, n in sorted(self.extra.items()))
            when = "for the rebuilt cluster" if self.strategy == "replace" else "while old and new run"
            out.append(f"  extra nodes {when}: {nodes} (${self.extra_usd_per_hour:,.2f}/h)")
        for check in self.capacity:
            verdict = {True: "ok", False: "REFUSED", None: "could not check"}[check.ok]
            out.append(f"  {check.name}: {verdict}: {check.detail}")
            if check.ok is False and check.fix:
                out.append(f"     fix: {check.fix}{self._or_replace()}")
        if self.has_downtime:
            out.append(f"  downtime: {self.downtime or 'unknown (no start recorded)'}")
        out += [f"  cache: {line}" for line in self.caches]
        out += [f"  upload: {line}" for line in self.uploads]
        return out

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON form (`plan --json` key `rollouts`, `up --json` plan)."""
        return {
            "blueprint": self.blueprint,
            "strategy": self.strategy,
            "rollouts": [r.to_dict() for r in self.rollouts],
            "extra_nodes": self.extra,
            "extra_usd_per_hour": round(self.extra_usd_per_hour, 4),
            "capacity": [
                {"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix} for c in self.capacity
            ],
            "fits": not self.refused,
            "downtime": self.downtime if self.has_downtime else None,
            "caches": self.caches,
            "uploads": self.uploads,
            "bounds": [b.to_dict() for b in self.moved_bounds],
        }

    def refusal(self) -> PrerequisiteError:
        """`up`'s refusal of extra nodes that do not fit (a surge, or a replace that grows), before anything
        changed: the numbers and fixes."""
        fixes = [c.fix for c in self.refused if c.fix]
        return PrerequisiteError(
            f"the upgrade of {self.blueprint} needs "
            + ", ".join(f"{n} more {t}" for t, n in sorted(self.extra.items()))
            + (
                " for the rebuilt cluster"
                if self.strategy == "replace"
                else " while the old and new pods both run"
            )
            + ", and they do not fit: "
            + "; ".join(f"{c.name}: {c.detail}" for c in self.refused)
            + "; nothing was changed",
            "; ".join(fixes) + self._or_replace(),
        )

    def _or_replace(self) -> str:
        """The other way out of a surge that does not fit (a replace that grows needs its growth too)."""
        if self.strategy == "replace":
            return "; or keep the old size (scaling.min_replicas / max_replicas) for this up"
        return (
            "; or replace instead (downtime, no extra nodes): `llmctl up --replace` (or upgrade.strategy: "
            "replace in the blueprint)"
        )


# ---- the deployed objects -------------------------------------------------------------------------
def deployed_objects(resources: Sequence[Obj]) -> list[Obj]:
    """The Kubernetes objects of a stack's saved resources, as their inputs."""
    return [
        dict(res["inputs"])
        for res in resources
        if str(res.get("type", "")).startswith("kubernetes:")
        and res.get("custom", True)
        and isinstance(res.get("inputs"), dict)
        and res["inputs"].get("kind")
    ]


def pod_blueprint(objects: Sequence[Obj]) -> Blueprint | None:
    """The blueprint the serving pods were given (Ray's app args, or LLMCTL_BLUEPRINT); None when
    none is found or it no longer validates."""
    import yaml

    for obj in objects:
        spec = obj.get("spec") or {}
        try:
            if obj.get("kind") == "RayService" and spec.get("serveConfigV2"):
                apps = yaml.safe_load(spec["serveConfigV2"]).get("applications") or []
                return Blueprint.model_validate(apps[0]["args"]["blueprint"])
            if obj.get("kind") == "Deployment":
                for container in ((spec.get("template") or {}).get("spec") or {}).get("containers", []):
                    for env in container.get("env") or []:
                        if env.get("name") == "LLMCTL_BLUEPRINT" and str(env.get("value", "")).startswith(
                            "{"
                        ):
                            return Blueprint.model_validate(json.loads(env["value"]))
        except (ValueError, KeyError, IndexError, TypeError):
            return None
    return None


def _found(pattern: re.Pattern[str], objects: Sequence[Obj]) -> set[str]:
    return set(pattern.findall(json.dumps(list(objects), sort_keys=True)))


# ---- caches and uploads ---------------------------------------------------------------------------
def _compile_seconds(blueprint: str) -> str:
    record = last_start(blueprint)
    if record is None:
        return "no start of it recorded"
    compile_phase = [p for p in record.phases if p.name == "compile"]
    seconds = compile_phase[0].seconds if compile_phase else None
    when = record.recorded_at[:16].replace("T", " ")
    if seconds is None:
        return f"the last recorded start ({when}) took {record.total_seconds / 60:.0f} min in all"
    return f"the last compile took {seconds / 60:.0f} min ({when}, status {compile_phase[0].status})"


def cache_lines(old: Sequence[Obj], new: Sequence[Obj], blueprint: Blueprint) -> list[str]:
    """The caches the change makes cold: the compile cache key (transformers-neuronx's, or the one Ray
    Serve LLM's replicas keep their engine caches under), the model mirror's prefix."""
    lines = []
    before = pod_blueprint(old)
    if runtime(blueprint.runtime).engine == NEURONX_ENGINE and before is not None:
        # lazy: 0.14 s of imports, Neuron blueprints only
        from llmctl.serving.neuronx.settings import compile_key

        old_key, new_key = compile_key(before), compile_key(blueprint)
        if old_key != new_key:
            moved = sorted(k for k, v in vars(new_key).items() if vars(old_key).get(k) != v)
            lines.append(
                f"compile cache: a new key ({', '.join(moved)} changed): a cold Neuron compile; "
                + _compile_seconds(blueprint.name)
            )
        else:
            lines.append("compile cache: same key: the compiled graphs are reused")
    elif runtime(blueprint.runtime).serve_llm and before is not None:
        # lazy: Ray Serve LLM's config builder (0.6 s of imports), only its blueprints
        from llmctl.serving.ray_vllm.app import compile_key_name

        old_name, new_name = compile_key_name(before), compile_key_name(blueprint)
        if old_name != new_name:
            lines.append(
                f"compile cache: a new key ({old_name} -> {new_name}): the engine compiles again (torch.compile, "
                "CUDA graphs; Neuron: NxD Inference); " + _compile_seconds(blueprint.name)
            )
        else:
            lines.append("compile cache: same key: the compiled graphs are reused")
    elif before is not None and before.model.revision != blueprint.model.revision:
        lines.append(
            f"compile cache: model revision {before.model.revision} -> {blueprint.model.revision}: the "
            "engine's caches are keyed by it, a cold start; " + _compile_seconds(blueprint.name)
        )
    for prefix in sorted(_found(_MODEL, new) - _found(_MODEL, old)):
        if _found(_MODEL, old):
            lines.append(f"model mirror: {prefix} is new: the mirror Job copies the weights again")
    return lines


def upload_lines(old: Sequence[Obj], new: Sequence[Obj]) -> list[str]:
    """What `up` puts in the cache bucket for this change (new content-addressed keys only)."""
    lines = [
        f"the llmctl wheel {uri} (this code; the pods' commands name it, so they change)"
        for uri in sorted(_found(_WHEEL, new) - _found(_WHEEL, old))
    ]
    lines += [
        f"the wheelhouse {uri} (a new lock: every wheel of it, downloaded once)"
        for uri in sorted(_found(_WHEELHOUSE, new) - _found(_WHEELHOUSE, old))
    ]
    return lines


def downtime_text(blueprint: str) -> str:
    """How long a replace leaves the endpoint down: the blueprint's last recorded start."""
    record = last_start(blueprint)
    if record is None:
        return "unknown (no start recorded): the new pods' node launch, image pull, weights and compile"
    return (
        f"about {record.total_seconds / 60:.0f} min (the last recorded start of {blueprint}, "
        f"{record.recorded_at[:16].replace('T', ' ')})"
    )


# ---- limits ---------------------------------------------------------------------------------------
def serving_pool(objects: Sequence[Obj]) -> str | None:
    """The NodePool the serving pods select (the one with an instance type)."""
    for obj in objects:
        spec = obj.get("spec") or {}
        templates = [(spec.get("template") or {}).get("spec") or {}]
        if obj.get("kind") == "RayService":
            groups = (spec.get("rayClusterConfig") or {}).get("workerGroupSpecs") or []
            templates = [(g.get("template") or {}).get("spec") or {} for g in groups]
        for pod in templates:
            selector = pod.get("nodeSelector") or {}
            if selector.get("node.kubernetes.io/instance-type") and selector.get(POOL_LABEL):
                return str(selector[POOL_LABEL])
    return None


def pool_limits(platform_resources: Sequence[Obj], pool: str) -> dict[str, float] | None:
    """The NodePool's `spec.limits` from the platform stack's state (parsed; memory in bytes)."""
    for obj in deployed_objects(platform_resources):
        if obj.get("kind") == "NodePool" and (obj.get("metadata") or {}).get("name") == pool:
            limits = (obj.get("spec") or {}).get("limits") or {}
            return {key: parse_quantity(value) for key, value in limits.items()}
    return None


def assess(
    old: Sequence[Obj],
    new: Sequence[Obj],
    blueprint: Blueprint,
    *,
    strategy: Strategy,
    capacity: Callable[[dict[str, int], str | None], list[Check]] | None = None,
) -> DayTwo:
    """The day-two plan of a change from the deployed `old` objects to the rendered `new` ones;
    `capacity(extra_nodes, serving_pool)` checks the account's limits (not called when nothing extra
    is needed)."""
    rollouts = predict(old, new, strategy=strategy)
    found = DayTwo(
        blueprint=blueprint.name,
        strategy=strategy,
        rollouts=rollouts,
        caches=cache_lines(old, new, blueprint),
        uploads=upload_lines(old, new),
        bounds=wanted_bounds(old, new, rollouts),
    )
    if found.has_downtime:
        found.downtime = downtime_text(blueprint.name)
    if found.extra and capacity is not None:  # a surge's second cluster, or a replace that grows
        try:
            found.capacity = capacity(found.extra, serving_pool(new))
        except LlmctlError as exc:
            found.capacity = [Check("upgrade capacity", None, f"could not check: {exc.message}")]
    return found
