"""`llmctl doctor` against a local moto server.

moto models EC2 offerings and STS, but Service Quotas only for the `vpc` service; the `ec2_quotas`
fixture (conftest.py) seeds the EC2 vCPU quotas into the running moto backend (its data, not our code).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmctl.infra.targets.doctor import run_doctor

INF_QUOTA = "L-1945791B"


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
    # not run, but listed as skipped (issue 26, item 7): never dropped silently
    vcpu = [c for c in report.checks if c.name.startswith("vCPU")]
    assert len(vcpu) == 1 and vcpu[0].skipped and vcpu[0].ok is None
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


# --- capacity reservations: moto has no DescribeCapacityReservations, so EC2's replies come from
# botocore's Stubber, which checks each request and reply against EC2's own API model -------------------

RESERVED = "cr-0123456789abcdef0"


class _ReservationSession:
    """A boto3 session on moto whose EC2 client answers DescribeCapacityReservations from a Stubber."""

    def __init__(self, region: str) -> None:
        import boto3
        from botocore.stub import Stubber

        self.session = boto3.session.Session(region_name=region)
        self.stubbed = self.session.client("ec2", region_name=region)
        self.stubber = Stubber(self.stubbed)
        self.stubber.activate()
        self.moto_ec2 = self.session.client("ec2", region_name=region)

    def client(self, name: str, region_name: str | None = None) -> Any:
        if name != "ec2":
            return self.session.client(name, region_name=region_name)
        session = self

        class _EC2:  # every other EC2 call goes to moto
            def __getattr__(self, attr: str) -> Any:
                owner = session.stubbed if attr == "describe_capacity_reservations" else session.moto_ec2
                return getattr(owner, attr)

        return _EC2()

    def reply(self, expected: dict[str, Any], *reservations: dict[str, Any]) -> None:
        self.stubber.add_response(
            "describe_capacity_reservations", {"CapacityReservations": list(reservations)}, expected
        )


def _reservation(**changes: Any) -> dict[str, Any]:
    import datetime

    item = {
        "CapacityReservationId": RESERVED,
        "InstanceType": "p4de.24xlarge",
        "AvailabilityZone": "us-west-2b",
        "AvailabilityZoneId": "usw2-az1",
        "State": "active",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": 4,
        "ReservationType": "capacity-block",
        "EndDate": datetime.datetime(2026, 12, 1, 11, 30, tzinfo=datetime.timezone.utc),
    }
    item.update(changes)
    return item


def _reserved_blueprint(tmp_path: Path, fallback: str = "none", tags: dict[str, str] | None = None) -> str:
    import yaml

    from llmctl.blueprints.catalog import load_blueprint

    data = load_blueprint("llama2-70b-vllm-gpu").model_dump(mode="json")
    data["capacity"] = {"reservations": [tags or RESERVED], "fallback": fallback}
    path = tmp_path / "reserved.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_doctor_reports_each_reservation_and_whether_it_holds_the_blueprint(aws: str, tmp_path: Path) -> None:
    session = _ReservationSession("us-west-2")
    session.reply({"CapacityReservationIds": [RESERVED]}, _reservation())
    report = run_doctor(_reserved_blueprint(tmp_path), region="us-west-2", session=session)
    check = _check(report, "capacity reservation cr-")
    assert check.ok is True
    assert check.detail == (
        "cr-0123456789abcdef0 active in us-west-2b (usw2-az1), p4de.24xlarge, 4 of 4 free "
        "(capacity block, ends 2026-12-01T11:30:00+00:00)"
    )
    held = _check(report, "capacity reservations hold")
    # four replicas of tp 4 on 8-GPU p4de.24xlarge nodes: two nodes at start
    assert (
        held.ok is True
        and "4 free p4de.24xlarge in 1 usable reservation(s); the blueprint starts 2 node(s)" in held.detail
    )
    session.stubber.assert_no_pending_responses()


def test_up_preflight_refuses_a_reservation_that_cannot_hold_the_blueprint(aws: str, tmp_path: Path) -> None:
    from llmctl.errors import PrerequisiteError
    from llmctl.infra.aws.preflight import preflight_capacity

    path = _reserved_blueprint(tmp_path)
    session = _ReservationSession("us-west-2")
    session.reply({"CapacityReservationIds": [RESERVED]}, _reservation(AvailableInstanceCount=1))
    with pytest.raises(PrerequisiteError) as refused:
        preflight_capacity(path, stack="dev", region="us-west-2", session=session)
    assert "1 free p4de.24xlarge" in refused.value.message and "starts 2 node(s)" in refused.value.message
    assert refused.value.hint and "reserve 1 more p4de.24xlarge" in refused.value.hint
    # the wrong instance type, a reservation not yet active, and one outside the platform's AZs
    for changes, words in (
        ({"InstanceType": "p5.48xlarge"}, "reserves p5.48xlarge, not p4de.24xlarge"),
        ({"State": "scheduled"}, "is scheduled, not active"),
        ({"AvailabilityZoneId": "usw2-az3"}, "outside the platform's AZs"),
    ):
        session.reply({"CapacityReservationIds": [RESERVED]}, _reservation(**changes))
        with pytest.raises(PrerequisiteError) as refused:
            preflight_capacity(path, stack="dev", region="us-west-2", session=session)
        assert words in refused.value.message


def test_on_demand_fallback_makes_a_shortfall_a_warning_and_tags_select(aws: str, tmp_path: Path) -> None:
    from llmctl.infra.aws.preflight import preflight_capacity

    path = _reserved_blueprint(tmp_path, "on-demand", {"purpose": "*", "team": "llm"})
    session = _ReservationSession("us-west-2")
    session.reply(
        {"Filters": [{"Name": "tag-key", "Values": ["purpose"]}, {"Name": "tag:team", "Values": ["llm"]}]},
        _reservation(AvailableInstanceCount=2),
    )
    warnings = preflight_capacity(path, stack="dev", region="us-west-2", session=session)
    assert not any("capacity reservations hold" in w for w in warnings)  # 2 free hold the 2 starting nodes
    session.reply(
        {"Filters": [{"Name": "tag-key", "Values": ["purpose"]}, {"Name": "tag:team", "Values": ["llm"]}]},
        _reservation(AvailableInstanceCount=1),
    )
    warnings = preflight_capacity(path, stack="dev", region="us-west-2", session=session)
    assert any("1 free p4de.24xlarge" in w and "the rest launch on-demand" in w for w in warnings), warnings
    # nothing matches: a definite failure, whatever the fallback
    session.reply(
        {"Filters": [{"Name": "tag-key", "Values": ["purpose"]}, {"Name": "tag:team", "Values": ["llm"]}]}
    )
    from llmctl.errors import PrerequisiteError

    with pytest.raises(PrerequisiteError, match="no capacity reservation matches it"):
        preflight_capacity(path, stack="dev", region="us-west-2", session=session)


def test_a_multi_node_blueprint_is_warned_of_a_reservation_outside_a_placement_group(
    aws: str, tmp_path: Path
) -> None:
    """The 405B's pool launches into a cluster placement group: a reservation made outside any group
    is a warning (EC2 User Guide, placement group rules: reserve in the group itself); one made in
    the platform's group (PlacementGroupArn) is not, and its detail names the group."""
    import yaml

    from llmctl.blueprints.catalog import load_blueprint

    data = load_blueprint("llama31-405b-vllm-gpu").model_dump(mode="json")
    data["capacity"] = {"reservations": [RESERVED], "fallback": "on-demand"}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(data))
    session = _ReservationSession("us-west-2")
    session.reply({"CapacityReservationIds": [RESERVED]}, _reservation(InstanceType="p5.48xlarge"))
    report = run_doctor(str(path), region="us-west-2", session=session)
    check = _check(report, "capacity reservations in the cluster placement group")
    assert check.ok is None
    assert check.detail.startswith(
        f"{RESERVED} not made in a placement group: EC2 uses a matching reservation"
    )
    assert "<cluster>-gpu-nvidia-efa" in (check.fix or "")
    group = "arn:aws:ec2:us-west-2:123456789012:placement-group/llmctl-dev-gpu-nvidia-efa"
    session.reply(
        {"CapacityReservationIds": [RESERVED]},
        _reservation(InstanceType="p5.48xlarge", PlacementGroupArn=group),
    )
    report = run_doctor(str(path), region="us-west-2", session=session)
    assert not [c for c in report.checks if c.name.startswith("capacity reservations in the cluster")]
    assert _check(report, "capacity reservation cr-").detail.endswith(
        ", in placement group llmctl-dev-gpu-nvidia-efa)"
    )
    # a single-node blueprint is not asked: its GPU pool has no placement group
    session.reply({"CapacityReservationIds": [RESERVED]}, _reservation())
    report = run_doctor(_reserved_blueprint(tmp_path), region="us-west-2", session=session)
    assert not [c for c in report.checks if c.name.startswith("capacity reservations in the cluster")]
    session.stubber.assert_no_pending_responses()


