"""What the platform needs from each blueprint beyond its pools and instance types (the root volume
its model needs, the capacity reservations it launches into, KEDA for a Deployment that scales on its
queue), and how the needs of several blueprints merge.

One place for both ways a platform is made: `PlatformConfig.for_blueprints` (`plan`) merges the needs
of the blueprints it is given; `llmctl up` merges those its workload stacks recorded
(`lifecycle.environment.WorkloadRecord`, computed by :func:`blueprint_needs` when each was deployed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pools import pool_for_blueprint, root_volumes_by_pool
from llmctl.blueprints.rules import queue_scaled
from llmctl.blueprints.schema import Blueprint


@dataclass(frozen=True)
class PlatformNeeds:
    """The platform settings of one blueprint (or several, merged), as `PlatformConfig` takes them."""

    root_volume_gib: Mapping[str, int] = field(default_factory=dict)
    capacity_reservations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    queue_scaling: bool = False

    def settings(self) -> dict[str, Any]:
        """The `PlatformConfig` fields these needs set."""
        return {
            "root_volume_gib": dict(self.root_volume_gib),
            "capacity_reservations": {
                name: {"reservations": list(entry["reservations"]), "fallback": entry["fallback"]}
                for name, entry in self.capacity_reservations.items()
            },
            "queue_scaling": self.queue_scaling,
        }


def blueprint_needs(bp: Blueprint) -> PlatformNeeds:
    """One blueprint's needs: a root volume above its pool's default where its model does not fit
    (:func:`llmctl.blueprints.pools.root_volumes_by_pool`), its capacity reservations on its serving
    pool, and whether its Deployment scales on its queue through KEDA (:func:`rules.queue_scaled`)."""
    return PlatformNeeds(
        root_volume_gib=root_volumes_by_pool([bp], hardware()),
        capacity_reservations=_reservations(bp),
        queue_scaling=queue_scaled(bp),
    )


def merge_needs(needs: Iterable[PlatformNeeds]) -> PlatformNeeds:
    """The needs of several blueprints together: the largest root volume per pool; the reservations
    per pool with their terms added up (each once) and an on-demand fallback when any of them allows
    it (what `doctor` checks the reservations against); queue scaling when any needs it. The pool
    never loses its own capacity types to a reservation (manifests.pool_capacity_types)."""
    sizes: dict[str, int] = {}
    reservations: dict[str, dict[str, Any]] = {}
    queue = False
    for need in needs:
        for name, size in need.root_volume_gib.items():
            sizes[name] = max(size, sizes.get(name, 0))
        for name, spec in need.capacity_reservations.items():
            entry = reservations.setdefault(name, {"reservations": [], "fallback": "none"})
            entry["reservations"] += [t for t in spec["reservations"] if t not in entry["reservations"]]
            if spec["fallback"] == "on-demand":
                entry["fallback"] = "on-demand"
        queue = queue or need.queue_scaling
    return PlatformNeeds(sizes, reservations, queue)


def _reservations(bp: Blueprint) -> dict[str, dict[str, Any]]:
    """The blueprint's capacity reservations, on the pool of its serving nodes (`pool_for_blueprint`)."""
    if bp.capacity is None:
        return {}
    name = pool_for_blueprint(bp, hardware()).name
    return {name: {"reservations": list(bp.capacity.reservations), "fallback": bp.capacity.fallback}}
