"""Find and delete what in-cluster controllers leave behind after a cluster is destroyed.

The AWS Load Balancer Controller, Karpenter, the VPC CNI and the EBS CSI driver create AWS objects
that no Pulumi stack tracks. Left behind, they keep costing money and block VPC deletion. The
sweep finds them *only* by tags that name the cluster, and deletes them in an order that lets
each deletion succeed: instances, load balancers, target groups, launch templates, detached
ENIs, available volumes, then security groups (retried while AWS still reports dependencies).

`leftovers()` is the final check `llmctl down` runs: everything still tagged for the cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from llmctl.errors import CloudError

# Deletion order; the final report and `--json` list kinds in this order too.
KINDS = (
    "instance",
    "load-balancer",
    "target-group",
    "launch-template",
    "network-interface",
    "volume",
    "security-group",
)


@dataclass(frozen=True)
class Leftover:
    """One AWS object tagged for the cluster."""

    kind: str
    id: str
    name: str
    region: str
    reason: str
    arn: str | None = None

    def label(self) -> str:
        """'load-balancer k8s-llm-abc (arn...)' for messages."""
        extra = f" ({self.name})" if self.name and self.name != self.id else ""
        return f"{self.kind} {self.id}{extra}"


@dataclass
class SweepReport:
    """What a sweep found, deleted and failed to delete."""

    cluster: str
    region: str
    dry_run: bool
    found: list[Leftover] = field(default_factory=list)
    deleted: list[Leftover] = field(default_factory=list)
    failed: list[tuple[Leftover, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Deleting releases ENIs and volumes that the first scan saw attached: list them too.
        seen = set(self.found)
        self.found += [item for item in [*self.deleted, *(i for i, _ in self.failed)] if item not in seen]

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON keys: cluster, region, dry_run, found, deleted, failed."""
        return {
            "cluster": self.cluster,
            "region": self.region,
            "dry_run": self.dry_run,
            "found": [asdict(item) for item in self.found],
            "deleted": [asdict(item) for item in self.deleted],
            "failed": [{**asdict(item), "error": error} for item, error in self.failed],
        }


def _tags(raw: Iterable[dict[str, str]] | None) -> dict[str, str]:
    return {tag["Key"]: tag.get("Value", "") for tag in raw or []}


def cluster_tag_reason(cluster: str, tags: dict[str, str], *, keys: tuple[str, ...] = ()) -> str | None:
    """The tag that ties an object to the cluster, or None when none does.

    ``kubernetes.io/cluster/<name>`` (any value) always counts; ``keys`` are tags whose *value*
    must equal the cluster name (e.g. ``elbv2.k8s.aws/cluster``).
    """
    owner = f"kubernetes.io/cluster/{cluster}"
    if owner in tags:
        return f"{owner}={tags[owner]}"
    for key in keys:
        if tags.get(key) == cluster:
            return f"{key}={cluster}"
    return None


LB_KEYS = ("elbv2.k8s.aws/cluster",)
INSTANCE_KEYS = ("karpenter.k8s.aws/cluster", "eks:eks-cluster-name")
ENI_KEYS = ("cluster.k8s.amazonaws.com/name", "elbv2.k8s.aws/cluster", "karpenter.k8s.aws/cluster")
VOLUME_KEYS = ("KubernetesCluster", "ebs.csi.aws.com/cluster-name")
SG_KEYS = ("elbv2.k8s.aws/cluster", "karpenter.k8s.aws/cluster")
# AWS still holds the object for something being deleted (an LB's ENIs, a detaching volume).
RETRYABLE = ("DependencyViolation", "ResourceInUse", "InvalidNetworkInterface.InUse", "VolumeInUse")
WAIT_DELAY_S = 5


