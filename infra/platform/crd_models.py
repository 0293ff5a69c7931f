"""Typed models of the NodePool (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1) fields
llmctl uses. Unknown keys are rejected, so a misspelt field in a manifest builder fails a test
instead of being silently dropped by the API server's pruning.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_QUANTITY = re.compile(r"^\d+(\.\d+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_DURATION = re.compile(r"^(\d+(h|m|s))+$|^Never$")


class _Crd(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ObjectMeta(_Crd):
    """Metadata: the name is required."""

    name: str = Field(min_length=1, max_length=63, description="Object name.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations.")


class NodeSelectorRequirement(_Crd):
    """A scheduling requirement on a well-known or Karpenter label."""

    key: str = Field(description="Label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(description="Operator.")
    values: list[str] = Field(default_factory=list, description="Values.")
    min_values: int | None = Field(None, alias="minValues", ge=1, description="Minimum distinct values.")


class Taint(_Crd):
    """A node taint."""

    key: str = Field(description="Taint key.")
    value: str | None = Field(None, description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(description="Effect.")


class NodeClassRef(_Crd):
    """Reference to the node class."""

    group: Literal["karpenter.k8s.aws"] = Field(description="API group of the node class.")
    kind: Literal["EC2NodeClass"] = Field(description="Kind of the node class.")
    name: str = Field(description="Name of the node class.")


class NodeClaimTemplateMeta(_Crd):
    """Labels and annotations put on nodes."""

    labels: dict[str, str] = Field(default_factory=dict, description="Node labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Node annotations.")


class NodeClaimTemplateSpec(_Crd):
    """What Karpenter launches."""

    node_class_ref: NodeClassRef = Field(alias="nodeClassRef", description="Node class.")
    requirements: list[NodeSelectorRequirement] = Field(description="Scheduling requirements.")
    taints: list[Taint] = Field(default_factory=list, description="Taints.")
    startup_taints: list[Taint] = Field(
        default_factory=list, alias="startupTaints", description="Startup taints."
    )
    expire_after: str | None = Field(None, alias="expireAfter", description="Maximum node lifetime.")
    termination_grace_period: str | None = Field(
        None, alias="terminationGracePeriod", description="Drain timeout."
    )

    @field_validator("expire_after", "termination_grace_period")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and not _DURATION.match(value):
            raise ValueError(f"{value!r} is not a duration like '720h' or 'Never'")
        return value


class NodeClaimTemplate(_Crd):
    """spec.template."""

    metadata: NodeClaimTemplateMeta = Field(
        default_factory=NodeClaimTemplateMeta, description="Node metadata."
    )
    spec: NodeClaimTemplateSpec = Field(description="Node claim spec.")


class Budget(_Crd):
    """A disruption budget."""

    nodes: str = Field(description="Nodes (count or percentage) that may be disrupted at once.")
    schedule: str | None = Field(None, description="Cron schedule when the budget applies.")
    duration: str | None = Field(None, description="How long the schedule lasts.")
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] = Field(
        default_factory=list, description="Reasons."
    )


class Disruption(_Crd):
    """spec.disruption."""

    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = Field(
        alias="consolidationPolicy", description="Which nodes may be consolidated."
    )
    consolidate_after: str = Field(alias="consolidateAfter", description="Wait before consolidating.")
    budgets: list[Budget] = Field(default_factory=list, description="Disruption budgets.")


class NodePoolSpec(_Crd):
    """NodePool spec."""

    template: NodeClaimTemplate = Field(description="Node template.")
    disruption: Disruption | None = Field(None, description="Disruption settings.")
    limits: dict[str, str] = Field(default_factory=dict, description="Resource limits of the pool.")
    weight: int | None = Field(None, ge=1, le=100, description="Priority among pools.")

    @field_validator("limits")
    @classmethod
    def _quantities(cls, values: dict[str, str]) -> dict[str, str]:
        for key, value in values.items():
            if not _QUANTITY.match(value):
                raise ValueError(f"limit {key}={value!r} is not a Kubernetes quantity")
        return values


class NodePool(_Crd):
    """karpenter.sh/v1 NodePool."""

    api_version: Literal["karpenter.sh/v1"] = Field(alias="apiVersion", description="API version.")
    kind: Literal["NodePool"] = Field(description="Kind.")
    metadata: ObjectMeta = Field(description="Metadata.")
    spec: NodePoolSpec = Field(description="Spec.")


class SelectorTerm(_Crd):
    """A subnet / security group selector term."""

    tags: dict[str, str] | None = Field(None, description="Match by tags.")
    id: str | None = Field(None, description="Match by id.")
    name: str | None = Field(None, description="Match by name (security groups).")


class AmiSelectorTerm(_Crd):
    """An AMI selector term."""

    alias: str | None = Field(None, description="family@version, e.g. al2023@v20260818.")
    id: str | None = Field(None, description="AMI id.")
    tags: dict[str, str] | None = Field(None, description="Match by tags.")
    name: str | None = Field(None, description="Match by name.")
    owner: str | None = Field(None, description="Owner account or alias.")

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        if value is not None and not re.match(
            r"^(al2|al2023|bottlerocket|windows2019|windows2022)@(latest|v\d+|v?\d[\w.]*)$", value
        ):
            raise ValueError(f"{value!r} is not an AMI alias like 'al2023@v20260818'")
        return value


class MetadataOptions(_Crd):
    """Instance metadata service options."""

    http_endpoint: Literal["enabled", "disabled"] = Field(
        "enabled", alias="httpEndpoint", description="IMDS on/off."
    )
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(
        "disabled", alias="httpProtocolIPv6", description="IMDS over IPv6."
    )
    http_put_response_hop_limit: int = Field(
        1, alias="httpPutResponseHopLimit", ge=1, le=64, description="Hop limit."
    )
    http_tokens: Literal["required", "optional"] = Field(
        "required", alias="httpTokens", description="IMDSv2 tokens."
    )


class Ebs(_Crd):
    """An EBS volume."""

    volume_size: str = Field(alias="volumeSize", description="Size, e.g. '500Gi'.")
    volume_type: Literal["gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"] = Field(
        alias="volumeType", description="Volume type."
    )
    iops: int | None = Field(None, ge=100, description="Provisioned IOPS (gp3/io1/io2).")
    throughput: int | None = Field(None, ge=125, le=1000, description="Throughput MiB/s (gp3).")
    encrypted: bool = Field(description="Encrypt the volume.")
    delete_on_termination: bool = Field(
        True, alias="deleteOnTermination", description="Delete with the instance."
    )
    kms_key_id: str | None = Field(None, alias="kmsKeyID", description="KMS key.")

    @field_validator("volume_size")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity")
        return value


class BlockDeviceMapping(_Crd):
    """A block device."""

    device_name: str = Field(alias="deviceName", description="Device name, e.g. /dev/xvda.")
    ebs: Ebs = Field(description="EBS settings.")
    root_volume: bool | None = Field(None, alias="rootVolume", description="Whether this is the root volume.")


class EC2NodeClassSpec(_Crd):
    """EC2NodeClass spec."""

    role: str | None = Field(None, description="Node IAM role name.")
    instance_profile: str | None = Field(
        None, alias="instanceProfile", description="Instance profile (instead of role)."
    )
    ami_selector_terms: list[AmiSelectorTerm] = Field(
        alias="amiSelectorTerms", min_length=1, description="AMIs."
    )
    subnet_selector_terms: list[SelectorTerm] = Field(
        alias="subnetSelectorTerms", min_length=1, description="Subnets."
    )
    security_group_selector_terms: list[SelectorTerm] = Field(
        alias="securityGroupSelectorTerms", min_length=1, description="Security groups."
    )
    metadata_options: MetadataOptions | None = Field(
        None, alias="metadataOptions", description="IMDS options."
    )
    block_device_mappings: list[BlockDeviceMapping] = Field(
        default_factory=list, alias="blockDeviceMappings", description="Volumes."
    )
    tags: dict[str, str] = Field(default_factory=dict, description="Tags on launched resources.")
    user_data: str | None = Field(None, alias="userData", description="Extra user data.")
    kubelet: dict[str, object] | None = Field(None, description="Kubelet overrides.")
    detailed_monitoring: bool | None = Field(
        None, alias="detailedMonitoring", description="Detailed monitoring."
    )
    associate_public_ip_address: bool | None = Field(
        None, alias="associatePublicIPAddress", description="Public IPs on nodes."
    )


class EC2NodeClass(_Crd):
    """karpenter.k8s.aws/v1 EC2NodeClass."""

    api_version: Literal["karpenter.k8s.aws/v1"] = Field(alias="apiVersion", description="API version.")
    kind: Literal["EC2NodeClass"] = Field(description="Kind.")
    metadata: ObjectMeta = Field(description="Metadata.")
    spec: EC2NodeClassSpec = Field(description="Spec.")
