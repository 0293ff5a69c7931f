"""The sweep's table: one entry per kind of AWS object that in-cluster controllers leave behind.

Each entry says how to list the objects (`list`), how to tell one is this cluster's (`owned`,
which returns the tag or name that ties it to the cluster), how to delete it (`delete`), which
kinds must be gone first (`after`, waited for with the kind's `waiter` when it has one) and
whether deleting those releases more of this kind (`released`: rescanned just before deleting).
Table order is deletion order and report order; `sweep.Sweeper` runs the table and `down`'s
leftover check reads it through `sweep.leftovers`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from llmctl.infra.platform.tags import CLUSTER_TAG


@dataclass(frozen=True)
class Scope:
    """Whose leftovers, where, and whether attached ENIs and volumes count."""

    cluster: str
    region: str
    detached_only: bool = True


@dataclass(frozen=True)
class Candidate:
    """A listed object before the ownership test: id (what delete takes), name, tags, ARN."""

    id: str
    name: str
    tags: dict[str, str] = field(default_factory=dict)
    arn: str | None = None


Lister = Callable[[Any, Scope], Iterable[Candidate]]
Owner = Callable[[Scope, Candidate], "str | None"]
Deleter = Callable[[Any, str], None]


@dataclass(frozen=True)
class Kind:
    """One row of the table (see the module docstring)."""

    name: str
    service: str
    list: Lister
    owned: Owner
    delete: Deleter
    after: tuple[str, ...] = ()
    waiter: tuple[str, str] | None = None  # (boto3 waiter, its id argument): "deleted ones are gone"
    released: bool = False


def tags_of(raw: Iterable[dict[str, str]] | None) -> dict[str, str]:
    """AWS's [{Key, Value}] as a dict."""
    return {tag["Key"]: tag.get("Value", "") for tag in raw or []}


def cluster_tag_reason(
    cluster: str, tags: dict[str, str], *, keys: tuple[str, ...] = (), owner: bool = True
) -> str | None:
    """The tag that ties an object to the cluster, or None when none does.

    ``kubernetes.io/cluster/<name>`` (any value) counts when ``owner``; ``keys`` are tags whose
    *value* must equal the cluster name (e.g. ``elbv2.k8s.aws/cluster``).
    """
    key = f"kubernetes.io/cluster/{cluster}"
    if owner and key in tags:
        return f"{key}={tags[key]}"
    for key in keys:
        if tags.get(key) == cluster:
            return f"{key}={cluster}"
    return None


@dataclass(frozen=True)
class TagRule:
    """Ours when `cluster_tag_reason` finds a tag, every `needs` key is present, `skip` is false,
    and `region_key` (for global IAM objects) is absent or names this region."""

    keys: tuple[str, ...] = ()
    owner: bool = True
    needs: tuple[str, ...] = ()
    region_key: str | None = None
    skip: Callable[[Candidate], bool] | None = None

    def __call__(self, scope: Scope, item: Candidate) -> str | None:
        if self.skip is not None and self.skip(item):
            return None
        if any(key not in item.tags for key in self.needs):
            return None
        if self.region_key and item.tags.get(self.region_key, scope.region) != scope.region:
            return None  # a cluster of the same name in another region
        return cluster_tag_reason(scope.cluster, item.tags, keys=self.keys, owner=self.owner)