class Sweeper:
    """Finds and deletes one cluster's leftovers in one region (boto3 clients from a session)."""

    def __init__(self, cluster: str, region: str, session: Any = None) -> None:
        import boto3

        self.cluster = cluster
        self.region = region
        session = session or boto3.session.Session(region_name=region)
        self.ec2: Any = session.client("ec2", region_name=region)
        self.elbv2: Any = session.client("elbv2", region_name=region)

    # ---- finding -------------------------------------------------------------------------
    def _item(self, kind: str, id_: str, name: str, reason: str, arn: str | None = None) -> Leftover:
        return Leftover(kind=kind, id=id_, name=name, region=self.region, reason=reason, arn=arn)

    def _elbv2_tagged(self, arns: list[str]) -> dict[str, dict[str, str]]:
        tagged: dict[str, dict[str, str]] = {}
        for start in range(0, len(arns), 20):
            reply = self.elbv2.describe_tags(ResourceArns=arns[start : start + 20])
            for desc in reply.get("TagDescriptions", []):
                tagged[desc["ResourceArn"]] = _tags(desc.get("Tags"))
        return tagged

    def load_balancers(self) -> list[Leftover]:
        """ALBs/NLBs tagged for the cluster (by the Load Balancer Controller or the cloud provider)."""
        lbs = [
            lb
            for page in self.elbv2.get_paginator("describe_load_balancers").paginate()
            for lb in page["LoadBalancers"]
        ]
        tags = self._elbv2_tagged([lb["LoadBalancerArn"] for lb in lbs])
        found = []
        for lb in lbs:
            reason = cluster_tag_reason(self.cluster, tags.get(lb["LoadBalancerArn"], {}), keys=LB_KEYS)
            if reason:
                found.append(
                    self._item(
                        "load-balancer",
                        lb["LoadBalancerArn"],
                        lb["LoadBalancerName"],
                        reason,
                        lb["LoadBalancerArn"],
                    )
                )
        return found

    def target_groups(self) -> list[Leftover]:
        """Target groups tagged for the cluster."""
        groups = [
            tg
            for page in self.elbv2.get_paginator("describe_target_groups").paginate()
            for tg in page["TargetGroups"]
        ]
        tags = self._elbv2_tagged([tg["TargetGroupArn"] for tg in groups])
        found = []
        for tg in groups:
            reason = cluster_tag_reason(self.cluster, tags.get(tg["TargetGroupArn"], {}), keys=LB_KEYS)
            if reason:
                found.append(
                    self._item(
                        "target-group",
                        tg["TargetGroupArn"],
                        tg["TargetGroupName"],
                        reason,
                        tg["TargetGroupArn"],
                    )
                )
        return found

    def instances(self) -> list[Leftover]:
        """Karpenter-launched instances (a `karpenter.sh/nodepool` tag) of this cluster, not yet terminated."""
        found = []
        filters = [
            {"Name": "tag-key", "Values": ["karpenter.sh/nodepool"]},
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
        ]
        for page in self.ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                for inst in reservation["Instances"]:
                    tags = _tags(inst.get("Tags"))
                    reason = cluster_tag_reason(self.cluster, tags, keys=INSTANCE_KEYS)
                    if reason:
                        name = tags.get("Name") or tags.get("karpenter.sh/nodepool", "")
                        found.append(self._item("instance", inst["InstanceId"], name, reason))
        return found

    def launch_templates(self) -> list[Leftover]:
        """Launch templates Karpenter made for the cluster (`karpenter.k8s.aws/cluster=<name>`)."""
        filters = [{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [self.cluster]}]
        found = []
        for page in self.ec2.get_paginator("describe_launch_templates").paginate(Filters=filters):
            for lt in page["LaunchTemplates"]:
                tags = _tags(lt.get("Tags"))
                if tags.get("karpenter.k8s.aws/cluster") == self.cluster:
                    reason = f"karpenter.k8s.aws/cluster={self.cluster}"
                    found.append(
                        self._item(
                            "launch-template", lt["LaunchTemplateId"], lt["LaunchTemplateName"], reason
                        )
                    )
        return found

    def network_interfaces(self, *, detached_only: bool = True) -> list[Leftover]:
        """ENIs tagged for the cluster; by default only detached ones (status `available`)."""
        filters = [{"Name": "status", "Values": ["available"]}] if detached_only else []
        found = []
        for page in self.ec2.get_paginator("describe_network_interfaces").paginate(Filters=filters):
            for eni in page["NetworkInterfaces"]:
                reason = cluster_tag_reason(self.cluster, _tags(eni.get("TagSet")), keys=ENI_KEYS)
                if reason:
                    found.append(
                        self._item(
                            "network-interface", eni["NetworkInterfaceId"], eni.get("Description", ""), reason
                        )
                    )
        return found

    def volumes(self, *, detached_only: bool = True) -> list[Leftover]:
        """EBS volumes tagged for the cluster; by default only unattached ones (state `available`)."""
        filters = [{"Name": "status", "Values": ["available"]}] if detached_only else []
        found = []
        for page in self.ec2.get_paginator("describe_volumes").paginate(Filters=filters):
            for vol in page["Volumes"]:
                tags = _tags(vol.get("Tags"))
                reason = cluster_tag_reason(self.cluster, tags, keys=VOLUME_KEYS)
                if reason:
                    name = tags.get("kubernetes.io/created-for/pvc/name") or tags.get("Name", "")
                    found.append(self._item("volume", vol["VolumeId"], name, reason))
        return found

    def security_groups(self) -> list[Leftover]:
        """Security groups tagged for the cluster, except the ones EKS itself owns and deletes."""
        found = []
        for page in self.ec2.get_paginator("describe_security_groups").paginate():
            for sg in page["SecurityGroups"]:
                tags = _tags(sg.get("Tags"))
                if "aws:eks:cluster-name" in tags or sg.get("GroupName") == "default":
                    continue
                reason = cluster_tag_reason(self.cluster, tags, keys=SG_KEYS)
                if reason:
                    found.append(self._item("security-group", sg["GroupId"], sg.get("GroupName", ""), reason))
        return found

    def find(self, *, detached_only: bool = True) -> list[Leftover]:
        """Everything tagged for the cluster, in deletion order."""
        try:
            return [
                *self.instances(),
                *self.load_balancers(),
                *self.target_groups(),
                *self.launch_templates(),
                *self.network_interfaces(detached_only=detached_only),
                *self.volumes(detached_only=detached_only),
                *self.security_groups(),
            ]
        except Exception as exc:
            raise translate_aws_error(exc, self.region) from None

    # ---- deleting ------------------------------------------------------------------------
    def _delete_one(self, item: Leftover) -> None:
        if item.kind == "instance":
            self.ec2.terminate_instances(InstanceIds=[item.id])
        elif item.kind == "load-balancer":
            self.elbv2.delete_load_balancer(LoadBalancerArn=item.id)
        elif item.kind == "target-group":
            self.elbv2.delete_target_group(TargetGroupArn=item.id)
        elif item.kind == "launch-template":
            self.ec2.delete_launch_template(LaunchTemplateId=item.id)
        elif item.kind == "network-interface":
            self.ec2.delete_network_interface(NetworkInterfaceId=item.id)
        elif item.kind == "volume":
            self.ec2.delete_volume(VolumeId=item.id)
        elif item.kind == "security-group":
            self._release_references(item.id)
            self.ec2.delete_security_group(GroupId=item.id)
        else:  # pragma: no cover - KINDS is closed
            raise ValueError(item.kind)

    def _release_references(self, group_id: str) -> None:
        """Revoke the rules of *other* groups that name this group: AWS refuses to delete a
        group another group's rule references (the node group's rule for a load balancer's group)."""
        for direction, revoke in (
            ("ip-permission.group-id", self.ec2.revoke_security_group_ingress),
            ("egress.ip-permission.group-id", self.ec2.revoke_security_group_egress),
        ):
            filters = [{"Name": direction, "Values": [group_id]}]
            key = "IpPermissionsEgress" if direction.startswith("egress") else "IpPermissions"
            for page in self.ec2.get_paginator("describe_security_groups").paginate(Filters=filters):
                for sg in page["SecurityGroups"]:
                    rules = _rules_naming(sg.get(key, []), group_id)
                    if rules and sg["GroupId"] != group_id:
                        revoke(GroupId=sg["GroupId"], IpPermissions=rules)

    def _wait_gone(self, deleted: list[Leftover], deadline: float) -> None:
        """Wait until terminated instances and deleted load balancers are gone: only then do
        their ENIs (and the volumes of the instances) get released."""
        from botocore.exceptions import BotoCoreError, ClientError, WaiterError

        waits = (
            ("instance", self.ec2, "instance_terminated", "InstanceIds"),
            ("load-balancer", self.elbv2, "load_balancers_deleted", "LoadBalancerArns"),
        )
        for kind, client, waiter, arg in waits:
            ids = [item.id for item in deleted if item.kind == kind]
            remaining = deadline - time.monotonic()
            if not ids or remaining <= 0:
                continue
            config = {"Delay": WAIT_DELAY_S, "MaxAttempts": max(1, int(remaining // WAIT_DELAY_S))}
            # What still depends on them is retried below until the deadline.
            with contextlib.suppress(WaiterError, ClientError, BotoCoreError):
                client.get_waiter(waiter).wait(**{arg: ids}, WaiterConfig=config)

    def delete(
        self,
        items: list[Leftover],
        *,
        timeout_s: float = 600,
        on_deleted: Callable[[Leftover], None] | None = None,
    ) -> tuple[list[Leftover], list[tuple[Leftover, str]]]:
        """Delete in an order AWS accepts; dependency errors are retried until `timeout_s` runs out.

        Instances and load balancers first (their deletion is asynchronous), then wait until they
        are gone, then target groups and launch templates, then the ENIs and volumes that are
        detached *now* (a rescan picks up the ones the terminations released), then security
        groups. The result may hold objects `items` did not: the ones the rescan found.
        """
        deadline = time.monotonic() + timeout_s
        deleted: list[Leftover] = []
        failed: list[tuple[Leftover, str]] = []
        pending = sorted(items, key=lambda item: KINDS.index(item.kind))

        def run(kinds: tuple[str, ...]) -> None:
            for item in [item for item in pending if item.kind in kinds]:
                error = self._delete_with_retry(item, deadline)
                if error is None:
                    deleted.append(item)
                    if on_deleted:
                        on_deleted(item)
                else:
                    failed.append((item, error))

        run(("instance", "load-balancer"))
        self._wait_gone(deleted, deadline)
        run(("target-group", "launch-template"))
        known = {item.id for item in pending}
        try:
            released = [*self.network_interfaces(), *self.volumes()]
        except Exception as exc:
            raise translate_aws_error(exc, self.region) from None
        pending = sorted(
            pending + [item for item in released if item.id not in known],
            key=lambda item: KINDS.index(item.kind),
        )
        run(("network-interface", "volume"))
        run(("security-group",))
        return deleted, failed

    def _delete_with_retry(self, item: Leftover, deadline: float) -> str | None:
        from botocore.exceptions import BotoCoreError, ClientError

        delay = 2.0
        while True:
            try:
                self._delete_one(item)
                return None
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code.endswith(("NotFound", ".NotFound")) or code in (
                    "LoadBalancerNotFound",
                    "TargetGroupNotFound",
                ):
                    return None  # already gone: a second run, or AWS cleaned it up
                if code not in RETRYABLE or time.monotonic() + delay > deadline:
                    return f"{code}: {exc.response.get('Error', {}).get('Message', '')}".strip()
            except BotoCoreError as exc:
                return str(exc)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)


def _rules_naming(permissions: list[dict[str, Any]], group_id: str) -> list[dict[str, Any]]:
    """The part of each rule that references `group_id`, in the shape revoke_* accepts."""
    rules = []
    for perm in permissions:
        pairs = [
            {k: v for k, v in pair.items() if k in ("GroupId", "UserId")}
            for pair in perm.get("UserIdGroupPairs", [])
            if pair.get("GroupId") == group_id
        ]
        if pairs:
            rule: dict[str, Any] = {k: perm[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in perm}
            rules.append({**rule, "UserIdGroupPairs": pairs})
    return rules


def translate_aws_error(exc: Exception, region: str) -> Exception:
    """Turn botocore errors into a CloudError with a hint; anything else is returned unchanged."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, NoRegionError

    if isinstance(exc, NoCredentialsError):
        return CloudError(
            "no AWS credentials found",
            "configure credentials (`aws configure`, `aws sso login`, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)",
        )
    if isinstance(exc, NoRegionError):
        return CloudError("no AWS region set", "pass --region or set AWS_REGION")
    if isinstance(exc, EndpointConnectionError):
        return CloudError(f"cannot reach AWS in {region}: {exc}", "check the region name and your network")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        message = f"AWS refused the call ({code}): {error.get('Message', '')}"
        if code in ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException"):
            return CloudError(
                message, "the identity needs ec2:Describe*/Delete* and elasticloadbalancing:* permissions"
            )
        if code in ("AuthFailure", "InvalidClientTokenId", "ExpiredToken", "RequestExpired"):
            return CloudError(message, "refresh your credentials (`aws sso login` or new keys)")
        return CloudError(message, "re-run with --debug for details")
    return exc


def sweep(
    cluster: str,
    region: str,
    *,
    dry_run: bool = False,
    session: Any = None,
    timeout_s: float = 600,
    on_deleted: Callable[[Leftover], None] | None = None,
) -> SweepReport:
    """Find the cluster's leftovers and (unless `dry_run`) delete them."""
    sweeper = Sweeper(cluster, region, session)
    found = sweeper.find()
    deleted: list[Leftover] = []
    failed: list[tuple[Leftover, str]] = []
    if not dry_run and found:
        deleted, failed = sweeper.delete(found, timeout_s=timeout_s, on_deleted=on_deleted)
    return SweepReport(cluster, region, dry_run, found, deleted, failed)


def leftovers(cluster: str, region: str, *, session: Any = None) -> list[Leftover]:
    """Everything still tagged for the cluster, attached or not: `llmctl down`'s final check."""
    return Sweeper(cluster, region, session).find(detached_only=False)
