"""The leftover sweep and the final check, against a local moto server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from lifecycle_scenario import CLUSTER, build, existing

from llmctl.errors import CloudError
from llmctl.infra.aws.sweep import KINDS, Sweeper, leftovers, sweep
from llmctl.infra.lifecycle.reports import DownResult, check_leftovers


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
    with pytest.raises(CloudError) as info:
        leftovers(CLUSTER, "us-west-2")
    assert info.value.hint and "credentials" in info.value.hint


# What must be gone before AWS accepts (or before it makes sense to send) a delete: for each delete
# call, the calls that must all have succeeded before the first of it. Written here as data, not
# read from the sweep's table, and checked against the calls the moto server answered.
MUST_FOLLOW: dict[str, tuple[str, ...]] = {
    "DeleteTargetGroup": ("DeleteLoadBalancer",),  # a listener of the LB forwards to it
    "DeleteLaunchTemplate": ("TerminateInstances",),
    "DeleteInstanceProfile": ("TerminateInstances",),
    "DeleteNetworkInterface": ("TerminateInstances", "DeleteLoadBalancer"),  # they hold ENIs
    "DeleteVolume": ("TerminateInstances",),  # they hold volumes
    "DeleteSecurityGroup": ("TerminateInstances", "DeleteLoadBalancer", "DeleteNetworkInterface"),
}
CHANGES = ("Delete", "Terminate", "Revoke", "Remove")


def record_changes(session: Any) -> list[tuple[str, dict[str, Any]]]:
    """(operation, the caller's parameters) of every changing call the server answered with success,
    in order, recorded through botocore's event hooks on the session's clients."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["recorded_params"] = dict(params)

    def answered(http_response: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
        if model.name.startswith(CHANGES) and http_response.status_code < 300:
            calls.append((model.name, context.get("recorded_params", {})))

    session.events.register("before-parameter-build", remember)
    session.events.register("after-call", answered)
    return calls


def first(calls: list[tuple[str, dict[str, Any]]], op: str, key: str, value: str) -> int:
    """Index of the first recorded `op` call whose parameter `key` is (or, a list, holds) `value`."""
    for index, (name, params) in enumerate(calls):
        got = params.get(key)
        if name == op and (got == value or (isinstance(got, list) and value in got)):
            return index
    raise AssertionError(f"no {op} with {key}={value} in {[name for name, _ in calls]}")


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

    session = boto3.session.Session(region_name=aws)
    calls = record_changes(session)
    # what the server says about the node at the moment the ENI it held is deleted
    node_state: list[str] = []

    def look_at_node(params: dict[str, Any], **_: Any) -> None:
        if params.get("NetworkInterfaceId") == attached:
            reply = ec2.describe_instances(InstanceIds=[node])
            node_state.append(reply["Reservations"][0]["Instances"][0]["State"]["Name"])

    session.events.register("before-parameter-build.ec2.DeleteNetworkInterface", look_at_node)
    report = sweep(CLUSTER, aws, session=session, timeout_s=20)

    assert not report.failed, report.failed
    assert attached in {i.id for i in report.deleted} and attached in {i.id for i in report.found}
    ops = [op for op, _ in calls]
    for later, earlier in MUST_FOLLOW.items():
        assert later in ops, f"moto saw no {later}"
        for op in earlier:
            assert op in ops and max(i for i, o in enumerate(ops) if o == op) < ops.index(later), (
                f"{later} before the last {op}: {ops}"
            )
    # per object: the node is terminated before its ENI is deleted, the foreign rule naming our LB
    # group is revoked before the group is deleted, a profile's role is removed before the profile
    pairs = [
        (
            ("TerminateInstances", "InstanceIds", node),
            ("DeleteNetworkInterface", "NetworkInterfaceId", attached),
        ),
        (
            ("RevokeSecurityGroupIngress", "GroupId", node_sg),
            ("DeleteSecurityGroup", "GroupId", ours_sg["GroupId"]),
        ),
    ]
    pairs += [
        (
            ("RemoveRoleFromInstanceProfile", "InstanceProfileName", name),
            ("DeleteInstanceProfile", "InstanceProfileName", name),
        )
        for name in sc.ours["instance-profile"]
    ]
    for before, after in pairs:
        assert first(calls, *before) < first(calls, *after), (before, after)
    assert node_state == ["terminated"]
    now = existing(aws)
    assert ours_sg["GroupId"] not in now["security-group"] and node_sg in now["security-group"]
    rules = ec2.describe_security_groups(GroupIds=[node_sg])["SecurityGroups"][0]["IpPermissions"]
    assert [(r["FromPort"], r["IpRanges"]) for r in rules] == [(22, [{"CidrIp": "10.0.0.0/8"}])]
    for kind, ids in sc.others.items():
        assert ids <= now[kind], f"an untagged or foreign {kind} was deleted"


@pytest.mark.parametrize("kind", ["instance-profile", "log-group", "volume", "interruption-queue"])
def test_new_kinds_are_reported_then_swept_and_look_alikes_survive(aws: str, kind: str) -> None:
    """Karpenter's instance profiles, the EKS and Container Insights log groups and the volumes the
    EBS CSI driver tags: the leftover check names them, the sweep deletes them, look-alikes (a
    shared name prefix, another cluster, the same cluster name in another region, another
    cluster's CSI volume) stay."""
    sc = build(aws)
    reported = {item.id for item in leftovers(CLUSTER, aws) if item.kind == kind}
    assert reported == sc.ours[kind]
    with pytest.raises(CloudError) as info:
        check_leftovers(DownResult(stack="dev", leftovers=leftovers(CLUSTER, aws)))
    assert f"{len(reported)} {kind}" in info.value.message

    report = sweep(CLUSTER, aws, timeout_s=30)

    assert not report.failed, report.failed
    assert {item.id for item in report.deleted if item.kind == kind} == sc.ours[kind]
    now = existing(aws)[kind]
    assert not sc.ours[kind] & now and sc.others[kind] <= now
    assert [item for item in leftovers(CLUSTER, aws) if item.kind == kind] == []


def test_reasons_name_the_driver_and_karpenter_tags(aws: str) -> None:
    build(aws)
    reasons = {item.id: item.reason for item in leftovers(CLUSTER, aws)}
    assert reasons[f"{CLUSTER}_1001"] == f"kubernetes.io/cluster/{CLUSTER}=owned"
    assert reasons[f"/aws/eks/{CLUSTER}/cluster"] == (
        f"log group name /aws/eks/{CLUSTER}/cluster (EKS control-plane logs)"
    )
    csi = [r for r in reasons.values() if r.startswith("ebs.csi.aws.com/cluster=true")]
    assert sorted(csi) == sorted(
        [
            f"ebs.csi.aws.com/cluster=true, KubernetesCluster={CLUSTER}",
            f"ebs.csi.aws.com/cluster=true, kubernetes.io/cluster/{CLUSTER}=owned",
        ]
    )


def test_an_attached_csi_volume_is_reported_but_not_deleted(aws: str) -> None:
    """Only detached volumes are swept; one still attached (here to a node the sweep leaves alone)
    is what the leftover check reports."""
    sc = build(aws)
    ec2 = boto3.client("ec2", region_name=aws)
    core = ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": ["eks:nodegroup-name"]}])
    node = core["Reservations"][0]["Instances"][0]
    tags = {"ebs.csi.aws.com/cluster": "true", f"kubernetes.io/cluster/{CLUSTER}": "owned"}
    vol = ec2.create_volume(
        AvailabilityZone=node["Placement"]["AvailabilityZone"],
        Size=8,
        TagSpecifications=[
            {"ResourceType": "volume", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )["VolumeId"]
    ec2.attach_volume(VolumeId=vol, InstanceId=node["InstanceId"], Device="/dev/sdf")

    report = sweep(CLUSTER, aws, timeout_s=30)

    assert vol not in {item.id for item in report.found}
    assert vol in existing(aws)["volume"]
    assert {item.id for item in leftovers(CLUSTER, aws)} == {vol}
    assert sc.others["instance"] <= existing(aws)["instance"]


@pytest.fixture
def sg_held_by_eni(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS refuses to delete a security group an ENI still uses (DependencyViolation); moto does not
    model it, so the running moto backend gets that rule (its data, not our code)."""
    from moto.ec2.exceptions import DependencyViolationError
    from moto.ec2.models.security_groups import SecurityGroupBackend

    delete = SecurityGroupBackend.delete_security_group

    def delete_unless_used(self: Any, name: str | None = None, group_id: str | None = None) -> None:
        for eni in self.enis.values():
            if group_id in [group.id for group in eni._group_set]:
                raise DependencyViolationError(f"resource {group_id} has a dependent object")
        delete(self, name=name, group_id=group_id)

    monkeypatch.setattr(SecurityGroupBackend, "delete_security_group", delete_unless_used)


def _lb_group_held_by_an_eni(region: str) -> tuple[Any, str, str]:
    """Our LB's security group, still used by the untagged ENI of a load balancer AWS is deleting."""
    ec2 = boto3.client("ec2", region_name=region)
    vpc = ec2.create_vpc(CidrBlock="10.2.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.2.0.0/24")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(
        GroupName="k8s-lb",
        Description="lb",
        VpcId=vpc,
        TagSpecifications=[
            {"ResourceType": "security-group", "Tags": [{"Key": "elbv2.k8s.aws/cluster", "Value": CLUSTER}]}
        ],
    )["GroupId"]
    eni = ec2.create_network_interface(SubnetId=subnet, Groups=[sg])["NetworkInterface"]["NetworkInterfaceId"]
    return ec2, sg, eni


class FakeTime:
    """An injected clock and sleep: sleeping advances the clock and runs `on_sleep`."""

    def __init__(self, on_sleep: Callable[[int], object] = lambda n: None) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        self.on_sleep = on_sleep

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.on_sleep(len(self.slept))

    def clock(self) -> float:
        return self.now


def test_delete_retries_a_dependency_violation_with_backoff(aws: str, sg_held_by_eni: None) -> None:
    ec2, sg, eni = _lb_group_held_by_an_eni(aws)
    # AWS lets go of the ENI while the sweep sleeps the second time
    fake = FakeTime(lambda n: n == 2 and ec2.delete_network_interface(NetworkInterfaceId=eni))
    sweeper = Sweeper(CLUSTER, aws, sleep=fake.sleep, clock=fake.clock)
    found = sweeper.find()
    assert [(i.kind, i.id) for i in found] == [("security-group", sg)]

    deleted, failed = sweeper.delete(found, timeout_s=60)

    assert failed == [] and [i.id for i in deleted] == [sg]
    assert fake.slept == [2.0, 4.0]
    assert sg not in existing(aws)["security-group"]


def test_delete_backs_off_to_30s_and_gives_up_at_the_deadline(aws: str, sg_held_by_eni: None) -> None:
    _ec2, sg, _eni = _lb_group_held_by_an_eni(aws)
    fake = FakeTime()
    sweeper = Sweeper(CLUSTER, aws, sleep=fake.sleep, clock=fake.clock)

    deleted, failed = sweeper.delete(sweeper.find(), timeout_s=200)

    assert deleted == [] and [(i.id, error.split(":")[0]) for i, error in failed] == [
        (sg, "DependencyViolation")
    ]
    assert fake.slept == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0, 30.0]  # the next would pass 200 s
    assert sg in existing(aws)["security-group"]


def test_every_kind_waits_only_for_kinds_deleted_before_it() -> None:
    """The table's order is the deletion order: what a kind comes after is earlier in it."""
    from llmctl.infra.aws.sweep_kinds import BY_NAME, TABLE

    for index, kind in enumerate(TABLE):
        assert all(KINDS.index(dep) < index for dep in kind.after), kind.name
    assert set(KINDS) == set(BY_NAME) and len(KINDS) == len(TABLE)
    for name in ("instance-profile", "log-group", "volume", "interruption-queue"):
        assert name in KINDS