# ---- listing -----------------------------------------------------------------------------------
def _walk(page: dict[str, Any], path: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    head, *rest = path
    for obj in page.get(head, []):
        yield from (_walk(obj, tuple(rest)) if rest else [obj])


def _ec2_lister(
    op: str,
    path: tuple[str, ...],
    id_key: str,
    name: Callable[[dict[str, Any], dict[str, str]], str],
    filters: Callable[[Scope], list[dict[str, Any]]] = lambda scope: [],
    tags_key: str = "Tags",
) -> Lister:
    def run(client: Any, scope: Scope) -> Iterator[Candidate]:
        for page in client.get_paginator(op).paginate(Filters=filters(scope)):
            for obj in _walk(page, path):
                tags = tags_of(obj.get(tags_key))
                yield Candidate(obj[id_key], name(obj, tags), tags)

    return run


def _detached(scope: Scope) -> list[dict[str, Any]]:
    return [{"Name": "status", "Values": ["available"]}] if scope.detached_only else []


def _elbv2_lister(op: str, key: str, prefix: str) -> Lister:
    """ALBs/NLBs or target groups with their tags (DescribeTags takes 20 ARNs at a time)."""

    def run(client: Any, scope: Scope) -> Iterator[Candidate]:
        objs = [obj for page in client.get_paginator(op).paginate() for obj in page[key]]
        arns = [obj[f"{prefix}Arn"] for obj in objs]
        tagged: dict[str, dict[str, str]] = {}
        for start in range(0, len(arns), 20):
            for desc in client.describe_tags(ResourceArns=arns[start : start + 20]).get(
                "TagDescriptions", []
            ):
                tagged[desc["ResourceArn"]] = tags_of(desc.get("Tags"))
        for obj, arn in zip(objs, arns, strict=True):
            yield Candidate(arn, obj[f"{prefix}Name"], tagged.get(arn, {}), arn)

    return run


def _list_instance_profiles(client: Any, scope: Scope) -> Iterator[Candidate]:
    """Karpenter's profiles are named `<cluster>_<hash>` and, since v1.7, live under the path
    `/karpenter/<region>/<cluster>/<nodeclass-uid>/`. ListInstanceProfiles returns no tags, so each
    candidate is read again with GetInstanceProfile (which does)."""
    path = f"/karpenter/{scope.region}/{scope.cluster}/"
    for page in client.get_paginator("list_instance_profiles").paginate():
        for profile in page["InstanceProfiles"]:
            name = profile["InstanceProfileName"]
            if name.startswith(f"{scope.cluster}_") or profile.get("Path", "").startswith(path):
                full = client.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
                yield Candidate(name, name, tags_of(full.get("Tags")), profile.get("Arn"))


def _log_group_prefixes(cluster: str) -> dict[str, str]:
    """Name prefix -> what writes there. EKS names the control-plane group exactly
    `/aws/eks/<cluster>/cluster`; the CloudWatch Observability add-on writes Container Insights
    groups under `/aws/containerinsights/<cluster>/` (application, dataplane, host, performance).
    Neither is tagged with the cluster, and neither is deleted with the cluster."""
    return {
        f"/aws/eks/{cluster}/cluster": "EKS control-plane logs",
        f"/aws/containerinsights/{cluster}/": "Container Insights",
    }


def _list_log_groups(client: Any, scope: Scope) -> Iterator[Candidate]:
    for prefix in _log_group_prefixes(scope.cluster):
        for page in client.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
            for group in page["logGroups"]:
                arn = group.get("logGroupArn") or group.get("arn")
                yield Candidate(group["logGroupName"], group["logGroupName"], {}, arn)


def _queue_prefix(cluster: str) -> str:
    """Name prefix of the Karpenter interruption queue (`infra/platform/karpenter.py`
    `queue_name_prefix`, repeated here so the sweep imports no Pulumi code)."""
    return f"{cluster}-karpenter-"


def _list_queues(client: Any, scope: Scope) -> Iterator[Candidate]:
    """Queues whose name starts with the cluster's (ListQueues filters by prefix), with their tags."""
    for page in client.get_paginator("list_queues").paginate(QueueNamePrefix=scope.cluster):
        for url in page.get("QueueUrls", []):
            tags = client.list_queue_tags(QueueUrl=url).get("Tags") or {}
            yield Candidate(url, url.rsplit("/", 1)[-1], dict(tags))


def _list_repositories(client: Any, scope: Scope) -> Iterator[Candidate]:
    """The serving-image repositories `llmctl images build --push` creates (`llmctl/<stack>/<blueprint>`,
    tagged `llmctl:cluster`; no stack owns them, so an image can exist before the first `up`)."""
    for page in client.get_paginator("describe_repositories").paginate():
        for repo in page["repositories"]:
            if repo["repositoryName"].startswith("llmctl/"):
                tags = client.list_tags_for_resource(resourceArn=repo["repositoryArn"]).get("tags")
                yield Candidate(
                    repo["repositoryName"], repo["repositoryName"], tags_of(tags), repo["repositoryArn"]
                )


def _delete_repository(client: Any, name: str) -> None:
    client.delete_repository(repositoryName=name, force=True)  # with its images, as `down` promises


# ---- telling ours ------------------------------------------------------------------------------
EBS_CSI_TAG = "ebs.csi.aws.com/cluster"
# The EBS CSI driver (pkg/cloud: AwsEbsDriverTagKey) tags every volume it makes
# `ebs.csi.aws.com/cluster=true`, which names no cluster; with its cluster id set it adds
# `kubernetes.io/cluster/<id>=owned` and `KubernetesCluster=<id>` (pkg/driver/controller.go).
VOLUME_RULE = TagRule(keys=("KubernetesCluster",))
# Karpenter v1 (checked in aws/karpenter-provider-aws v1.0.0 to v1.14.1, pkg/apis/v1/ec2nodeclass.go
# InstanceProfileTags and pkg/providers/instanceprofile) tags the instance profiles it creates for an
# EC2NodeClass `spec.role` with `kubernetes.io/cluster/<cluster>=owned`, `eks:eks-cluster-name=<cluster>`,
# `karpenter.k8s.aws/ec2nodeclass=<nodeclass>` and `topology.kubernetes.io/region=<region>`; v0.3x
# (v1beta1) wrote `karpenter.sh/managed-by=<cluster>` instead of `eks:eks-cluster-name`. IAM is
# global, so the region tag keeps a same-named cluster of another region out.
INSTANCE_PROFILE_RULE = TagRule(
    keys=("eks:eks-cluster-name", "karpenter.sh/managed-by"),
    needs=("karpenter.k8s.aws/ec2nodeclass",),
    region_key="topology.kubernetes.io/region",
)


def _volume_owned(scope: Scope, item: Candidate) -> str | None:
    reason = VOLUME_RULE(scope, item)
    if reason and item.tags.get(EBS_CSI_TAG) == "true":
        return f"{EBS_CSI_TAG}=true, {reason}"
    return reason


def _log_group_owned(scope: Scope, item: Candidate) -> str | None:
    for prefix, writer in _log_group_prefixes(scope.cluster).items():
        if item.id == prefix or (prefix.endswith("/") and item.id.startswith(prefix)):
            return f"log group name {prefix}{'*' if prefix.endswith('/') else ''} ({writer})"
    return None


# The unique suffix after the prefix: the AWS provider's is a UTC timestamp (18 digits) and a hex
# counter (8); any run of digits and lowercase hex is accepted (the tag is required as well).
_QUEUE_SUFFIX = re.compile(r"[0-9a-f]+")


def _queue_owned(scope: Scope, item: Candidate) -> str | None:
    """The interruption queue: named `<cluster>-karpenter-<unique suffix>` (or, before names were
    unique, exactly `<cluster>`) AND tagged `llmctl:cluster=<cluster>` by the platform stack."""
    if item.tags.get(CLUSTER_TAG) != scope.cluster:
        return None
    prefix = _queue_prefix(scope.cluster)
    if item.name.startswith(prefix) and _QUEUE_SUFFIX.fullmatch(item.name[len(prefix) :]):
        return f"queue name {prefix}<unique suffix>, {CLUSTER_TAG}={scope.cluster}"
    if item.name == scope.cluster:
        return f"queue name {scope.cluster}, {CLUSTER_TAG}={scope.cluster}"
    return None


def _not_eks_own_group(item: Candidate) -> bool:
    """EKS deletes the groups it tags `aws:eks:cluster-name`; `default` cannot be deleted."""
    return "aws:eks:cluster-name" in item.tags or item.name == "default"


# ---- deleting ----------------------------------------------------------------------------------
def _call(op: str, arg: str, *, as_list: bool = False) -> Deleter:
    def run(client: Any, id_: str) -> None:
        getattr(client, op)(**{arg: [id_] if as_list else id_})

    return run


def _delete_security_group(client: Any, group_id: str) -> None:
    release_references(client, group_id)
    client.delete_security_group(GroupId=group_id)


def release_references(ec2: Any, group_id: str) -> None:
    """Revoke the rules of *other* groups that name this group: AWS refuses to delete a group
    another group's rule references (the node group's rule for a load balancer's group)."""
    for direction, op in (
        ("ip-permission.group-id", "revoke_security_group_ingress"),
        ("egress.ip-permission.group-id", "revoke_security_group_egress"),
    ):
        key = "IpPermissionsEgress" if direction.startswith("egress") else "IpPermissions"
        filters = [{"Name": direction, "Values": [group_id]}]
        for page in ec2.get_paginator("describe_security_groups").paginate(Filters=filters):
            for sg in page["SecurityGroups"]:
                rules = rules_naming(sg.get(key, []), group_id)
                if rules and sg["GroupId"] != group_id:
                    getattr(ec2, op)(GroupId=sg["GroupId"], IpPermissions=rules)


def rules_naming(permissions: list[dict[str, Any]], group_id: str) -> list[dict[str, Any]]:
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


def _delete_instance_profile(iam: Any, name: str) -> None:
    """A profile with a role cannot be deleted: detach the role (the role is the stack's)."""
    profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    for role in profile.get("Roles", []):
        iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=role["RoleName"])
    iam.delete_instance_profile(InstanceProfileName=name)


