"""The cluster file of a kubeconfig target (`--pools FILE`): the node pools of an existing cluster.

An existing cluster (k3s on-prem, an EKS cluster llmctl did not build) has no Karpenter NodePools
to read, so the user names its pools: the labels that select a pool's nodes, the taints they carry
and their instance types (catalog types, so requests can be checked against one node)::

    pools:
      - name: cpu
        labels: {pool: cpu}
        instance_types: [m5.xlarge]
      - name: gpu
        labels: {pool: gpu}
        taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
        instance_types: [g5.2xlarge]

`load_cluster_file` turns it into `PoolFacts(managed_by="existing")`; errors name the file, the
field path and, for a typo, the closest valid name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.yaml_model import parse_yaml_model
from llmctl.errors import BlueprintError, CatalogError
from llmctl.infra.workload.parts import PartName
from llmctl.infra.workload.scheduling.pool_facts import PoolFacts, TaintFacts

EXAMPLE = "pools: [{name: cpu, labels: {pool: cpu}, instance_types: [m5.xlarge]}]"
HINT = f"describe the cluster's node pools in a YAML file, e.g. `{EXAMPLE}` (docs/workload.md, 'Existing clusters')"


def _catalog_type(name: str) -> str:

    try:
        hardware().instance(name)
    except CatalogError as exc:
        raise ValueError(exc.message) from None
    return name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterPool(_Strict):
    """One pool of nodes of the existing cluster."""

    name: str = Field(min_length=1, description="Pool name, used in messages (any name).")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels every node of the pool carries; serving pods select the pool by all of them.",
    )
    taints: list[TaintFacts] = Field(
        default_factory=list,
        description="Taints every node of the pool carries (mapping or 'key[=value]:Effect'); pods "
        "placed on the pool tolerate them.",
    )
    instance_types: list[Annotated[str, AfterValidator(_catalog_type)]] = Field(
        min_length=1,
        description="Catalog instance types of the pool's nodes (`llmctl catalog instances`); requests are "
        "checked against one node of them. Pick the closest type for on-prem machines.",
    )

    device_ownership: bool = Field(
        False,
        description="containerd on the pool's nodes has `device_ownership_from_security_context = true` "
        "(its CRI plugin), so a device given to a pod is owned by the pod's user: llmctl then runs pods "
        "that use Neuron devices as non-root (otherwise as root: the host's udev rule for `/dev/neuron*` "
        "may admit only root or a group).",
    )

    @field_validator("taints", mode="before")
    @classmethod
    def _taints(cls, value: Any) -> Any:
        return [TaintFacts.mapping(item) if isinstance(item, str) else item for item in value or []]

    def to_facts(self) -> PoolFacts:
        """The pool as the workload builders and the schedulability check see it."""
        return PoolFacts(
            name=self.name,
            labels=dict(self.labels),
            taints=list(self.taints),
            instance_types=list(self.instance_types),
            managed_by="existing",
            device_ownership=self.device_ownership,
        )


class ClusterFile(_Strict):
    """An existing cluster's node pools and the platform parts llmctl cannot detect."""

    name: str | None = Field(
        None,
        description="A label for the cluster in messages and the endpoint (default: the kubeconfig's file name).",
    )
    pools: list[ClusterPool] = Field(
        min_length=1,
        description="The node pools. The Ray head and UIs go to the first pool without taints.",
    )
    present: list[PartName] = Field(
        default_factory=list,
        description="Platform parts the cluster has that llmctl cannot see in its CRDs, DaemonSets and "
        "Deployments (e.g. load-balancer for a cloud provider's LoadBalancer Services); not checked.",
    )

    @field_validator("pools")
    @classmethod
    def _unique_names(cls, pools: list[ClusterPool]) -> list[ClusterPool]:
        names = [pool.name for pool in pools]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(
                f"pool name(s) {', '.join(twice)} appear more than once; give each pool its own name"
            )
        return pools


def parse_cluster_file(text: str, source: str) -> ClusterFile:
    """Parse a cluster file's YAML text; BlueprintError naming every bad field."""
    return parse_yaml_model(
        text,
        source,
        ClusterFile,
        what="cluster file",
        hint="fix the fields listed; instance types come from `llmctl catalog instances`",
    )


def load_cluster_file(path: Path | str) -> ClusterFile:
    """Read and validate a cluster file (`--pools FILE`)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BlueprintError(f"cluster file {path} does not exist", HINT, source=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BlueprintError(
            f"cannot read cluster file {path}: {exc}", "check the file's permissions and encoding"
        ) from None
    return parse_cluster_file(text, str(path))
