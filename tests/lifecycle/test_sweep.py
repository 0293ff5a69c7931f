"""The leftover sweep and the final check, against a local moto server."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from lifecycle_scenario import CLUSTER, build, existing

from llmctl.infra.aws.sweep import KINDS, leftovers, sweep


def test_sweep_deletes_only_what_is_tagged_for_the_cluster(aws: str) -> None:
    sc = build(aws)
    before = leftovers(CLUSTER, aws)
    assert {item.kind for item in before} == set(KINDS)

    report = sweep(CLUSTER, aws, timeout_s=30)

    assert not report.failed, report.failed
    found = {(item.kind, item.id) for item in report.found}
    expected = {(kind, id_) for kind, ids in sc.ours.items() for id_ in ids}
    assert found == expected
    assert {(item.kind, item.id) for item in report.deleted} == expected
    now = existing(aws)
    for kind, ids in sc.ours.items():
        assert not ids & now[kind], f"{kind} still there"
    for kind, ids in sc.others.items():
        assert ids <= now[kind], f"an untagged or foreign {kind} was deleted: {ids - now[kind]}"
    assert leftovers(CLUSTER, aws) == []


def test_dry_run_deletes_nothing(aws: str) -> None:
    sc = build(aws)
    snapshot = existing(aws)
    report = sweep(CLUSTER, aws, dry_run=True)
    assert report.dry_run and report.deleted == [] and report.failed == []
    assert {(i.kind, i.id) for i in report.found} == {(k, i) for k, ids in sc.ours.items() for i in ids}
    assert existing(aws) == snapshot


def test_sweep_twice_is_safe_and_the_second_finds_nothing(aws: str) -> None:
    build(aws)
    sweep(CLUSTER, aws, timeout_s=30)
    again = sweep(CLUSTER, aws, timeout_s=30)
    assert again.found == [] and again.deleted == [] and again.failed == []


def test_report_json_has_stable_keys(aws: str) -> None:
    build(aws)
    data = sweep(CLUSTER, aws, dry_run=True).to_dict()
    assert list(data) == ["cluster", "region", "dry_run", "found", "deleted", "failed"]
    assert set(data["found"][0]) == {"kind", "id", "name", "region", "reason", "arn"}


def test_no_credentials_is_a_cloud_error_with_a_hint(no_aws: None) -> None:
    from llmctl.errors import CloudError

    with pytest.raises(CloudError) as info:
        leftovers(CLUSTER, "us-west-2")
    assert info.value.hint and "credentials" in info.value.hint


@pytest.fixture
def aws_semantics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two AWS behaviours moto does not model, added to the running moto backend (its data, not our
    code): a terminated instance releases the ENIs it does not delete (they turn `available`), and
    a security group that another group's rule references cannot be deleted (DependencyViolation)."""
    from moto.ec2.exceptions import DependencyViolationError
    from moto.ec2.models.instances import Instance
    from moto.ec2.models.security_groups import SecurityGroupBackend

    terminate = Instance.terminate

    def terminate_and_release(self: Any) -> Any:
        kept = [nic for i, nic in self.nics.items() if i and not nic.delete_on_termination]
        state = terminate(self)
        for nic in kept:
            self.detach_eni(nic)
        return state

    delete = SecurityGroupBackend.delete_security_group

    def delete_unless_referenced(self: Any, name: str | None = None, group_id: str | None = None) -> None:
        for groups in self.groups.values():
            for group in groups.values():
                for rule in [*group.ingress_rules, *group.egress_rules]:
                    if group.id != group_id and rule.source_group.get("GroupId") == group_id:
                        raise DependencyViolationError(f"resource {group_id} has a dependent object")
        delete(self, name=name, group_id=group_id)

    monkeypatch.setattr(Instance, "terminate", terminate_and_release)
    monkeypatch.setattr(SecurityGroupBackend, "delete_security_group", delete_unless_referenced)


def test_sweep_unblocks_the_vpc_in_dependency_order(aws: str, aws_semantics: None) -> None:
    """A foreign node group's rule names our LB group, and a tagged ENI is still attached to a
    Karpenter node: the sweep revokes only that rule, deletes the ENI once the node is gone, and
    deletes kinds in the order AWS accepts."""
    sc = build(aws)
    ec2 = boto3.client("ec2", region_name=aws)
    ours_sg = ec2.describe_security_groups(GroupNames=["sg-alb-ours"])["SecurityGroups"][0]
    node_sg = ec2.create_security_group(GroupName="nodes", Description="n", VpcId=ours_sg["VpcId"])["GroupId"]
    ec2.authorize_security_group_ingress(
        GroupId=node_sg,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 80,
                "ToPort": 80,
                "UserIdGroupPairs": [{"GroupId": ours_sg["GroupId"]}],
            },
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "10.0.0.0/8"}]},
        ],
    )
    node = next(iter(sorted(sc.ours["instance"])))
    subnet = ec2.describe_instances(InstanceIds=[node])["Reservations"][0]["Instances"][0]["SubnetId"]
    attached = ec2.create_network_interface(
        SubnetId=subnet,
        TagSpecifications=[
            {
                "ResourceType": "network-interface",
                "Tags": [{"Key": "cluster.k8s.amazonaws.com/name", "Value": CLUSTER}],
            }
        ],
    )["NetworkInterface"]["NetworkInterfaceId"]
    ec2.attach_network_interface(NetworkInterfaceId=attached, InstanceId=node, DeviceIndex=1)

    order: list[str] = []
    report = sweep(CLUSTER, aws, timeout_s=20, on_deleted=lambda item: order.append(item.kind))

    assert not report.failed, report.failed
    assert attached in {i.id for i in report.deleted} and attached in {i.id for i in report.found}
    assert [KINDS.index(kind) for kind in order] == sorted(KINDS.index(kind) for kind in order)
    now = existing(aws)
    assert ours_sg["GroupId"] not in now["security-group"] and node_sg in now["security-group"]
    rules = ec2.describe_security_groups(GroupIds=[node_sg])["SecurityGroups"][0]["IpPermissions"]
    assert [(r["FromPort"], r["IpRanges"]) for r in rules] == [(22, [{"CidrIp": "10.0.0.0/8"}])]
    for kind, ids in sc.others.items():
        assert ids <= now[kind], f"an untagged or foreign {kind} was deleted"
