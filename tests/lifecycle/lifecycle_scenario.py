"""A moto scenario: one cluster's leftovers, untagged look-alikes and another cluster's objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3

CLUSTER = "llmctl-dev"
OTHER = "llmctl-prod"


def _tagspec(kind: str, tags: dict[str, str]) -> list[dict[str, Any]]:
    return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []


@dataclass
class Scenario:
    """IDs of what was made, by whose it is."""

    ours: dict[str, set[str]] = field(default_factory=dict)
    others: dict[str, set[str]] = field(default_factory=dict)

    def add(self, mine: bool, kind: str, id_: str) -> None:
        (self.ours if mine else self.others).setdefault(kind, set()).add(id_)


def build(region: str) -> Scenario:
    ec2 = boto3.client("ec2", region_name=region)
    elbv2 = boto3.client("elbv2", region_name=region)
    sc = Scenario()
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.1.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
        for i, zone in enumerate(zones)
    ]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]

    variants = {
        "alb-ours": (True, {"elbv2.k8s.aws/cluster": CLUSTER, "ingress.k8s.aws/stack": "ns/ui"}),
        "nlb-ours": (True, {f"kubernetes.io/cluster/{CLUSTER}": "owned", "service.k8s.aws/stack": "ns/svc"}),
        "plain": (False, {}),
        "other": (False, {"elbv2.k8s.aws/cluster": OTHER}),
        "lookalike": (False, {"elbv2.k8s.aws/cluster": f"{CLUSTER}-old", "Name": CLUSTER}),
    }
    for name, (mine, tags) in variants.items():
        sg = ec2.create_security_group(
            GroupName=f"sg-{name}",
            Description="lb",
            VpcId=vpc,
            TagSpecifications=_tagspec("security-group", tags),
        )["GroupId"]
        sc.add(mine, "security-group", sg)
        lb_type = "network" if name.startswith("nlb") else "application"
        lb_args: dict[str, Any] = {"Name": f"k8s-{name}", "Subnets": subnets, "Type": lb_type}
        if lb_type == "application":
            lb_args["SecurityGroups"] = [sg]
        if tags:
            lb_args["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
        lb = elbv2.create_load_balancer(**lb_args)["LoadBalancers"][0]["LoadBalancerArn"]
        sc.add(mine, "load-balancer", lb)
        tg_args: dict[str, Any] = {
            "Name": f"tg-{name}",
            "Protocol": "TCP" if lb_type == "network" else "HTTP",
            "Port": 80,
            "VpcId": vpc,
        }
        if tags:
            tg_args["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
        tg = elbv2.create_target_group(**tg_args)["TargetGroups"][0]["TargetGroupArn"]
        sc.add(mine, "target-group", tg)
        elbv2.create_listener(
            LoadBalancerArn=lb,
            Protocol="TCP" if lb_type == "network" else "HTTP",
            Port=80,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": tg}],
        )

    nodes = {
        "ours-a": (
            True,
            {"karpenter.sh/nodepool": "inferentia-inf2", f"kubernetes.io/cluster/{CLUSTER}": "owned"},
        ),
        "ours-b": (True, {"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/cluster": CLUSTER}),
        "core-node": (False, {f"kubernetes.io/cluster/{CLUSTER}": "owned", "eks:nodegroup-name": "core"}),
        "other": (False, {"karpenter.sh/nodepool": "default", f"kubernetes.io/cluster/{OTHER}": "owned"}),
        "plain": (False, {"Name": "karpenter"}),
    }
    for _name, (mine, tags) in nodes.items():
        inst = ec2.run_instances(
            ImageId=image,
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            SubnetId=subnets[0],
            TagSpecifications=_tagspec("instance", tags),
        )["Instances"][0]["InstanceId"]
        sc.add(mine, "instance", inst)

    templates = {"karpenter.k8s.aws/cluster": (True, CLUSTER), "karpenter.k8s.aws/cluster2": (False, CLUSTER)}
    for i, (key, (mine, value)) in enumerate(templates.items()):
        lt = ec2.create_launch_template(
            LaunchTemplateName=f"karpenter.k8s.aws/{i}",
            LaunchTemplateData={"ImageId": image},
            TagSpecifications=_tagspec("launch-template", {key: value}),
        )["LaunchTemplate"]["LaunchTemplateId"]
        sc.add(mine, "launch-template", lt)
    lt_other = ec2.create_launch_template(
        LaunchTemplateName="karpenter.k8s.aws/other",
        LaunchTemplateData={"ImageId": image},
        TagSpecifications=_tagspec("launch-template", {"karpenter.k8s.aws/cluster": OTHER}),
    )["LaunchTemplate"]["LaunchTemplateId"]
    sc.add(False, "launch-template", lt_other)

    enis = {
        "ours-cni": (True, {"cluster.k8s.amazonaws.com/name": CLUSTER}),
        "ours-owned": (True, {f"kubernetes.io/cluster/{CLUSTER}": "owned"}),
        "other": (False, {"cluster.k8s.amazonaws.com/name": OTHER}),
        "plain": (False, {}),
    }
    for name, (mine, tags) in enis.items():
        eni = ec2.create_network_interface(
            SubnetId=subnets[1],
            Description=f"eni-{name}",
            TagSpecifications=_tagspec("network-interface", tags),
        )["NetworkInterface"]["NetworkInterfaceId"]
        sc.add(mine, "network-interface", eni)

    volumes = {
        "ours-pvc": (True, {"KubernetesCluster": CLUSTER, "ebs.csi.aws.com/cluster": "true"}),
        "ours-owned": (True, {f"kubernetes.io/cluster/{CLUSTER}": "owned"}),
        "csi-unnamed": (False, {"ebs.csi.aws.com/cluster": "true"}),
        "other": (False, {"KubernetesCluster": OTHER}),
    }
    for _name, (mine, tags) in volumes.items():
        vol = ec2.create_volume(
            AvailabilityZone=zones[0], Size=8, TagSpecifications=_tagspec("volume", tags)
        )["VolumeId"]
        sc.add(mine, "volume", vol)
    return sc


def existing(region: str) -> dict[str, set[str]]:
    """Every object of the kinds the sweep handles that still exists (terminated instances excluded)."""
    ec2 = boto3.client("ec2", region_name=region)
    elbv2 = boto3.client("elbv2", region_name=region)
    live = [
        i["InstanceId"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
        if i["State"]["Name"] != "terminated"
    ]
    return {
        "instance": set(live),
        "load-balancer": {lb["LoadBalancerArn"] for lb in elbv2.describe_load_balancers()["LoadBalancers"]},
        "target-group": {tg["TargetGroupArn"] for tg in elbv2.describe_target_groups()["TargetGroups"]},
        "launch-template": {
            lt["LaunchTemplateId"] for lt in ec2.describe_launch_templates()["LaunchTemplates"]
        },
        "network-interface": {
            e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]
        },
        "volume": {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]},
        "security-group": {sg["GroupId"] for sg in ec2.describe_security_groups()["SecurityGroups"]},
    }
