"""A moto scenario: one cluster's leftovers, untagged look-alikes and another cluster's objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3
from moto_amis import MOTO_AMI_NAME

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


def an_image(ec2: Any) -> str:
    """The id of one AMI that `run_instances` accepts in moto."""
    [image] = ec2.describe_images(Filters=[{"Name": "name", "Values": [MOTO_AMI_NAME]}])["Images"]
    return str(image["ImageId"])


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
    image = an_image(ec2)

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
        # as the EBS CSI driver tags them (ebs.csi.aws.com/cluster=true plus its cluster id)
        "ours-csi": (True, {"ebs.csi.aws.com/cluster": "true", f"kubernetes.io/cluster/{CLUSTER}": "owned"}),
        "other-csi": (False, {"ebs.csi.aws.com/cluster": "true", f"kubernetes.io/cluster/{OTHER}": "owned"}),
        # another cluster's volume that also carries our name in a key the driver never writes
        "other-csi-named": (
            False,
            {
                "ebs.csi.aws.com/cluster": "true",
                "ebs.csi.aws.com/cluster-name": CLUSTER,
                f"kubernetes.io/cluster/{OTHER}": "owned",
            },
        ),
    }
    for _name, (mine, tags) in volumes.items():
        vol = ec2.create_volume(
            AvailabilityZone=zones[0], Size=8, TagSpecifications=_tagspec("volume", tags)
        )["VolumeId"]
        sc.add(mine, "volume", vol)
    add_instance_profiles(region, sc)
    add_log_groups(region, sc)
    add_interruption_queues(region, sc)
    add_repositories(region, sc)
    return sc


def karpenter_profile_tags(cluster: str, region: str, nodeclass: str) -> dict[str, str]:
    """The tags Karpenter v1 puts on the instance profile it makes for an EC2NodeClass."""
    return {
        f"kubernetes.io/cluster/{cluster}": "owned",
        "eks:eks-cluster-name": cluster,
        "karpenter.k8s.aws/ec2nodeclass": nodeclass,
        "topology.kubernetes.io/region": region,
    }


def add_instance_profiles(region: str, sc: Scenario) -> None:
    """Karpenter profiles (`<cluster>_<hash>`, with a role) of this cluster and look-alikes."""
    iam = boto3.client("iam", region_name=region)
    role = iam.create_role(RoleName="KarpenterNodeRole", AssumeRolePolicyDocument="{}")["Role"]["RoleName"]
    profiles = {
        f"{CLUSTER}_1001": (
            True,
            f"/karpenter/{region}/{CLUSTER}/uid-1/",
            karpenter_profile_tags(CLUSTER, region, "default"),
        ),
        f"{CLUSTER}_1002": (True, "/", karpenter_profile_tags(CLUSTER, region, "inferentia")),
        # the same cluster name in another region (IAM is global)
        f"{CLUSTER}_2001": (False, "/", karpenter_profile_tags(CLUSTER, "us-east-1", "default")),
        # a cluster whose name starts with ours, and another cluster
        f"{CLUSTER}-2_3001": (False, "/", karpenter_profile_tags(f"{CLUSTER}-2", region, "default")),
        f"{OTHER}_4001": (
            False,
            f"/karpenter/{region}/{OTHER}/uid-4/",
            karpenter_profile_tags(OTHER, region, "default"),
        ),
        # named like Karpenter's and tagged for the cluster, but not made for an EC2NodeClass
        f"{CLUSTER}_manual": (False, "/", {f"kubernetes.io/cluster/{CLUSTER}": "owned"}),
    }
    for name, (mine, path, tags) in profiles.items():
        iam.create_instance_profile(
            InstanceProfileName=name, Path=path, Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
        )
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
        sc.add(mine, "instance-profile", name)


def add_repositories(region: str, sc: Scenario) -> None:
    """Serving-image repositories `llmctl images build --push` made for this cluster, and look-alikes."""
    ecr = boto3.client("ecr", region_name=region)
    repos = {
        "llmctl/dev/tiny-cpu": (True, {"llmctl:cluster": CLUSTER}),
        "llmctl/dev/llama2-inf2": (True, {"llmctl:cluster": CLUSTER}),
        "llmctl/prod/tiny-cpu": (False, {"llmctl:cluster": OTHER}),
        "llmctl/dev-2/tiny-cpu": (False, {"llmctl:cluster": f"{CLUSTER}-2"}),
        "llmctl/dev/untagged": (False, {}),
        "team/llmctl-dev": (False, {"llmctl:cluster": CLUSTER}),  # not an llmctl repository name
    }
    for name, (mine, tags) in repos.items():
        ecr.create_repository(repositoryName=name, tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        sc.add(mine, "ecr-repository", name)


def add_log_groups(region: str, sc: Scenario) -> None:
    """EKS control-plane and Container Insights log groups of this cluster and look-alikes."""
    logs = boto3.client("logs", region_name=region)
    groups = {
        f"/aws/eks/{CLUSTER}/cluster": True,
        f"/aws/containerinsights/{CLUSTER}/application": True,
        f"/aws/containerinsights/{CLUSTER}/performance": True,
        f"/aws/eks/{CLUSTER}-2/cluster": False,
        f"/aws/eks/{CLUSTER}/cluster-archive": False,
        f"/aws/containerinsights/{CLUSTER}-2/performance": False,
        f"/aws/containerinsights/{OTHER}/application": False,
        f"/aws/lambda/{CLUSTER}": False,
    }
    for name, mine in groups.items():
        logs.create_log_group(logGroupName=name)
        sc.add(mine, "log-group", name)


def add_interruption_queues(region: str, sc: Scenario) -> None:
    """Karpenter interruption queues (`<cluster>-karpenter-<unique suffix>`, tagged by the stack) of
    this cluster, the fixed-name queue of older stacks, and look-alikes."""
    sqs = boto3.client("sqs", region_name=region)
    suffix = "2026112613270012340000000"
    ours = {"llmctl:cluster": CLUSTER, "llmctl:stack": "dev"}
    queues = {
        f"{CLUSTER}-karpenter-{suffix}1": (True, ours),
        CLUSTER: (True, ours),  # before queue names were unique
        f"{CLUSTER}-karpenter-{suffix}2": (False, {}),  # our name, but not the stack's tags
        f"{CLUSTER}-karpenter-notes": (False, ours),  # the stack's tags, but not a name it makes
        f"{CLUSTER}-2-karpenter-{suffix}3": (False, {"llmctl:cluster": f"{CLUSTER}-2"}),  # shares the prefix
        f"{OTHER}-karpenter-{suffix}4": (False, {"llmctl:cluster": OTHER}),
    }
    for name, (mine, tags) in queues.items():
        url = sqs.create_queue(QueueName=name, tags=tags)["QueueUrl"]
        sc.add(mine, "interruption-queue", url)


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
        "instance-profile": {
            p["InstanceProfileName"]
            for p in boto3.client("iam", region_name=region).list_instance_profiles()["InstanceProfiles"]
        },
        "log-group": {
            g["logGroupName"]
            for g in boto3.client("logs", region_name=region).describe_log_groups()["logGroups"]
        },
        "interruption-queue": set(boto3.client("sqs", region_name=region).list_queues().get("QueueUrls", [])),
        "ecr-repository": {
            r["repositoryName"]
            for r in boto3.client("ecr", region_name=region).describe_repositories()["repositories"]
        },
    }
