"""`llmctl down` through the stand-in engine keeps the order invariants (order_invariants.yaml):
the deletes it records, stack after stack and wave after wave, never remove something while a
resource that needs it still exists; and the engine ran exactly the waves the simulation derives."""

from __future__ import annotations

import pytest
from lifecycle_support import lifecycle, short
from standin_support import StandinEngine

from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT
from llmctl.infra.lifecycle.engine_order import OrderGraph, nodes_from_state
from llmctl.infra.lifecycle.order_invariants import StackGraph, check_recorded_deletes, load_invariants

BP = "llama2-inf2"  # Neuron pools, an internal load balancer, a RayService
WL = f"llmctl-{BP}"


def test_down_records_a_delete_order_that_keeps_every_invariant(
    engine: StandinEngine, aws: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    lifecycle().up(BP, region=aws, wait=False)
    saved = {project: engine.resources(project, "dev") for project in (WL, PLATFORM_PROJECT)}
    graphs = {project: OrderGraph(nodes_from_state(saved[project].values())) for project in saved}
    stacks = {
        WL: StackGraph("workload", f"workload {BP}", graphs[WL]),
        PLATFORM_PROJECT: StackGraph("platform", "platform", graphs[PLATFORM_PROJECT]),
    }

    lifecycle().down(region=aws, confirm=lambda items: True, sweep_timeout_s=30)

    runs = engine.deletes()
    # `up` created, and `down` destroyed, the stacks in the order the invariants file states
    order = load_invariants().stack_order
    ups = [project for command, project, _ in engine.ops() if command == "up"]
    assert [stacks[project].kind for project in ups] == order.create
    assert [(run["project"], run["kind"]) for run in runs] == [(WL, "destroy"), (PLATFORM_PROJECT, "destroy")]
    assert [stacks[run["project"]].kind for run in runs] == order.delete
    # the engine ran the waves the simulation derives from the saved state
    for run in runs:
        assert run["waves"] == graphs[run["project"]].delete_waves()
    recorded = [(stacks[run["project"]], run["waves"]) for run in runs]
    assert [str(v) for v in check_recorded_deletes(recorded)] == []

    # what the invariants protect was really there, in the order they say
    at = {
        short(urn): (i, w)
        for i, run in enumerate(runs)
        for w, wave in enumerate(run["waves"])
        for urn in wave
    }
    nodeclass = at["kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::nodepools-inferentia-inf2-nodeclass"]
    assert nodeclass < at["kubernetes:helm.sh/v3:Release::karpenter-release"]
    assert nodeclass < at["aws:sqs/queue:Queue::karpenter-interruption"]
    for way_out in ("natGateway:NatGateway::network-nat", "routeTableAssociation:RouteTableAssociation::network-nodes-usw2-az1-rta"):  # fmt: skip
        assert at["eks:index:Cluster::cluster-eks"] < at[f"aws:ec2/{way_out}"]
    assert (
        at[f"kubernetes:ray.io/v1:RayService::{BP}/{BP}"] < at["kubernetes:helm.sh/v3:Release::ingress-lbc"]
    )

    # the same deletes with the platform destroyed first break the invariants, naming the resources
    swapped = check_recorded_deletes(list(reversed(recorded)))
    assert any(
        v.invariant == "lb-controller-outlives-load-balancers"
        and f"RayService {BP}/{BP} (workload {BP})" in v.message
        and "Release ingress-lbc (platform)" in v.message
        for v in swapped
    )
    assert any(v.invariant == "kuberay-outlives-ray-services" for v in swapped)
