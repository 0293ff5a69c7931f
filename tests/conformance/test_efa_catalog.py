"""The instance catalog's EFA column against the EFA device plugin chart's own list of EFA instance types
(aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml `supportedInstanceLabels`, the types its
DaemonSet runs on): a type the catalog gives EFA interfaces must be one the plugin serves, and a catalog
type the plugin lists must not be recorded without EFA."""

from __future__ import annotations

from upstream_files import load_yaml, upstream

from llmctl.blueprints.hardware import hardware


def test_the_catalog_efa_types_are_the_plugins() -> None:
    values = load_yaml(upstream("aws-efa-k8s-device-plugin/values.yaml"))
    assert values["supportedInstanceLabels"]["keys"] == ["node.kubernetes.io/instance-type"]
    plugin = set(values["supportedInstanceLabels"]["values"])
    catalog = hardware().instances
    with_efa = {name for name, row in catalog.items() if row.efa_interfaces}
    assert with_efa <= plugin, (
        f"EFA interfaces recorded for types the plugin never serves: {with_efa - plugin}"
    )
    assert {name for name in catalog if name in plugin} == with_efa
    assert catalog["p5.48xlarge"].efa_interfaces == 32 and catalog["p5.48xlarge"].network_gbps == 3200
