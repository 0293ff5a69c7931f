"""The EC2 vCPU quota check and the AZs the platform would use: run by `llmctl doctor` and by `up`'s
preflight."""

from __future__ import annotations

from typing import Any

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.pricing import node_plan
from llmctl.errors import LlmctlError
from llmctl.infra.aws.checks import Check, client_error


def platform_az_ids(blueprint: Any, stack: str, region: str) -> list[str]:
    """The AZ IDs the platform would use for this blueprint (empty: no per-region default)."""
    try:
        from llmctl.infra.platform.config import PlatformConfig  # lazy: optional (see the except)
    except ImportError:  # the platform package is not installed in this build
        return []
    try:
        return list(PlatformConfig.for_blueprints([blueprint], stack=stack, region=region).az_ids)
    except LlmctlError:
        return []


def vcpus_needed(blueprint: Any) -> tuple[int, str]:
    """vCPUs the blueprint's serving nodes need at its autoscaling maximum (+ core nodes on CPU)."""

    catalog = hardware()
    plan = node_plan(blueprint, catalog)
    need = plan.nodes_max * plan.instance.vcpu
    why = f"{plan.nodes_max} x {plan.instance.name} ({plan.instance.vcpu} vCPUs)"
    if plan.instance.accelerator == "cpu":
        core = catalog.instance(str(catalog.platform_fixed.core_nodes["instance_type"]))
        count = int(catalog.platform_fixed.core_nodes["count"])
        need += core.vcpu * count
        why += f" + {count} core {core.name} nodes"
    return need, why


def check_quota(session: Any, region: str, blueprint: Any) -> Check:
    """The EC2 vCPU quota of the blueprint's family against what it needs."""
    from botocore.exceptions import BotoCoreError, ClientError

    catalog = hardware()
    instance = catalog.instance(blueprint.compute.instance_type)
    quota = catalog.quota_for(instance, spot=blueprint.compute.capacity_type == "spot")
    if quota is None:
        return Check("vCPU quota", None, f"no known quota for {instance.name}", None)
    need, why = vcpus_needed(blueprint)
    client = session.client("service-quotas", region_name=region)
    value: float | None = None
    source = "applied"
    try:
        value = client.get_service_quota(ServiceCode="ec2", QuotaCode=quota.code)["Quota"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchResourceException":
            return Check(
                f"vCPU quota {quota.code}", None, f"cannot read {quota.name}: {client_error(exc)}", None
            )
        try:
            value = client.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=quota.code)["Quota"][
                "Value"
            ]
            source = "default"
        except (ClientError, BotoCoreError) as inner:
            return Check(
                f"vCPU quota {quota.code}", None, f"cannot read {quota.name}: {client_error(inner)}", None
            )
    except BotoCoreError as exc:
        return Check(f"vCPU quota {quota.code}", None, f"cannot read {quota.name}: {exc}", None)
    name = f"vCPU quota {quota.code}"
    have = int(value or 0)
    detail = f"{quota.name}: {have} vCPUs ({source}), needed {need} for {why}"
    if have < need:
        fix = (
            f"request an increase to at least {need}: `aws service-quotas request-service-quota-increase "
            f"--service-code ec2 --quota-code {quota.code} --desired-value {need} --region {region}` "
            "(the quota counts every running instance of the family in the region)"
        )
        return Check(name, False, detail, fix)
    return Check(name, True, detail)
