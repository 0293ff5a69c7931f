"""Live refresh of the instance catalog from EC2 and the AWS Pricing API.

Writes an overlay file that :func:`llmctl.blueprints.hardware.hardware` merges over the shipped
rows. For instance types the catalog already knows, only host specs and prices are refreshed;
the accelerator topology (logical NeuronCores, memory per device) stays as shipped because the
serving engines count it differently from EC2 (e.g. trn2 with LNC=2). Unknown accelerator types
are added with their topology from ``NeuronInfo`` / ``GpuInfo``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from llmctl.blueprints.hardware import HardwareCatalog, Instance
from llmctl.errors import CloudError, PrerequisiteError
from llmctl.infra.aws.session import new_session

# The Pricing API names regions by location; these are the regions llmctl plans for.
REGION_LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}
HOURS_3Y = 3 * 365 * 24


@dataclass
class RefreshResult:
    """What a refresh found."""

    region: str
    path: str
    updated: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    prices: dict[str, dict[str, float | None]] = field(default_factory=dict)


def _accelerator_of(info: dict[str, Any]) -> str:
    neuron = info.get("NeuronInfo")
    if neuron:
        name = str(neuron["NeuronDevices"][0].get("Name", "")).lower()
        return {"inferentia2": "inferentia2", "trainium": "trainium", "trainium2": "trainium2"}.get(
            name, "inferentia2"
        )
    return "nvidia" if info.get("GpuInfo") else "cpu"


def row_from_ec2(info: dict[str, Any]) -> dict[str, Any]:
    """A catalog row (without prices) from one DescribeInstanceTypes entry."""
    name = info["InstanceType"]
    row: dict[str, Any] = {
        "name": name,
        "family": name.split(".")[0],
        "accelerator": _accelerator_of(info),
        "vcpu": int(info["VCpuInfo"]["DefaultVCpus"]),
        "memory_gib": round(info["MemoryInfo"]["SizeInMiB"] / 1024, 2),
    }
    network = info.get("NetworkInfo") or {}
    cards = network.get("NetworkCards") or []
    default_card = int(network.get("DefaultNetworkCardIndex", 0))
    if default_card < len(cards) and network.get("Ipv4AddressesPerInterface"):
        # what Karpenter's ENILimitedPods reads: NetworkCards[DefaultNetworkCardIndex], IPv4 per ENI
        row["enis"] = int(cards[default_card]["MaximumNetworkInterfaces"])
        row["ipv4_per_eni"] = int(network["Ipv4AddressesPerInterface"])
    neuron = info.get("NeuronInfo")
    gpu = info.get("GpuInfo")
    if neuron:
        device = neuron["NeuronDevices"][0]
        row.update(
            accelerator_name=device.get("Name"),
            accelerator_count=int(device["Count"]),
            accelerator_memory_gib=device["MemoryInfo"]["SizeInMiB"] / 1024,
            neuron_cores=int(device["Count"]) * int(device["CoreInfo"]["Count"]),
        )
    elif gpu:
        device = gpu["Gpus"][0]
        row.update(
            accelerator_name=device.get("Name"),
            accelerator_count=int(device["Count"]),
            accelerator_memory_gib=round(device["MemoryInfo"]["SizeInMiB"] / 1024, 2),
        )
    return row


def describe_types(ec2: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """DescribeInstanceTypes for the names offered in the region (unknown names are left out).

    Asking by name fails the whole call on one unknown type, so the region's list is paged
    through instead.
    """
    wanted = set(names)
    found: dict[str, dict[str, Any]] = {}
    paginator = ec2.get_paginator("describe_instance_types")
    for page in paginator.paginate(PaginationConfig={"PageSize": 100}):
        for info in page["InstanceTypes"]:
            if info["InstanceType"] in wanted:
                found[info["InstanceType"]] = info
    return found


def _terms_price(product: dict[str, Any]) -> tuple[float | None, float | None]:
    """(on-demand $/h, effective 3-year all-upfront $/h) from one Pricing API product."""
    on_demand: float | None = None
    reserved: float | None = None
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dim in term["priceDimensions"].values():
            usd = float(dim["pricePerUnit"].get("USD", "0"))
            if usd > 0:
                on_demand = usd
    for term in product.get("terms", {}).get("Reserved", {}).values():
        attrs = term.get("termAttributes", {})
        if attrs.get("LeaseContractLength") != "3yr" or attrs.get("PurchaseOption") != "All Upfront":
            continue
        if attrs.get("OfferingClass", "standard") != "standard":
            continue
        upfront = hourly = 0.0
        for dim in term["priceDimensions"].values():
            usd = float(dim["pricePerUnit"].get("USD", "0"))
            if dim.get("unit") == "Quantity":
                upfront += usd
            else:
                hourly += usd
        reserved = round(upfront / HOURS_3Y + hourly, 4)
    return on_demand, reserved


def fetch_prices(pricing: Any, region: str, name: str) -> tuple[float | None, float | None]:
    """Linux, shared-tenancy prices of one instance type in one region."""
    location = REGION_LOCATIONS.get(region)
    if location is None:
        raise CloudError(
            f"no Pricing API location is known for region {region!r}",
            f"use one of: {', '.join(REGION_LOCATIONS)}",
        )
    filters = [
        {"Type": "TERM_MATCH", "Field": "instanceType", "Value": name},
        {"Type": "TERM_MATCH", "Field": "location", "Value": location},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]
    response = pricing.get_products(ServiceCode="AmazonEC2", Filters=filters, MaxResults=10)
    on_demand = reserved = None
    for raw in response.get("PriceList", []):
        product = json.loads(raw) if isinstance(raw, str) else raw
        od, ri = _terms_price(product)
        on_demand = on_demand or od
        reserved = reserved or ri
    return on_demand, reserved


def spot_price(ec2: Any, name: str) -> float | None:
    """Median of the latest Linux spot price per availability zone."""
    response = ec2.describe_spot_price_history(
        InstanceTypes=[name], ProductDescriptions=["Linux/UNIX"], StartTime=datetime.now(timezone.utc)
    )
    latest: dict[str, float] = {}
    for item in sorted(response.get("SpotPriceHistory", []), key=lambda i: i["Timestamp"]):
        latest[item["AvailabilityZone"]] = float(item["SpotPrice"])
    return round(statistics.median(latest.values()), 4) if latest else None


def refresh_catalog(
    catalog: HardwareCatalog,
    *,
    region: str,
    out: Path,
    instance_types: list[str] | None = None,
    session: Any = None,
) -> RefreshResult:
    """Query EC2 and the Pricing API, write the overlay, and say what changed."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    session = session or new_session(region)
    names = instance_types or sorted(catalog.instances)
    result = RefreshResult(region=region, path=str(out))
    try:
        ec2 = session.client("ec2", region_name=region)
        # The Pricing API is served from us-east-1 only.
        pricing = session.client("pricing", region_name="us-east-1")
        live = describe_types(ec2, names)
        rows: list[dict[str, Any]] = []
        for name in names:
            info = live.get(name)
            if info is None:
                result.missing.append(name)
                continue
            known: Instance | None = catalog.instances.get(name)
            row = row_from_ec2(info)
            if known is not None and known.accelerator != "cpu":
                row = {"name": name, "vcpu": row["vcpu"], "memory_gib": row["memory_gib"]}
            on_demand, reserved = fetch_prices(pricing, region, name)
            spot = spot_price(ec2, name)
            if on_demand is not None:
                row["on_demand_usd"] = on_demand
            elif known is None:
                result.missing.append(name)
                continue
            row["reserved_3y_usd"] = (
                reserved if reserved is not None else (known.reserved_3y_usd if known else None)
            )
            row["spot_usd"] = spot
            row["price_note"] = f"{region} via the AWS Pricing API, {datetime.now(timezone.utc):%Y-%m-%d}"
            result.prices[name] = {
                "on_demand_usd": row.get("on_demand_usd"),
                "reserved_3y_usd": row["reserved_3y_usd"],
                "spot_usd": spot,
            }
            (result.updated if known else result.added).append(name)
            rows.append(row)
    except NoCredentialsError:
        raise PrerequisiteError(
            "no AWS credentials found", "configure credentials (`aws configure` or AWS_PROFILE) and retry"
        ) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise CloudError(
            f"AWS refused the catalog refresh: {error.get('Code')}: {error.get('Message')}",
            "the caller needs ec2:DescribeInstanceTypes, ec2:DescribeSpotPriceHistory and pricing:GetProducts",
        ) from None
    except BotoCoreError as exc:
        raise CloudError(f"could not reach AWS: {exc}", "check the network and the region") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump({"region": region, "instances": rows}, sort_keys=False))
    return result
