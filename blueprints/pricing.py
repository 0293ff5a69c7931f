"""What a blueprint costs per hour, and per 1,000 output tokens at a given throughput."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.blueprints.hardware import HardwareCatalog, Instance, PricingModel, ceil_div
from llmctl.blueprints.schema import Blueprint
from llmctl.errors import CatalogError


@dataclass(frozen=True)
class NodePlan:
    """How many serving nodes a blueprint needs (a replica spans `nodes_per_replica` of them when its
    pipeline stages run on several nodes; then `replicas_per_node` is 1)."""

    instance: Instance
    replicas_per_node: int
    nodes: int
    nodes_max: int
    nodes_per_replica: int = 1


def replicas_per_node(blueprint: Blueprint, instance: Instance) -> int:
    """How many replicas share one node: by accelerators, or by vCPUs on CPU nodes; 1 for a replica
    over several nodes (each of its pipeline stages takes a whole node)."""
    if blueprint.nodes_per_replica > 1:
        return 1
    if blueprint.compute.accelerator == "cpu":
        cpus = blueprint.compute.cpus_per_replica
        return max(1, int(instance.vcpu // cpus)) if cpus else 1
    return max(1, instance.parallel_units // blueprint.compute.tensor_parallel)


def node_plan(blueprint: Blueprint, catalog: HardwareCatalog) -> NodePlan:
    """Serving nodes at the initial replica count and at the autoscaling maximum: whole replicas of
    `nodes_per_replica` nodes each."""
    instance = catalog.instance(blueprint.compute.instance_type)
    per_node = replicas_per_node(blueprint, instance)
    scaling, span = blueprint.scaling, blueprint.nodes_per_replica
    nodes = ceil_div(scaling.replicas, per_node) * span if scaling.replicas else 0
    return NodePlan(instance, per_node, nodes, ceil_div(scaling.max_replicas, per_node) * span, span)


@dataclass(frozen=True)
class TokenCost:
    """Dollars per 1,000 output tokens at one throughput."""

    throughput_tokens_per_s: float
    usd_per_1k_output_tokens: float
    usd_per_1k_output_tokens_with_platform: float


@dataclass(frozen=True)
class CostReport:
    """What `llmctl cost` prints."""

    blueprint: str
    instance_type: str
    pricing: str
    node_hourly_usd: float
    price_source: str
    replicas: int
    replicas_per_node: int
    nodes: int
    nodes_max: int
    serving_hourly_usd: float
    serving_hourly_max_usd: float
    platform_hourly_usd: float
    total_hourly_usd: float
    per_1k_tokens: list[TokenCost] = field(default_factory=list)
    # What scaling to zero saves per hour: the serving nodes of the last replica (`nodes_per_replica`
    # of them), None when the blueprint's min_replicas keeps a replica up.
    zero_saving_hourly_usd: float | None = None
    nodes_per_replica: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys, money rounded to 1/10,000 of a dollar (`nodes_per_replica` only for a
        replica over several nodes)."""
        data = asdict(self)
        if data["nodes_per_replica"] == 1:
            del data["nodes_per_replica"]
        for key, value in data.items():
            if key.endswith("_usd") and isinstance(value, float):
                data[key] = round(value, 4)
        data["per_1k_tokens"] = [
            {k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()}
            for row in data["per_1k_tokens"]
        ]
        return data


def usd_per_1k_tokens(hourly_usd: float, tokens_per_s: float) -> float:
    """Dollars per 1,000 tokens for a deployment costing `hourly_usd` that makes `tokens_per_s`."""
    if tokens_per_s <= 0:
        raise ValueError("throughput must be positive")
    return hourly_usd / (tokens_per_s * 3600.0) * 1000.0


def blueprint_cost(
    blueprint: Blueprint,
    catalog: HardwareCatalog,
    *,
    pricing: PricingModel = "on-demand",
    node_price: float | None = None,
    throughputs: list[float] | None = None,
) -> CostReport:
    """Hourly cost of the blueprint's serving nodes plus the platform, and per-token cost.

    Per-token cost divides the serving nodes' cost by the throughput (the figure the seeds
    quote); the `_with_platform` variant adds the cluster's fixed cost.
    """
    plan = node_plan(blueprint, catalog)
    if node_price is not None:
        price, source = node_price, "given with --node-price"
    else:
        catalog_price = plan.instance.price(pricing)
        if catalog_price is None:
            raise CatalogError(
                f"the catalog has no {pricing} price for {plan.instance.name}",
                "run `llmctl catalog refresh` to load live prices, or pass --node-price USD_PER_HOUR",
            )
        price, source = (
            catalog_price,
            f"catalog {pricing}" + (f" ({plan.instance.price_note})" if plan.instance.price_note else ""),
        )
    serving = price * plan.nodes
    platform = catalog.platform_hourly()
    per_1k = [
        TokenCost(tps, usd_per_1k_tokens(serving, tps), usd_per_1k_tokens(serving + platform, tps))
        for tps in throughputs or []
    ]
    return CostReport(
        blueprint=blueprint.name,
        instance_type=plan.instance.name,
        pricing=pricing,
        node_hourly_usd=price,
        price_source=source,
        replicas=blueprint.scaling.replicas,
        replicas_per_node=plan.replicas_per_node,
        nodes=plan.nodes,
        nodes_max=plan.nodes_max,
        serving_hourly_usd=serving,
        serving_hourly_max_usd=price * plan.nodes_max,
        platform_hourly_usd=platform,
        total_hourly_usd=serving + platform,
        per_1k_tokens=per_1k,
        zero_saving_hourly_usd=price * plan.nodes_per_replica
        if blueprint.scaling.min_replicas == 0
        else None,
        nodes_per_replica=plan.nodes_per_replica,
    )
