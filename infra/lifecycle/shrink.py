"""What `llmctl down --blueprint X` (or `--workload X`) does to the platform it keeps.

The platform is re-applied for the workloads left whenever removing X changes anything their needs
decide (:mod:`llmctl.infra.platform.needs`, merged as `up` merges them): a pool (X's pool, with its
NodePool, EC2NodeClass and, when no other pool needs it, its device plugin chart), a pool's root
volume (a 600 GiB root of a 405B in int8 back to the pool's 500 GiB), KEDA (when no workload left
scales on its queue) or a pool's capacity reservations (X's terms leave the EC2NodeClass). The pools
and KEDA are compared with what the platform stack outputs (`node_pools`, `versions.charts`), the
root volumes and reservations with what every workload recorded (each `up` applies all of them) and
what the deployed EC2NodeClasses carry (the platform's saved state): a platform left larger by
`down --keep-platform`, `stacks gc` or an older llmctl is brought down too.

A smaller root volume or a reservation dropped changes the pool's EC2NodeClass: Karpenter replaces
the pool's running nodes (drift), the other workloads' too. `down` says so before it asks, with the
lines `up` and `plan` print (:mod:`llmctl.infra.lifecycle.drift_notes`), and `--keep-platform` leaves
the platform as it is."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmctl.blueprints.pools import POOLS, pool
from llmctl.errors import LlmctlError
from llmctl.infra.lifecycle.day_two import deployed_objects
from llmctl.infra.lifecycle.drift_notes import DriftReader, drift_notes
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT, Engine, StackSpec
from llmctl.infra.lifecycle.environment import Environment, WorkloadRecord, union
from llmctl.infra.platform.needs import PlatformNeeds, merge_needs

KEDA_GONE = (
    "KEDA removed (no workload left scales on its queue; its CRDs go with it, and any ScaledObject left "
    "in the cluster)"
)
KEEP_HINT = (
    "(`--keep-platform` leaves the platform as it is: no node is replaced, and the platform keeps "
    "these settings until the next `up` or `down --blueprint` of the environment)"
)


@dataclass
class Shrink:
    """The platform `down` applies for the workloads left, what that changes, and the node drift."""

    config: Any  # the PlatformConfig of the workloads left
    changes: list[str]  # one line per change: a pool, a root volume, KEDA, reservations
    drift: list[str] = field(default_factory=list)  # the drift lines (heading first), or why not read

    def listing(self, stack: str, remaining: Sequence[WorkloadRecord]) -> list[str]:
        """The confirmation's lines: the platform update, each change, the node drift."""
        staying = ", ".join(r.label() for r in remaining) or "no workload"
        return [
            f"platform stack {PLATFORM_PROJECT}/{stack}: updated to what the workloads left need "
            f"(pools {', '.join(self.config.pools)}; {staying} stays)",
            *(f"  {line}" for line in self.changes),
            *self.drift,
            *([KEEP_HINT] if self.drift else []),
        ]


def shrink_for(
    env: Environment,
    records: Sequence[WorkloadRecord],
    remaining: Sequence[WorkloadRecord],
    outputs: Mapping[str, Any],
    *,
    region: str,
    reader: DriftReader | None,
) -> Shrink | None:
    """The platform update after removing the records not in `remaining` from those of the deployed
    platform (its stack `outputs`); None when it would change nothing the needs decide."""
    config = env.platform_config(remaining, region=region)
    changes = platform_changes(
        records, remaining, outputs, config.pools, deployed_needs(env.engine, env.stack)
    )
    if not changes:
        return None
    serving = [(r.project, r.stack(env.stack)) for r in remaining]
    drift = drift_notes(reader, env.engine, env.stack, config, command="down", stacks=serving)
    return Shrink(config, changes, drift)