def test_up_preflight_refuses_a_low_vcpu_quota_with_the_increase_command(
    aws: str, ec2_quotas: Callable[..., None]
) -> None:
    from llmctl.errors import PrerequisiteError
    from llmctl.infra.aws.preflight import preflight_capacity

    ec2_quotas({INF_QUOTA: 96})
    with pytest.raises(PrerequisiteError) as refused:
        preflight_capacity("llama2-inf2", stack="dev", region=aws)
    assert "96 vCPUs" in refused.value.message and "needed 192" in refused.value.message
    assert refused.value.hint and f"--quota-code {INF_QUOTA} --desired-value 192" in refused.value.hint
    ec2_quotas({INF_QUOTA: 384})
    assert preflight_capacity("llama2-inf2", stack="dev", region=aws) == []


def test_eks_up_checks_the_quota_before_building_anything(aws: str, ec2_quotas: Callable[..., None]) -> None:
    from llmctl.errors import PrerequisiteError
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.targets.base import UpRequest
    from llmctl.infra.targets.eks import EksTarget

    ec2_quotas({INF_QUOTA: 96})
    with pytest.raises(PrerequisiteError, match="vCPU quota"):
        EksTarget().check_account(UpRequest(blueprint="llama2-inf2", region=aws), Progress("quiet"))


