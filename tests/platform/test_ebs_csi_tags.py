"""The EBS CSI add-on is told its cluster id, so the volumes it creates carry the
`kubernetes.io/cluster/<name>` tag the teardown sweep finds them by."""

from __future__ import annotations

import json

from platform_support import Graph, graph_for

from llmctl.infra.aws.sweep_kinds import BY_NAME, Candidate, Scope
from llmctl.infra.platform.config import PlatformConfig

ADDON = "aws:eks/addon:Addon"


def _ebs_addon_values(config: PlatformConfig) -> dict[str, object]:
    graph = Graph(graph_for(config))
    addon = next(r for r in graph.of(ADDON) if r.inputs["addonName"] == "aws-ebs-csi-driver")
    values = json.loads(addon.inputs["configurationValues"])
    assert isinstance(values, dict)
    return values


def test_ebs_csi_addon_sets_the_cluster_tag_id() -> None:
    assert _ebs_addon_values(PlatformConfig()) == {"controller": {"k8sTagClusterId": "llmctl-dev"}}
    assert _ebs_addon_values(PlatformConfig(cluster_name="team-a")) == {
        "controller": {"k8sTagClusterId": "team-a"}
    }


def test_a_volume_tagged_as_configured_is_found_by_the_sweep() -> None:
    """With `k8sTagClusterId` the driver adds `kubernetes.io/cluster/<id>=owned` to its
    `ebs.csi.aws.com/cluster=true`: the sweep's volume rule claims exactly such a volume, and not
    one that carries only the driver's own tag (what volumes got before the add-on was configured)."""
    cluster = "llmctl-dev"
    cluster_id = _ebs_addon_values(PlatformConfig())["controller"]["k8sTagClusterId"]  # type: ignore[index]
    volume = BY_NAME["volume"]
    scope = Scope(cluster, "us-west-2")
    tagged = Candidate(
        "vol-1", "pvc", {"ebs.csi.aws.com/cluster": "true", f"kubernetes.io/cluster/{cluster_id}": "owned"}
    )
    assert (
        volume.owned(scope, tagged) == f"ebs.csi.aws.com/cluster=true, kubernetes.io/cluster/{cluster}=owned"
    )
    untagged = Candidate("vol-2", "pvc", {"ebs.csi.aws.com/cluster": "true"})
    assert volume.owned(scope, untagged) is None
