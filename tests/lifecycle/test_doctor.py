"""`llmctl doctor` against a local moto server.

moto models EC2 offerings and STS, but Service Quotas only for the `vpc` service; the `ec2_quotas`
fixture seeds the EC2 vCPU quotas into the running moto backend (its data, not our code).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmctl.infra.aws.doctor import run_doctor

INF_QUOTA = "L-1945791B"


@pytest.fixture
def ec2_quotas(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, float]], None]]:
    from moto.servicequotas.models import ServiceQuotasBackend

    values: dict[str, float] = {}
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code == "ec2" and quota_code in values:
            return {
                "ServiceCode": "ec2",
                "QuotaCode": quota_code,
                "QuotaName": quota_code,
                "Value": values[quota_code],
            }
        return original(self, service_code, quota_code)

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    yield values.update


def _check(report: Any, prefix: str) -> Any:
    matches = [c for c in report.checks if c.name.startswith(prefix)]
    assert matches, [c.name for c in report.checks]
    return matches[0]


def test_quota_below_need_fails_with_the_increase_to_request(
    aws: str, ec2_quotas: Callable[..., None]
) -> None:
    ec2_quotas({INF_QUOTA: 96})
    report = run_doctor("llama2-inf2", region=aws)
    quota = _check(report, "vCPU quota")
    assert quota.ok is False
    assert "96" in quota.detail and "192" in quota.detail
    assert f"--quota-code {INF_QUOTA} --desired-value 192" in quota.fix
    assert report.ok is False


def test_quota_above_need_passes(aws: str, ec2_quotas: Callable[..., None]) -> None:
    ec2_quotas({INF_QUOTA: 384})
    report = run_doctor("llama2-inf2", region=aws)
    assert _check(report, "vCPU quota").ok is True
    assert _check(report, "AWS credentials").ok is True
    assert "123456789012" in _check(report, "AWS credentials").detail


def test_unknown_quota_is_a_warning_not_a_failure(aws: str) -> None:
    report = run_doctor("llama2-inf2", region=aws)
    assert _check(report, "vCPU quota").ok is None


def test_instance_offered_in_the_platform_azs(aws: str) -> None:
    check = _check(run_doctor("llama2-inf2", region="us-west-2"), "inf2.48xlarge")
    assert check.ok is True and "usw2-az4" in check.detail and "usw2-az1" in check.detail


def test_instance_not_offered_in_the_region(aws: str) -> None:
    check = _check(run_doctor("llama2-inf2", region="us-west-1"), "inf2.48xlarge")
    assert check.ok is False and "not offered in us-west-1" in check.detail and "--region" in check.fix


def test_instance_offered_in_too_few_azs_names_the_ones_to_pick(aws: str) -> None:
    import boto3

    # moto's data: inf2.48xlarge is offered in one zone of sa-east-1, p4de.24xlarge in none
    check = _check(run_doctor("llama2-inf2", region="sa-east-1"), "inf2")
    assert check.ok is False
    wanted = set(check.detail.rsplit("of the chosen AZs ", 1)[1].split(", "))
    pages = (
        boto3.client("ec2", region_name="sa-east-1")
        .get_paginator("describe_instance_type_offerings")
        .paginate(
            LocationType="availability-zone-id",
            Filters=[{"Name": "instance-type", "Values": ["inf2.48xlarge"]}],
        )
    )
    offered = {row["Location"] for page in pages for row in page["InstanceTypeOfferings"]}
    assert offered == {"sae1-az3"}
    assert (
        check.fix
        == f"pick AZ IDs that offer it: {', '.join(sorted(offered - wanted)) or 'none in this region'} (platform setting az_ids)"
    )
    nowhere = _check(run_doctor("llama2-70b-vllm-gpu", region="sa-east-1"), "p4de")
    assert (nowhere.ok, nowhere.detail) == (False, "p4de.24xlarge is not offered in sa-east-1")
    assert nowhere.fix == "choose another --region (inf2/trn1 are in us-east-1, us-east-2, us-west-2, ...)"


def test_gated_model_without_token(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    check = _check(run_doctor("llama2-triton-vllm-gpu", region=aws), "Hugging Face")
    assert check.ok is False and "HF_TOKEN" in check.fix
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert _check(run_doctor("llama2-triton-vllm-gpu", region=aws), "Hugging Face").ok is True
    assert _check(run_doctor("llama2-inf2", region=aws), "Hugging Face").ok is True


def test_no_credentials_stops_aws_checks(no_aws: None) -> None:
    report = run_doctor("llama2-inf2", region="us-west-2")
    cred = _check(report, "AWS credentials")
    assert cred.ok is False and "aws configure" in cred.fix
    assert not [c for c in report.checks if c.name.startswith("vCPU")]
    assert report.to_dict()["ok"] is False


def test_tool_checks_report_missing_pulumi(aws: str, no_pulumi: None) -> None:
    check = _check(run_doctor(None, region=aws), "pulumi CLI")
    assert check.ok is False and "get.pulumi.com" in check.fix


def test_tool_checks_report_a_missing_aws_cli(
    aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    keep = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "aws").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(keep))
    check = _check(run_doctor(None, region=aws), "AWS CLI")
    assert check.ok is False and "aws eks get-token" in (check.fix or "")
