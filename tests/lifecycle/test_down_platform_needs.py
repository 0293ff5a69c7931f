"""`llmctl down --blueprint X` re-applies the platform it keeps whenever removing X changes what the
workloads' needs decide (infra/lifecycle/shrink.py), not only its pools: a single-node 405B's 600 GiB
root volume (tests/lifecycle/data/blueprints/) goes back to the pool's 500 GiB, KEDA goes with the last queue-scaled (Triton) workload,
X's capacity reservations leave the EC2NodeClass. A root volume or a reservation is in the EC2NodeClass's
hash: Karpenter replaces every node of the pool, the other workloads' too, so `down` says it before it
asks, with the drift lines `up` and `plan` print. Through the stand-in engine: the stacks the `up`s
deployed are the saved state `down` reads. Before this change `down` re-applied the platform only when
the pool set changed: the larger roots and KEDA stayed and were billed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import lifecycle, short
from saved_backend import SavedBackend
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.blueprints.catalog import load_blueprint
from llmctl.blueprints.pools import pool
from llmctl.blueprints.schema import Blueprint, CapacitySpec
from llmctl.cli.app import app
from llmctl.errors import Declined
from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.lifecycle.environment import WorkloadRecord
from llmctl.infra.lifecycle.shrink import KEEP_HINT, deployed_needs, platform_changes
from llmctl.infra.plan.drift_reader import read_drift
from llmctl.infra.platform.manifests import ec2nodeclass_manifest
from llmctl.infra.platform.needs import PlatformNeeds

REGION = "us-west-2"
GPU, TRITON, TINY = "llama2-70b-vllm-gpu", "llama2-triton-vllm-gpu", "tiny-cpu"
# a 405B on ONE node (int8), on the gpu-nvidia pool with the 70B: 600 GiB of root volume
BIG_FILE = str(Path(__file__).parent / "data" / "blueprints" / "llama31-405b-int8-gpu.yaml")
BIG = "llama31-405b-int8-gpu"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::nodepools-gpu-nvidia-nodeclass"
KEDA = "kubernetes:helm.sh/v3:Release::keda-release"
ROOT = "pool gpu-nvidia: root volume 600 GiB -> 500 GiB (the pool's default)"
BUDGET = "Karpenter drift, within the NodePool's budget of 10% of nodes at a time"
DRIFT = [
    "platform llmctl-platform/dev: this `down` changes these Karpenter pools",
    "  pool gpu-nvidia: every node is replaced (EC2NodeClass spec.blockDeviceMappings changed; "
    f"{BUDGET}); serving {GPU} restarts",
    "  (each replacement node is launched and ready before the drifted node drains; a node running a pod "
    "annotated karpenter.sh/do-not-disrupt (a Ray head) stays until that pod leaves)",
]


@pytest.fixture(autouse=True)
def hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The models are gated: a (dummy) token, which only ends up in a Secret of the stand-in."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)


def platform(engine: StandinEngine) -> dict[str, dict[str, Any]]:
    """The platform's saved resources by short name."""
    return {short(urn): res for urn, res in engine.resources(PLATFORM_PROJECT, "dev").items()}


def root_volume(engine: StandinEngine) -> str:
    [root] = platform(engine)[NODECLASS]["inputs"]["spec"]["blockDeviceMappings"]
    return str(root["ebs"]["volumeSize"])


def platform_ups(engine: StandinEngine) -> int:
    return len([op for op in engine.ops() if op[0] == "up" and op[1] == PLATFORM_PROJECT])


