"""The facts of one node pool a workload can land on (labels, taints, instance types, capacity
types): from a platform's pool specs, its stack outputs or an existing cluster's cluster file."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from llmctl.blueprints.pools import CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, POOL_LABEL, PoolSpec

ManagedBy = Literal["karpenter", "eks-nodegroup", "existing"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaintFacts(_Strict):
    """A taint carried by every node of a pool."""

    key: str = Field(description="Taint key, e.g. 'aws.amazon.com/neuron'.")
    value: str | None = Field(None, description="Taint value (None for a key-only taint).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        "NoSchedule", description="Taint effect."
    )

    @classmethod
    def parse(cls, raw: Any) -> TaintFacts:
        """Accept a mapping or the kubectl form 'key[=value]:Effect'."""
        if isinstance(raw, TaintFacts):
            return raw
        if isinstance(raw, dict):
            return cls.model_validate(raw)
        return cls.model_validate(cls.mapping(str(raw)))

    @staticmethod
    def mapping(text: str) -> dict[str, Any]:
        """The kubectl form 'key[=value]:Effect' as a mapping of the fields."""
        head, _, effect = text.partition(":")
        key, _, value = head.partition("=")
        return {"key": key, "value": value or None, "effect": effect or "NoSchedule"}


class PoolFacts(_Strict):
    """One pool of nodes the platform offers (a Karpenter NodePool, the core group, or a named pool)."""

    name: str = Field(description="Pool name (the Karpenter NodePool name on EKS).")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels every node of the pool carries.")
    taints: list[TaintFacts] = Field(
        default_factory=list, description="Taints every node of the pool carries."
    )
    instance_families: list[str] = Field(
        default_factory=list, description="EC2 instance families the pool can launch, e.g. ['inf2']."
    )
    instance_types: list[str] = Field(
        default_factory=list,
        description="Exact instance types of the pool (the core node group, or a kubeconfig pool); empty: "
        "every catalog type of instance_families.",
    )
    capacity_types: list[str] = Field(
        default_factory=list, description="EC2 capacity types the pool uses (on-demand, spot); informational."
    )
    managed_by: ManagedBy = Field(
        "karpenter",
        description="karpenter (adds karpenter.sh/nodepool), eks-nodegroup or existing (kubeconfig).",
    )
    device_ownership: bool = Field(
        False,
        description="containerd on the pool's nodes gives a pod's devices to the pod's user "
        "(`device_ownership_from_security_context`), so pods using Neuron devices can run as non-root; "
        "False for a platform stack from before llmctl set it (its pods keep running as root).",
    )

    @field_validator("taints", mode="before")
    @classmethod
    def _taints(cls, value: Any) -> Any:
        return [TaintFacts.parse(item) for item in value or []]

    def node_labels(self, instance_type: str | None = None) -> dict[str, str]:
        """The labels one node of this pool carries (Karpenter adds the pool name and instance type)."""
        labels = dict(self.labels)
        if self.managed_by == "karpenter":
            labels[POOL_LABEL] = self.name
        if instance_type:
            labels[INSTANCE_TYPE_LABEL] = instance_type
        return labels

    def node_label_sets(self, instance_type: str | None = None) -> list[dict[str, str]]:
        """The label sets a node of this pool can have: a Karpenter node also carries its capacity
        type, one of the pool's (either of spot and on-demand when the pool does not say)."""
        labels = self.node_labels(instance_type)
        if self.managed_by != "karpenter":
            return [labels]
        return [
            {**labels, CAPACITY_TYPE_LABEL: kind} for kind in self.capacity_types or ("spot", "on-demand")
        ]

    def launches(self, instance_type: str, family: str) -> bool:
        """Whether a node of this pool can be of this instance type."""
        if self.instance_types:
            return instance_type in self.instance_types
        return family in self.instance_families

    @classmethod
    def from_spec(cls, spec: PoolSpec, core_instance_type: str | None = None) -> PoolFacts:
        """The facts of a pool defined in :mod:`llmctl.blueprints.pools`."""
        return cls(
            name=spec.name,
            labels=dict(spec.labels),
            taints=[
                TaintFacts.model_validate({"key": t.key, "value": t.value, "effect": t.effect})
                for t in spec.taints
            ],
            instance_families=list(spec.families),
            instance_types=[core_instance_type]
            if spec.managed_by == "eks-nodegroup" and core_instance_type
            else list(spec.instance_types),
            managed_by="eks-nodegroup" if spec.managed_by == "eks-nodegroup" else "karpenter",
            device_ownership=spec.device_ownership,
        )