def platform_changes(
    records: Sequence[WorkloadRecord],
    remaining: Sequence[WorkloadRecord],
    outputs: Mapping[str, Any],
    pools: Sequence[str],
    carried: PlatformNeeds | None = None,
) -> list[str]:
    """What applying the platform of `remaining` (its `pools`) changes on the deployed one: pools
    removed (or added) against the stack's `node_pools`, KEDA against its `versions.charts`, root
    volumes and capacity reservations against the needs of every record and those the deployed
    EC2NodeClasses `carried` (:func:`deployed_needs`)."""
    deployed = [str(p["name"]) for p in outputs.get("node_pools") or []] or union(records)[0]
    was = merge_needs([*(r.needs() for r in records), *([carried] if carried else [])])
    now = merge_needs(r.needs() for r in remaining)
    kept = set(pools)
    lines = [f"pool {name} removed (no workload left uses it)" for name in deployed if name not in kept]
    lines += [f"pool {name} added (a workload left needs it)" for name in pools if name not in deployed]
    lines += _root_volumes(was, now, kept)
    lines += _reservations(was, now, kept)
    charts = (outputs.get("versions") or {}).get("charts") or {}
    if (was.queue_scaling or "keda" in charts) and not now.queue_scaling:
        # the chart templates its CRDs (kedacore/charts keda/templates/crds/*.yaml, `{{- if .Values.crds.install }}`
        # at commit cf0b4029; `crds.install: true` in chart 2.20.2's values.yaml, ../shared/upstream/keda):
        # uninstalling it deletes them, and with them every ScaledObject
        lines.append(KEDA_GONE)
    return lines


def deployed_needs(engine: Engine, stack: str) -> PlatformNeeds | None:
    """The root volumes above their pool's default and the capacity reservation terms that the
    deployed platform's EC2NodeClasses carry, read from its saved state as
    :func:`llmctl.infra.platform.manifests.ec2nodeclass_manifest` writes them (`volumeSize: 1000Gi`;
    `capacityReservationSelectorTerms` of `{id}` or `{tags}`); None when the state cannot be read
    (the records alone are compared then)."""
    try:
        objects = deployed_objects(engine.state_resources(StackSpec(PLATFORM_PROJECT, stack)))
    except LlmctlError:
        return None
    known = {spec.name for spec in POOLS}
    sizes: dict[str, int] = {}
    reservations: dict[str, dict[str, Any]] = {}
    for obj in objects:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if obj.get("kind") != "EC2NodeClass" or name not in known:
            continue
        spec = obj.get("spec") or {}
        for mapping in spec.get("blockDeviceMappings") or []:
            size = str((mapping.get("ebs") or {}).get("volumeSize") or "")
            if size.endswith("Gi") and size[:-2].isdigit() and int(size[:-2]) > pool(name).root_volume_gib:
                sizes[name] = max(int(size[:-2]), sizes.get(name, 0))
        selected = [t for t in spec.get("capacityReservationSelectorTerms") or [] if isinstance(t, dict)]
        terms = [t.get("id") or t.get("tags") for t in selected]
        if any(terms):
            reservations[name] = {"reservations": [t for t in terms if t], "fallback": "none"}
    return PlatformNeeds(sizes, reservations, False)


def _root_volumes(was: PlatformNeeds, now: PlatformNeeds, kept: set[str]) -> list[str]:
    lines = []
    for name in sorted({*was.root_volume_gib, *now.root_volume_gib} & kept):
        old, new = was.root_volume_gib.get(name), now.root_volume_gib.get(name)
        if old != new:
            default = pool(name).root_volume_gib
            lines.append(
                f"pool {name}: root volume {old or default} GiB -> {new or default} GiB"
                + ("" if new else " (the pool's default)")
            )
    return lines


def _reservations(was: PlatformNeeds, now: PlatformNeeds, kept: set[str]) -> list[str]:
    lines = []
    for name in sorted({*was.capacity_reservations, *now.capacity_reservations} & kept):
        old = list((was.capacity_reservations.get(name) or {}).get("reservations") or [])
        new = list((now.capacity_reservations.get(name) or {}).get("reservations") or [])
        gone = [term for term in old if term not in new]
        if gone:  # (the merged fallback is no resource: it changes nothing on the platform)
            lines.append(
                f"pool {name}: capacity reservations no longer selected: {', '.join(map(_term, gone))}"
                + ("" if new else " (its NodePool no longer allows the reserved capacity type)")
            )
    return lines


def _term(term: Any) -> str:
    """A reservation term: its ID, or its tag map."""
    return term if isinstance(term, str) else f"tags {json.dumps(term, sort_keys=True)}"