def test_down_of_the_405b_blueprint_says_the_drift_then_gives_the_gpu_pool_its_500_gib_back(
    engine: StandinEngine, aws: str
) -> None:
    """The pools stay the same (both blueprints serve on gpu-nvidia): the old `down` kept 600 GiB.
    Declined through the API, then done through the CLI (`down --blueprint --yes --json`: the command
    hands its drift reader down)."""
    lifecycle().up(GPU, region=REGION, wait=False)
    lifecycle().up(BIG_FILE, region=REGION, wait=False)
    assert root_volume(engine) == "600Gi"
    ups = platform_ups(engine)

    # declined: the confirmation listed the update and the nodes it replaces; nothing changed
    listed: list[list[str]] = []
    with pytest.raises(Declined):
        lifecycle(drift=read_drift).down(
            region=REGION, blueprint=BIG, confirm=lambda items: listed.append(items) and False
        )
    assert listed[0][1:] == [
        f"platform stack {PLATFORM_PROJECT}/dev: updated to what the workloads left need "
        f"(pools core, default, ray-head, gpu-nvidia; {GPU} stays)",
        f"  {ROOT}",
        *DRIFT,
        KEEP_HINT,
    ]
    assert engine.deletes() == [] and platform_ups(engine) == ups and root_volume(engine) == "600Gi"

    result = CliRunner().invoke(app, ["down", "-b", BIG, "--yes", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["destroyed"] == [f"llmctl-{BIG}/dev"] and data["updated"] == [f"{PLATFORM_PROJECT}/dev"]
    assert root_volume(engine) == "500Gi" and platform_ups(engine) == ups + 1
    assert data["platform_changes"] == [ROOT]
    assert data["notes"][-3:] == DRIFT  # said with --yes too (the notes `down` prints and its --json)


def test_down_of_the_last_triton_workload_removes_keda(engine: StandinEngine) -> None:
    """Triton (g5) and the 70B (p4de) share the gpu-nvidia pool: only KEDA changes."""
    lifecycle().up(GPU, region=REGION, wait=False)
    lifecycle().up(TRITON, region=REGION, wait=False)
    assert KEDA in platform(engine)
    result = lifecycle().down(region=REGION, blueprint=TRITON, confirm=lambda items: True)
    assert result.platform_changes == [
        "KEDA removed (no workload left scales on its queue; its CRDs go with it, and any ScaledObject left in the cluster)"
    ]
    assert result.updated == [f"{PLATFORM_PROJECT}/dev"] and KEDA not in platform(engine)
    assert "kubernetes:karpenter.sh/v1:NodePool::nodepools-gpu-nvidia-nodepool" in platform(engine)


def test_down_of_a_workload_that_changes_nothing_leaves_the_platform_alone(engine: StandinEngine) -> None:
    """Two workloads of the big blueprint: the 600 GiB stays with the other one, no update."""
    lifecycle().up(BIG_FILE, region=REGION, wait=False, workload="pr-1")
    lifecycle().up(BIG_FILE, region=REGION, wait=False, workload="pr-2")
    ups = platform_ups(engine)
    listed: list[list[str]] = []
    result = lifecycle(drift=read_drift).down(
        region=REGION, workload="pr-1", confirm=lambda items: listed.append(items) or True
    )
    assert listed[0] == [f"workload stack llmctl-{BIG}/dev.pr-1"]
    assert (result.updated, result.platform_changes) == ([], [])
    assert platform_ups(engine) == ups and root_volume(engine) == "600Gi"


def test_a_root_volume_left_by_keep_platform_goes_at_the_next_down_blueprint(engine: StandinEngine) -> None:
    """`down --blueprint 405B --keep-platform` leaves the 600 GiB (as asked); removing tiny-cpu later
    changes nothing the records decide (its pools are the ones every platform has), but the deployed
    EC2NodeClass still carries 600 GiB: read from the platform's state, it goes back to 500."""
    for bp in (GPU, TINY, BIG_FILE):
        lifecycle().up(bp, region=REGION, wait=False)
    kept = lifecycle().down(region=REGION, blueprint=BIG, keep_platform=True, confirm=lambda items: True)
    assert (kept.updated, kept.platform_changes, root_volume(engine)) == ([], [], "600Gi")
    result = lifecycle().down(region=REGION, blueprint=TINY, confirm=lambda items: True)
    assert result.platform_changes == [ROOT] and root_volume(engine) == "500Gi"


# ---- the decision, on records ----------------------------------------------------------------------
def reserved(name: str, reservations: list[Any], fallback: str = "on-demand") -> Blueprint:
    """A catalog blueprint with a `capacity` section (no catalog blueprint has one uncommented)."""
    data = load_blueprint(name).model_dump(mode="json")
    data["capacity"] = {"reservations": reservations, "fallback": fallback}
    return Blueprint.model_validate(data)


def record(bp: Blueprint | str, workload: str | None = None) -> WorkloadRecord:
    return WorkloadRecord.for_blueprint(load_blueprint(bp) if isinstance(bp, str) else bp, workload)


POOLS = [{"name": name} for name in ("core", "default", "ray-head", "gpu-nvidia")]
KEPT = ["core", "default", "ray-head", "gpu-nvidia"]


def test_reservations_of_the_workload_removed_leave_the_pool() -> None:
    mine = record(reserved(BIG_FILE, ["cr-0aaa", {"team": "ml"}]), "a")
    other = record(reserved(GPU, ["cr-0bbb"], fallback="none"), "b")
    assert platform_changes([mine, other], [other], {"node_pools": POOLS}, KEPT) == [
        ROOT,
        'pool gpu-nvidia: capacity reservations no longer selected: cr-0aaa, tags {"team": "ml"}',
    ]
    # the last reservations gone: the NodePool loses the `reserved` capacity type; a shared term stays
    alone = record(reserved(GPU, ["cr-0aaa"]), "c")
    assert platform_changes([alone, record(GPU)], [record(GPU)], {"node_pools": POOLS}, KEPT) == [
        "pool gpu-nvidia: capacity reservations no longer selected: cr-0aaa "
        "(its NodePool no longer allows the reserved capacity type)"
    ]
    twice = record(reserved(GPU, ["cr-0aaa"]), "d")
    assert platform_changes([alone, twice], [twice], {"node_pools": POOLS}, KEPT) == []


def test_pools_and_keda_are_read_from_the_platform_outputs() -> None:
    """A pool or KEDA the platform still has (an older `down` left it) goes too; a pool removed says
    nothing of its root volume (the whole pool goes)."""
    tiny = record(TINY)
    stale = {"node_pools": [*POOLS, {"name": "inferentia-inf2"}], "versions": {"charts": {"keda": "2.17.2"}}}
    assert platform_changes([record(BIG_FILE), tiny], [tiny], stale, ["core", "default", "ray-head"]) == [
        "pool gpu-nvidia removed (no workload left uses it)",
        "pool inferentia-inf2 removed (no workload left uses it)",
        "KEDA removed (no workload left scales on its queue; its CRDs go with it, and any ScaledObject left in the cluster)",
    ]


def test_the_deployed_nodeclasses_are_read_as_the_manifests_write_them() -> None:
    """`deployed_needs` reads back what `ec2nodeclass_manifest` wrote (the platform's saved state):
    a root volume above the pool's default and the reservation terms; the default volume is none."""

    def saved(name: str, **extra: Any) -> dict[str, Any]:
        manifest = ec2nodeclass_manifest(
            pool(name), cluster_name="llmctl-dev", node_role="role", ami_alias="al2023@v1", **extra
        )
        return {"type": "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "custom": True, "inputs": manifest}

    backend = SavedBackend()
    terms = CapacitySpec(reservations=["cr-0aaa", {"team": "ml"}], fallback="on-demand")
    backend.add(
        PLATFORM_PROJECT,
        "dev",
        state=[saved("gpu-nvidia", root_volume_gib=1000, reservations=terms), saved("default")],
    )
    assert deployed_needs(backend, "dev") == PlatformNeeds(  # type: ignore[arg-type]
        {"gpu-nvidia": 1000},
        {"gpu-nvidia": {"reservations": ["cr-0aaa", {"team": "ml"}], "fallback": "none"}},
    )