# ---- the next upgrade (issue 51): would a surge of the deployed blueprint fit today? ----------------
def test_doctor_says_whether_the_next_upgrade_of_a_deployed_blueprint_fits(
    engine: Any, aws: str, ec2_quotas: Callable[..., None]
) -> None:
    from lifecycle_support import lifecycle
    from test_day_two import running_node

    assert not [c for c in run_doctor("llama2-inf2", region=aws).checks if c.name == "upgrade capacity"]
    lifecycle().up("llama2-inf2", region=aws, wait=False)
    running_node(aws)  # the deployed cluster's inf2.48xlarge
    ec2_quotas({INF_QUOTA: 192})  # room for the running node only
    report = run_doctor("llama2-inf2", region=aws)
    check = _check(report, "upgrade capacity")
    assert check.ok is False and report.ok is False
    assert check.detail.startswith("a code change starts 1 x inf2.48xlarge beside the running ones ($12.98/h")
    assert "running 192 (1 instance(s)) + 1 x inf2.48xlarge (192) = 384 needed" in check.detail
    assert f"--quota-code {INF_QUOTA} --desired-value 384" in check.fix and "llmctl up --replace" in check.fix

    ec2_quotas({INF_QUOTA: 384})
    check = _check(run_doctor("llama2-inf2", region=aws), "upgrade capacity")
    assert check.ok is True and ": it fits: " in check.detail and "= 384 needed" in check.detail


def test_doctor_on_a_replace_blueprint_names_the_downtime_not_extra_nodes(
    engine: Any, aws: str, tmp_path: Path
) -> None:
    import yaml
    from lifecycle_support import lifecycle

    from llmctl.blueprints.catalog import load_blueprint

    path = tmp_path / "llama2-inf2.yaml"
    data = yaml.safe_load(load_blueprint("llama2-inf2").model_dump_json())
    data["upgrade"] = {"strategy": "replace"}
    path.write_text(yaml.safe_dump(data))
    lifecycle().up(str(path), region=aws, wait=False)
    check = _check(run_doctor(str(path), region=aws), "upgrade capacity")
    assert check.ok is True
    assert check.detail.startswith("upgrade.strategy replace: a change deletes the running RayCluster first")
    assert "downtime unknown (no start recorded)" in check.detail
