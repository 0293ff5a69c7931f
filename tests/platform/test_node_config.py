"""Issue 53: the Neuron pools' nodes give a pod's devices to the pod's user (containerd's
`device_ownership_from_security_context`), through the nodeadm NodeConfig in their EC2NodeClass's
userData; the platform says so in its `node_pools` output, and workloads read it back."""

from __future__ import annotations

import pytest
import tomllib
import yaml

from llmctl.blueprints.pools import POOLS, pool
from llmctl.blueprints.versions import versions
from llmctl.infra.platform.manifests import ec2nodeclass_manifest
from llmctl.infra.platform.node_config import user_data
from llmctl.infra.workload.config import PlatformFacts

KARPENTER_POOLS = [spec for spec in POOLS if spec.managed_by == "karpenter"]
NEURON_POOLS = {"inferentia-inf2", "trainium-trn1", "trainium-trn2"}


@pytest.mark.parametrize("spec", KARPENTER_POOLS, ids=lambda s: s.name)
def test_only_neuron_pools_carry_the_device_ownership_nodeconfig(spec) -> None:  # type: ignore[no-untyped-def]
    alias = versions().ami["al2023_alias"].value
    node_class = ec2nodeclass_manifest(spec, cluster_name="c1", node_role="r", ami_alias=alias)["spec"]
    assert spec.device_ownership is (spec.name in NEURON_POOLS)
    if spec.name not in NEURON_POOLS:
        assert "userData" not in node_class
        return
    text = node_class["userData"]
    # Karpenter v1.14 nodeadm.go parseUserData: not MIME, parses as YAML -> one NodeConfig part, before its own
    assert not text.lstrip().startswith(("MIME-Version:", "Content-Type:"))
    document = yaml.safe_load(text)
    assert document["apiVersion"] == "node.eks.aws/v1alpha1" and document["kind"] == "NodeConfig"
    assert set(document["spec"]) == {"containerd"}  # the cluster and kubelet parts stay Karpenter's
    config = document["spec"]["containerd"]["config"]
    assert tomllib.loads(config) == {
        "plugins": {"io.containerd.grpc.v1.cri": {"device_ownership_from_security_context": True}}
    }
    # nodeadm config.go Version3configInNodeConfig: a config naming these plugins is version 3 and refused on
    # containerd 1.7; a version 2 one is migrated on containerd 2.x
    assert "io.containerd.cri.v1.images" not in config and "io.containerd.cri.v1.runtime" not in config


def test_platform_output_carries_device_ownership_and_workloads_read_it() -> None:
    from llmctl.infra.platform.config import PlatformConfig
    from llmctl.infra.platform.program import node_pool_outputs

    config = PlatformConfig.model_validate(
        {"stack": "dev", "region": "us-west-2", "pools": ["inferentia-inf2", "gpu-nvidia"]}
    )
    rows = node_pool_outputs(config)
    assert {
        row["name"]: row["device_ownership"] for row in rows if row["name"] in NEURON_POOLS | {"gpu-nvidia"}
    } == {
        "inferentia-inf2": True,
        "gpu-nvidia": False,
    }
    facts = PlatformFacts.from_outputs({"cluster_name": "c", "region": "us-west-2", "node_pools": rows})
    assert facts.pool("inferentia-inf2").device_ownership is True  # type: ignore[union-attr]
    assert facts.pool("gpu-nvidia").device_ownership is False  # type: ignore[union-attr]
    assert user_data(pool("gpu-nvidia")) is None
