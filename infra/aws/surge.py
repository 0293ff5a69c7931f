"""Whether the account can launch the extra serving nodes of a surge upgrade (issue 51): a second
RayCluster (KubeRay's zero-downtime upgrade) or one more Deployment pod runs beside the old one,
so its nodes come on top of those already running.

Three limits, each with the nodes already running counted:
- the EC2 vCPU quota of the family (Service Quotas), against the vCPUs of every pending or running
  instance of that quota in the region plus the new nodes' (the quota counts them all);
- the serving NodePool's `limits`: Karpenter adds the capacity of the pool's nodes and launches no
  instance type that would take it past a limit (kubernetes-sigs/karpenter v1.14.1
  pkg/apis/v1/nodepool.go `Limits.ExceededBy`, pkg/controllers/provisioning/scheduling/scheduler.go
  `remainingResources`); the pool's nodes are the instances Karpenter tagged with the pool and cluster;
- capacity reservations with `fallback: none`: the new nodes need that many free reserved instances.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.hardware import HardwareCatalog, Instance, hardware
from llmctl.errors import CatalogError
from llmctl.infra.aws.checks import Check, client_error
from llmctl.infra.aws.reservations import describe_term

NODEPOOL_TAG = "karpenter.sh/nodepool"
CLUSTER_TAG = "eks:eks-cluster-name"
LIVE_STATES = ["pending", "running"]


@dataclass(frozen=True)
class Running:
    """One pending or running instance of the region."""

    instance_type: str
    tags: dict[str, str]


def running_instances(session: Any, region: str) -> list[Running]:
    """Every pending or running instance of the region (DescribeInstances)."""
    ec2 = session.client("ec2", region_name=region)
    found = []
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": LIVE_STATES}]
    )
    for page in pages:
        for reservation in page.get("Reservations", []):
            for item in reservation.get("Instances", []):
                tags = {t["Key"]: t["Value"] for t in item.get("Tags", [])}
                found.append(Running(str(item["InstanceType"]), tags))
    return found


def _row(catalog: HardwareCatalog, name: str) -> Instance | None:
    try:
        return catalog.instance(name)
    except CatalogError:
        return None


def quota_value(session: Any, region: str, code: str) -> tuple[float, str]:
    """The quota's applied value, else AWS's default (`source` says which); raises botocore's errors."""
    from botocore.exceptions import ClientError

    client = session.client("service-quotas", region_name=region)
    try:
        return float(client.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]), "applied"
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
            raise
    found = client.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
    return float(found), "default"


def check_quota_surge(
    session: Any, region: str, instance: Instance, extra: int, running: list[Running], *, spot: bool = False
) -> Check:
    """The family's vCPU quota against the vCPUs running now plus `extra` more nodes."""
    from botocore.exceptions import BotoCoreError, ClientError

    catalog = hardware()
    quota = catalog.quota_for(instance, spot=spot)
    if quota is None:
        return Check("vCPU quota (upgrade)", None, f"no known quota for {instance.name}")
    name = f"vCPU quota {quota.code} (upgrade)"
    try:
        value, source = quota_value(session, region, quota.code)
    except (ClientError, BotoCoreError) as exc:
        return Check(name, None, f"cannot read {quota.name}: {client_error(exc)}")
    now = 0
    counted = 0
    for item in running:
        row = _row(catalog, item.instance_type)
        if row is not None and catalog.quota_for(row, spot=spot) == quota:
            now += row.vcpu
            counted += 1
    need = now + extra * instance.vcpu
    have = int(value)
    detail = (
        f"{quota.name}: {have} vCPUs ({source}); running {now} ({counted} instance(s)) + "
        f"{extra} x {instance.name} ({extra * instance.vcpu}) = {need} needed while old and new both run"
    )
    if need > have:
        fix = (
            f"raise the quota to at least {need}: `aws service-quotas request-service-quota-increase "
            f"--service-code ec2 --quota-code {quota.code} --desired-value {need} --region {region}`"
        )
        return Check(name, False, detail, fix)
    return Check(name, True, detail)


