"""Policy checks over a registered resource graph (from `infra/plan/offline.py`), also usable as a
Pulumi CrossGuard pack where the CLI and `pulumi_policy` exist.

Each rule is a plain function `list[Registered] -> list[Violation]`; :func:`check_policy` runs
them all. Messages name the fix.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from llmctl.blueprints.pools import POOLS
from llmctl.errors import PrerequisiteError
from llmctl.infra.plan.offline import UNKNOWN, Registered
from llmctl.infra.platform.tags import REQUIRED_TAGS

PUBLIC_LB_TAG = "llmctl:public-lb"
OPEN_CIDRS = ("0.0.0.0/0", "::/0")
_FLOATING = re.compile(r"^(latest|\*|)$|[\^~*]|\.x$|>|<", re.IGNORECASE)


@dataclass(frozen=True)
class Violation:
    """One policy violation."""

    rule: str
    resource: str
    urn: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def to_dict(self) -> dict[str, str]:
        """Stable JSON shape."""
        return asdict(self)


def _v(
    rule: str, res: Registered, message: str, severity: Literal["error", "warning"] = "error"
) -> Violation:
    return Violation(rule=rule, resource=res.name, urn=res.urn, message=message, severity=severity)


def _of(resources: Iterable[Registered], *types: str) -> list[Registered]:
    return [r for r in resources if r.type in types]


def _spec(res: Registered) -> dict[str, Any]:
    spec = res.inputs.get("spec")
    return spec if isinstance(spec, dict) else {}


# --- IMDSv2 -------------------------------------------------------------------------------------
def rule_imdsv2(resources: list[Registered]) -> list[Violation]:
    """Every node requires IMDSv2 tokens."""
    out = []
    fix = "set metadata options httpTokens=required"
    for res in _of(resources, "aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/instance:Instance"):
        tokens = (res.inputs.get("metadataOptions") or {}).get("httpTokens")
        if tokens != "required":
            out.append(_v("imdsv2", res, f"IMDSv2 is not required (httpTokens={tokens!r}); {fix}"))
    for res in _of(resources, "aws:eks/nodeGroup:NodeGroup"):
        if not res.inputs.get("launchTemplate"):
            out.append(
                _v(
                    "imdsv2",
                    res,
                    "managed node group has no launch template enforcing IMDSv2; give it one with httpTokens=required",
                )
            )
    for res in _of(resources, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"):
        tokens = (_spec(res).get("metadataOptions") or {}).get("httpTokens")
        if tokens != "required":
            out.append(
                _v("imdsv2", res, f"EC2NodeClass does not require IMDSv2 (httpTokens={tokens!r}); {fix}")
            )
    for res in _of(resources, "eks:index:Cluster"):
        if not res.inputs.get("skipDefaultNodeGroup"):
            out.append(
                _v(
                    "imdsv2",
                    res,
                    "the pulumi-eks default node group does not enforce IMDSv2; set skip_default_node_group=True",
                )
            )
    return out


# --- KMS ----------------------------------------------------------------------------------------
def rule_kms_secrets(resources: list[Registered]) -> list[Violation]:
    """Kubernetes secrets are encrypted with a KMS key."""
    out = []
    for res in _of(resources, "eks:index:Cluster"):
        if not res.inputs.get("encryptionConfigKeyArn"):
            out.append(
                _v(
                    "kms-secrets",
                    res,
                    "secrets encryption is off; pass encryption_config_key_arn (a KMS key)",
                )
            )
    for res in _of(resources, "aws:eks/cluster:Cluster"):
        if not res.inputs.get("encryptionConfig"):
            out.append(
                _v("kms-secrets", res, "secrets encryption is off; set encryption_config with a KMS key")
            )
    return out


# --- S3 -----------------------------------------------------------------------------------------
_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")


def _attached(resources: list[Registered], bucket: Registered, token: str) -> list[Registered]:
    return [r for r in _of(resources, token) if bucket.urn in r.dependencies]


def rule_s3_public_access(resources: list[Registered]) -> list[Violation]:
    """Every bucket has a public access block with all four settings on."""
    out = []
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    for bucket in _of(resources, *_BUCKETS):
        blocks = _attached(resources, bucket, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
        if not blocks:
            out.append(
                _v(
                    "s3-public-access",
                    bucket,
                    "bucket has no public access block; add aws.s3.BucketPublicAccessBlock with all four flags true",
                )
            )
        for block in blocks:
            off = [flag for flag in flags if block.inputs.get(flag) is not True]
            if off:
                out.append(
                    _v(
                        "s3-public-access",
                        block,
                        f"public access block leaves {', '.join(off)} off; set them to true",
                    )
                )
    return out


def rule_s3_encryption(resources: list[Registered]) -> list[Violation]:
    """Every bucket has default encryption configured."""
    out = []
    for bucket in _of(resources, *_BUCKETS):
        inline = bucket.inputs.get("serverSideEncryptionConfiguration")
        attached = _attached(
            resources,
            bucket,
            "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        )
        if not inline and not attached:
            out.append(
                _v(
                    "s3-encryption",
                    bucket,
                    "bucket has no default encryption; add aws.s3.BucketServerSideEncryptionConfiguration",
                )
            )
    return out


# --- security groups ----------------------------------------------------------------------------
def _public_lb(res: Registered) -> bool:
    return str((res.inputs.get("tags") or {}).get(PUBLIC_LB_TAG, "")).lower() == "true"


def rule_open_security_groups(resources: list[Registered]) -> list[Violation]:
    """No ingress from anywhere, except security groups of load balancers meant to be public."""
    out = []
    fix = f"narrow the source CIDRs, or tag a public load balancer's group {PUBLIC_LB_TAG}=true"
    for res in _of(resources, "aws:ec2/securityGroup:SecurityGroup"):
        for rule in res.inputs.get("ingress") or []:
            cidrs = [*(rule.get("cidrBlocks") or []), *(rule.get("ipv6CidrBlocks") or [])]
            if any(c in OPEN_CIDRS for c in cidrs) and not _public_lb(res):
                out.append(
                    _v(
                        "open-security-group",
                        res,
                        f"ingress open to the internet ({', '.join(cidrs)}); {fix}",
                    )
                )
    for res in _of(resources, "aws:ec2/securityGroupRule:SecurityGroupRule"):
        cidrs = [*(res.inputs.get("cidrBlocks") or []), *(res.inputs.get("ipv6CidrBlocks") or [])]
        if res.inputs.get("type") == "ingress" and any(c in OPEN_CIDRS for c in cidrs):
            out.append(_v("open-security-group", res, f"ingress rule open to the internet; {fix}"))
    for res in _of(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        if (
            res.inputs.get("cidrIpv4") in OPEN_CIDRS or res.inputs.get("cidrIpv6") in OPEN_CIDRS
        ) and not _public_lb(res):
            out.append(_v("open-security-group", res, f"ingress rule open to the internet; {fix}"))
    for res in _of(resources, "eks:index:Cluster"):
        cidrs = res.inputs.get("publicAccessCidrs") or ["0.0.0.0/0"]
        if res.inputs.get("endpointPublicAccess", True) and any(c in OPEN_CIDRS for c in cidrs):
            out.append(
                _v(
                    "open-endpoint",
                    res,
                    "the Kubernetes API endpoint is public to 0.0.0.0/0; set endpoint.public_cidrs to your ranges "
                    "or endpoint.public=false",
                    severity="warning",
                )
            )
    return out


# --- tags ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def taggable(token: str) -> bool:
    """Whether a resource type accepts `tags` (from the installed provider SDK's signature)."""
    package, _, rest = token.partition(":")
    module, _, cls_name = rest.partition(":")
    module = module.split("/")[0]
    sdk = {"aws": "pulumi_aws", "eks": "pulumi_eks"}.get(package)
    if sdk is None or not cls_name:
        return False
    with warnings.catch_warnings():  # importing an SDK module warns about its deprecated classes
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            cls = getattr(importlib.import_module(sdk if module == "index" else f"{sdk}.{module}"), cls_name)
            return "tags" in inspect.signature(cls._internal_init).parameters
        except (ImportError, AttributeError, TypeError, ValueError):
            return False


def rule_tags(resources: list[Registered]) -> list[Violation]:
    """Every taggable AWS resource carries llmctl:stack and llmctl:cluster."""
    out = []
    for res in resources:
        if not res.type.startswith(("aws:", "eks:")) or not taggable(res.type):
            continue
        tags = res.inputs.get("tags") or {}
        missing = [key for key in REQUIRED_TAGS if not tags.get(key)]
        if missing:
            out.append(_v("tags", res, f"missing tag(s) {', '.join(missing)}; pass tags=tags_for(config)"))
    return out


# --- versions -----------------------------------------------------------------------------------
def _latest_images(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [image for item in value.values() for image in _latest_images(item)]
    if isinstance(value, list):
        return [image for item in value for image in _latest_images(item)]
    if isinstance(value, str) and re.match(r"^[\w.\-/:]+:latest$", value):
        return [value]
    return []


def rule_pinned_versions(resources: list[Registered]) -> list[Violation]:
    """Charts, AMIs, images and the Kubernetes version are pinned (no latest, no ranges)."""
    out = []
    fix = "pin it in blueprints/data/versions.yaml"
    for res in _of(resources, "kubernetes:helm.sh/v3:Release"):
        version = str(res.inputs.get("version") or "")
        if _FLOATING.search(version):
            out.append(
                _v(
                    "pinned-versions",
                    res,
                    f"chart {res.inputs.get('chart')} version {version!r} is not pinned; {fix}",
                )
            )
        for image in _latest_images(res.inputs.get("values") or {}):
            out.append(_v("pinned-versions", res, f"image {image} uses 'latest'; {fix}"))
    for res in _of(resources, "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"):
        for term in _spec(res).get("amiSelectorTerms") or []:
            alias = str(term.get("alias") or "")
            if alias.endswith("@latest"):
                out.append(
                    _v(
                        "pinned-versions",
                        res,
                        f"AMI alias {alias} drifts; use a dated alias like al2023@v20260818 ({fix})",
                    )
                )
    for res in _of(resources, "eks:index:Cluster", "aws:eks/cluster:Cluster"):
        if not res.inputs.get("version"):
            out.append(_v("pinned-versions", res, f"no Kubernetes version set, so EKS picks one; {fix}"))
    return out


# --- accelerator pools --------------------------------------------------------------------------
def _required_taint(families: Iterable[str]) -> set[str]:
    keys: set[str] = set()
    for spec in POOLS:
        if spec.accelerator != "cpu" and set(families) & set(spec.families):
            keys.update(taint.key for taint in spec.taints)
    return keys


def rule_accelerator_taints(resources: list[Registered]) -> list[Violation]:
    """NodePools that launch Neuron or GPU instances carry the matching taint."""
    out = []
    for res in _of(resources, "kubernetes:karpenter.sh/v1:NodePool"):
        node = (_spec(res).get("template") or {}).get("spec") or {}
        families = [
            value
            for req in node.get("requirements") or []
            if req.get("key") == "karpenter.k8s.aws/instance-family" and req.get("operator") == "In"
            for value in req.get("values") or []
        ]
        present = {taint.get("key") for taint in node.get("taints") or []}
        for key in sorted(_required_taint(families) - present):
            out.append(
                _v(
                    "accelerator-taint",
                    res,
                    f"accelerator pool ({', '.join(families)}) lacks the {key}:NoSchedule taint, so any pod may land "
                    "on it; add the taint",
                )
            )
    return out


RULES: tuple[Callable[[list[Registered]], list[Violation]], ...] = (
    rule_imdsv2,
    rule_kms_secrets,
    rule_s3_public_access,
    rule_s3_encryption,
    rule_open_security_groups,
    rule_tags,
    rule_pinned_versions,
    rule_accelerator_taints,
)


def check_policy(resources: list[Registered]) -> list[Violation]:
    """Run every rule; errors first, then warnings."""
    found = [violation for rule in RULES for violation in rule(resources)]
    return sorted(found, key=lambda v: (v.severity != "error", v.rule, v.resource))


def errors(violations: Iterable[Violation]) -> list[Violation]:
    """The violations that fail a plan."""
    return [v for v in violations if v.severity == "error"]


# --- CrossGuard ---------------------------------------------------------------------------------
def _plain(value: Any, unknown_error: type[Exception]) -> Any:
    """`pulumi_policy` hands props as read-only Mapping/Sequence proxies that raise on an unknown
    (preview) value; the rules read plain dicts and lists, with unknowns as :data:`UNKNOWN`."""
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Mapping):
        plain: dict[str, Any] = {}
        for key in value:
            try:
                plain[key] = _plain(value[key], unknown_error)
            except unknown_error:
                plain[key] = UNKNOWN
        return plain
    if isinstance(value, Sequence):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                items.append(_plain(value[index], unknown_error))
            except unknown_error:
                items.append(UNKNOWN)
        return items
    return value


def _from_policy_resource(res: Any, unknown_error: type[Exception]) -> Registered:
    parent = getattr(res, "parent", None)
    return Registered(
        urn=res.urn,
        type=res.resource_type,
        name=res.name,
        parent=getattr(parent, "urn", None),
        inputs=_plain(res.props, unknown_error),
        dependencies=[dep.urn for dep in getattr(res, "dependencies", []) or []],
    )


def crossguard_pack(name: str = "llmctl-platform", enforcement: str = "mandatory") -> Any:
    """The same rules as a CrossGuard policy pack (needs `pulumi_policy` and the pulumi CLI).

    Use from a policy pack's `__main__.py`: `from llmctl.infra.plan.policy import crossguard_pack;
    crossguard_pack()`.
    """
    try:
        policy = importlib.import_module("pulumi_policy")
    except ImportError:
        raise PrerequisiteError(
            "pulumi_policy is not installed",
            "pip install pulumi-policy (CrossGuard packs also need the pulumi CLI)",
        ) from None

    unknown_error = importlib.import_module("pulumi_policy.proxy").UnknownValueError

    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        registered = [_from_policy_resource(res, unknown_error) for res in args.resources]
        for violation in errors(check_policy(registered)):
            report_violation(f"[{violation.rule}] {violation.resource}: {violation.message}", violation.urn)

    return policy.PolicyPack(
        name=name,
        enforcement_level=getattr(policy.EnforcementLevel, enforcement.upper()),
        policies=[
            policy.StackValidationPolicy(
                name="llmctl-platform-rules",
                description="IMDSv2, KMS secrets, S3 public access and encryption, open security groups, tags, "
                "pinned versions, accelerator taints",
                validate=validate,
            )
        ],
    )
