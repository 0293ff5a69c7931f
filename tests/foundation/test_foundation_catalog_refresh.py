"""`llmctl catalog refresh`: EC2 specs and spot prices from a local moto server, Pricing API via Stubber.

moto has no Pricing API, so that one client is answered by botocore's Stubber, which still
validates our request and the response against the real service model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from typer.testing import CliRunner

from llmctl.blueprints.hardware import hardware, load_hardware
from llmctl.errors import CloudError
from llmctl.infra.aws.catalog_refresh import fetch_prices, refresh_catalog, row_from_ec2


@pytest.fixture
def aws_env(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    return moto_url


def _product(od: str, upfront: str | None = None) -> str:
    terms: dict[str, Any] = {
        "OnDemand": {"t1": {"priceDimensions": {"d1": {"unit": "Hrs", "pricePerUnit": {"USD": od}}}}},
        "Reserved": {},
    }
    if upfront is not None:
        terms["Reserved"]["r1"] = {
            "termAttributes": {
                "LeaseContractLength": "3yr",
                "PurchaseOption": "All Upfront",
                "OfferingClass": "standard",
            },
            "priceDimensions": {
                "q": {"unit": "Quantity", "pricePerUnit": {"USD": upfront}},
                "h": {"unit": "Hrs", "pricePerUnit": {"USD": "0.0000000000"}},
            },
        }
    return json.dumps({"product": {}, "terms": terms})


def _filters(instance_type: str) -> list[dict[str, str]]:
    """What the Pricing API needs to return exactly one Linux, shared-tenancy, on-demand-capable
    product in us-east-1 (its location name, not the region code); any other filter is a bug."""
    terms = {
        "instanceType": instance_type,
        "location": "US East (N. Virginia)",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in terms.items()]


class _Session:
    """A boto3 session whose pricing client is stubbed and whose EC2 client talks to moto."""

    def __init__(self, prices: dict[str, tuple[str, str | None]]) -> None:
        self.session = boto3.session.Session(region_name="us-east-1")
        self.pricing = self.session.client("pricing", region_name="us-east-1")
        self.stubber = Stubber(self.pricing)
        for name, (od, upfront) in prices.items():
            self.stubber.add_response(
                "get_products",
                {"PriceList": [_product(od, upfront)], "FormatVersion": "aws_v1"},
                {"ServiceCode": "AmazonEC2", "Filters": _filters(name), "MaxResults": 10},
            )
        self.stubber.activate()

    def client(self, name: str, region_name: str) -> Any:
        return self.pricing if name == "pricing" else self.session.client(name, region_name=region_name)


def test_row_from_ec2_reads_neuron_and_gpu_topology(aws_env: str) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    types = {
        t["InstanceType"]: t
        for t in ec2.describe_instance_types(InstanceTypes=["inf2.48xlarge", "g5.12xlarge"])["InstanceTypes"]
    }
    inf2 = row_from_ec2(types["inf2.48xlarge"])
    assert (inf2["accelerator"], inf2["accelerator_count"], inf2["neuron_cores"], inf2["vcpu"]) == (
        "inferentia2",
        12,
        24,
        192,
    )
    g5 = row_from_ec2(types["g5.12xlarge"])
    assert (g5["accelerator"], g5["accelerator_count"], g5["accelerator_name"]) == ("nvidia", 4, "A10G")
    # the ENI limits Karpenter's max pods reads agree with the shipped catalog (from upstream's vpclimits)
    for name, row in (("inf2.48xlarge", inf2), ("g5.12xlarge", g5)):
        shipped = hardware().instance(name)
        assert (row["enis"], row["ipv4_per_eni"]) == (shipped.enis, shipped.ipv4_per_eni) == (15, 50)


def test_refresh_writes_an_overlay_that_the_catalog_uses(aws_env: str, tmp_path: Path) -> None:
    session = _Session({"inf2.xlarge": ("0.7582000000", "8600"), "m5.xlarge": ("0.1920000000", None)})
    out = tmp_path / "overlay.yaml"
    result = refresh_catalog(
        hardware(), region="us-east-1", out=out, instance_types=["inf2.xlarge", "m5.xlarge"], session=session
    )
    session.stubber.assert_no_pending_responses()
    assert result.updated == ["inf2.xlarge", "m5.xlarge"] and not result.missing
    assert result.prices["inf2.xlarge"]["reserved_3y_usd"] == pytest.approx(8600 / (3 * 365 * 24), abs=1e-4)
    assert result.prices["m5.xlarge"]["reserved_3y_usd"] is None
    catalog = load_hardware(out)
    assert catalog.instance("inf2.xlarge").on_demand_usd == pytest.approx(0.7582)
    assert catalog.instance("inf2.xlarge").neuron_cores == 2  # topology stays as shipped
    assert "Pricing API" in (catalog.instance("m5.xlarge").price_note or "")


def test_unknown_type_in_region_is_reported_missing(aws_env: str, tmp_path: Path) -> None:
    session = _Session({"m5.large": ("0.0960000000", None)})
    result = refresh_catalog(
        hardware(),
        region="us-east-1",
        out=tmp_path / "o.yaml",
        instance_types=["zz9.huge", "m5.large"],
        session=session,
    )
    assert result.missing == ["zz9.huge"] and result.updated == ["m5.large"]


def test_unknown_region_for_pricing() -> None:
    with pytest.raises(CloudError, match="no Pricing API location"):
        fetch_prices(None, "mars-north-1", "inf2.xlarge")


def test_cli_refresh_without_credentials_is_a_clean_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from llmctl.cli.app import app

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = CliRunner().invoke(app, ["catalog", "refresh", "--instance-type", "inf2.xlarge"])
    assert result.exit_code == 3  # PrerequisiteError, like `up`, `doctor` and `sweep`
    assert "no AWS credentials" in result.stderr and "aws configure" in result.stderr