def _shown(resource: str, amount: float) -> str:
    return f"{amount / 1024**3:g}Gi" if resource == "memory" else f"{amount:g}"


def check_pool_limits(
    pool: str, limits: dict[str, float], instance: Instance, extra: int, running: list[Running], cluster: str
) -> Check:
    """The NodePool's limits (parsed quantities, memory in bytes) against the capacity of its nodes plus
    `extra` more (Karpenter's rule)."""
    catalog = hardware()
    nodes = [
        row
        for item in running
        if item.tags.get(NODEPOOL_TAG) == pool and item.tags.get(CLUSTER_TAG) == cluster
        for row in [_row(catalog, item.instance_type)]
        if row is not None
    ]

    def capacity(row: Instance, resource: str) -> float:
        return {
            "cpu": float(row.vcpu),
            "memory": row.memory_gib * 1024**3,
            "aws.amazon.com/neuron": float(row.accelerator_count if row.neuron_cores else 0),
            "aws.amazon.com/neuroncore": float(row.neuron_cores),
            "nvidia.com/gpu": float(row.accelerator_count if row.accelerator == "nvidia" else 0),
        }.get(resource, 0.0)

    over = []
    parts = []
    for resource, limit in sorted(limits.items()):
        used = sum(capacity(row, resource) for row in nodes) + extra * capacity(instance, resource)
        parts.append(f"{resource} {_shown(resource, used)} of {_shown(resource, limit)}")
        if used > limit:
            over.append(resource)
    name = f"NodePool {pool} limits (upgrade)"
    detail = f"{len(nodes)} node(s) of the pool running + {extra} x {instance.name}: " + ", ".join(parts)
    if over:
        return Check(
            name,
            False,
            detail,
            f"raise the NodePool's limits ({', '.join(over)}) in the platform, or `llmctl up --replace`",
        )
    return Check(name, True, detail)


def check_reserved_surge(session: Any, region: str, blueprint: Any, extra: int) -> Check | None:
    """With `capacity.fallback: none`, free reserved instances for the `extra` nodes (None otherwise)."""
    from botocore.exceptions import BotoCoreError, ClientError

    capacity = getattr(blueprint, "capacity", None)
    if capacity is None or capacity.fallback != "none":
        return None
    name = "capacity reservations (upgrade)"
    ec2 = session.client("ec2", region_name=region)
    wanted = blueprint.compute.instance_type
    free = 0
    try:
        for term in capacity.reservations:
            free += sum(
                r.available
                for r in describe_term(ec2, term)
                if r.state == "active" and r.instance_type == wanted
            )
    except (ClientError, BotoCoreError) as exc:
        return Check(name, None, f"could not check: {client_error(exc)}")
    detail = f"{free} free {wanted} in the reservations; the upgrade starts {extra} more (fallback: none)"
    if free < extra:
        return Check(
            name,
            False,
            detail,
            f"reserve {extra - free} more {wanted}, set capacity.fallback: on-demand, or `llmctl up --replace`",
        )
    return Check(name, True, detail)


def check_surge(
    session: Any,
    region: str,
    blueprint: Any,
    extra: dict[str, int],
    *,
    cluster: str,
    pool: str | None,
    limits: dict[str, float] | None,
) -> list[Check]:
    """Every limit on the extra nodes of a surge upgrade (`extra`: nodes per instance type)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if not extra:
        return []
    try:
        running = running_instances(session, region)
    except (ClientError, BotoCoreError) as exc:
        return [Check("running instances (upgrade)", None, f"could not list them: {client_error(exc)}")]
    catalog = hardware()
    checks = []
    spot = blueprint.compute.capacity_type == "spot"
    for name, count in sorted(extra.items()):
        instance = catalog.instance(name)
        checks.append(check_quota_surge(session, region, instance, count, running, spot=spot))
        if pool and limits:
            checks.append(check_pool_limits(pool, limits, instance, count, running, cluster))
    reserved = check_reserved_surge(session, region, blueprint, sum(extra.values()))
    return checks + ([reserved] if reserved else [])