def _delete_queue(sqs: Any, url: str) -> None:
    try:
        sqs.delete_queue(QueueUrl=url)
    except sqs.exceptions.QueueDoesNotExist:
        return  # already gone


def _elbv2_kind(name: str, prefix: str, **extra: Any) -> Kind:
    """Load balancers and target groups: the same calls on ELBv2, by ARN, owned by the same tags."""
    snake = name.replace("-", "_")
    return Kind(
        name,
        "elbv2",
        _elbv2_lister(f"describe_{snake}s", f"{prefix}s", prefix),
        TagRule(keys=("elbv2.k8s.aws/cluster",)),
        _call(f"delete_{snake}", f"{prefix}Arn"),
        **extra,
    )


# ---- the table ---------------------------------------------------------------------------------
TABLE: tuple[Kind, ...] = (
    # Every node Karpenter launches, for either RayCluster of a RayService mid-upgrade (the active one
    # and the pending second one alike), carries `kubernetes.io/cluster/<cluster>=owned`,
    # `karpenter.sh/nodepool`, `eks:eks-cluster-name` and `karpenter.k8s.aws/ec2nodeclass` from launch
    # (aws/karpenter-provider-aws v1.14.1 pkg/utils/utils.go GetTags), `Name` and `karpenter.sh/nodeclaim`
    # once tagged (pkg/controllers/nodeclaim/tagging/controller.go); launching ones ("pending") count.
    Kind(
        "instance",
        "ec2",
        _ec2_lister(
            "describe_instances",
            ("Reservations", "Instances"),
            "InstanceId",
            lambda obj, tags: tags.get("Name") or tags.get("karpenter.sh/nodepool", ""),
            lambda scope: [
                {"Name": "tag-key", "Values": ["karpenter.sh/nodepool"]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
            ],
        ),
        TagRule(keys=("karpenter.k8s.aws/cluster", "eks:eks-cluster-name"), needs=("karpenter.sh/nodepool",)),
        _call("terminate_instances", "InstanceIds", as_list=True),
        waiter=("instance_terminated", "InstanceIds"),
    ),
    _elbv2_kind("load-balancer", "LoadBalancer", waiter=("load_balancers_deleted", "LoadBalancerArns")),
    _elbv2_kind("target-group", "TargetGroup", after=("load-balancer",)),
    Kind(
        "launch-template",
        "ec2",
        _ec2_lister(
            "describe_launch_templates",
            ("LaunchTemplates",),
            "LaunchTemplateId",
            lambda obj, tags: obj["LaunchTemplateName"],
            lambda scope: [{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [scope.cluster]}],
        ),
        TagRule(keys=("karpenter.k8s.aws/cluster",), owner=False),
        _call("delete_launch_template", "LaunchTemplateId"),
        after=("instance",),
    ),
    Kind(
        "instance-profile",
        "iam",
        _list_instance_profiles,
        INSTANCE_PROFILE_RULE,
        _delete_instance_profile,
        after=("instance",),
    ),
    Kind(
        "network-interface",
        "ec2",
        _ec2_lister(
            "describe_network_interfaces",
            ("NetworkInterfaces",),
            "NetworkInterfaceId",
            lambda obj, tags: obj.get("Description", ""),
            _detached,
            tags_key="TagSet",
        ),
        TagRule(
            keys=("cluster.k8s.amazonaws.com/name", "elbv2.k8s.aws/cluster", "karpenter.k8s.aws/cluster")
        ),
        _call("delete_network_interface", "NetworkInterfaceId"),
        after=("instance", "load-balancer"),
        released=True,
    ),
    Kind(
        "volume",
        "ec2",
        _ec2_lister(
            "describe_volumes",
            ("Volumes",),
            "VolumeId",
            lambda obj, tags: tags.get("kubernetes.io/created-for/pvc/name") or tags.get("Name", ""),
            _detached,
        ),
        _volume_owned,
        _call("delete_volume", "VolumeId"),
        after=("instance",),
        released=True,
    ),
    Kind(
        "security-group",
        "ec2",
        _ec2_lister(
            "describe_security_groups",
            ("SecurityGroups",),
            "GroupId",
            lambda obj, tags: obj.get("GroupName", ""),
        ),
        TagRule(keys=("elbv2.k8s.aws/cluster", "karpenter.k8s.aws/cluster"), skip=_not_eks_own_group),
        _delete_security_group,
        after=("instance", "load-balancer", "network-interface"),
    ),
    Kind("log-group", "logs", _list_log_groups, _log_group_owned, _call("delete_log_group", "logGroupName")),
    Kind("interruption-queue", "sqs", _list_queues, _queue_owned, _delete_queue),
    Kind(
        "ecr-repository",
        "ecr",
        _list_repositories,
        TagRule(keys=(CLUSTER_TAG,), owner=False),
        _delete_repository,
    ),
)

KINDS = tuple(kind.name for kind in TABLE)
BY_NAME = {kind.name: kind for kind in TABLE}
