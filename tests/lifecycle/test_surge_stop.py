"""The launch watch's stop during a surge (issue 51): KubeRay builds a second RayCluster beside the
serving one, and EC2's vCPU quota refuses its node. `up` says what that is: the old cluster still
serves, the pending one (by name) cannot get its nodes and KubeRay keeps it for ever, which of its nodes
bill, and the ways out (`--replace` with its downtime, the quota then `up`; not a rollback).

The cluster's objects are the upgrade in progress of data/kuberay/rayservice_upgrade.json (composed from
KubeRay v1.7.0's source, held to its CRD by tests/conformance/test_recorded_shapes.py), its step 1: the
active cluster serving, the pending one's worker Pending. Karpenter's refusal is the
InsufficientCapacityError event of karpenter_shapes.py (data/karpenter/launch_signals.yaml)."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from karpenter_shapes import capacity_event, fleet_error
from lifecycle_support import lifecycle
from standin_support import StandinEngine
from test_day_two import change_the_code, running_node
from test_launches import _kubeconfig

from llmctl.errors import ServingError
from llmctl.infra.lifecycle.kube import launch_findings, wait_ready
from llmctl.infra.lifecycle.ray_upgrade import read_upgrades
from llmctl.infra.lifecycle.surge_stop import SurgeStop

DATA = Path(__file__).parent / "data" / "kuberay" / "rayservice_upgrade.json"
BP = NS = "llama2-inf2"
OLD, NEW = "llama2-inf2-x7n2k", "llama2-inf2-b4q9z"
INF_QUOTA = "L-1945791B"
REFUSED = capacity_event("inferentia-inf2-x7k2p", fleet_error("vcpu_quota", limit="384"))


def upgrading() -> list[dict[str, Any]]:
    """Step 1 of the recorded upgrade: both clusters named, the pending worker Pending."""
    return list(json.loads(DATA.read_text())["steps"][1])


def test_a_final_finding_during_a_surge_says_what_serves_what_waits_and_the_ways_out(
    engine: StandinEngine, tmp_path: Path
) -> None:
    """Through the readiness wait's launch watch: the pending cluster's head has a node of its own here
    (the recorded one shares the active head's; only the node's name is changed), so it bills."""
    objects = upgrading()
    own = "ip-10-1-2-9.us-west-2.compute.internal"
    [head_node] = [o for o in objects if o["metadata"]["name"] == "ip-10-1-0-37.us-west-2.compute.internal"]
    node = copy.deepcopy(head_node)
    node["metadata"]["name"] = own
    [head] = [o for o in objects if o["metadata"]["name"] == f"{NEW}-head-f9k4d"]
    head["spec"]["nodeName"] = own
    engine.kube(*objects, node, REFUSED)
    kubeconfig = _kubeconfig(tmp_path)
    stop = SurgeStop(
        BP,
        NS,
        (BP,),
        "about 42 min (the last recorded start)",
        read=functools.partial(read_upgrades, kubeconfig, NS),
    )
    with pytest.raises(ServingError) as stopped:
        wait_ready(
            kubeconfig,
            NS,
            timeout_s=1,
            on_wait=lambda text: None,
            poll_s=0.01,
            watch=lambda: launch_findings(
                kubeconfig, NS, region="us-west-2", instance_type="inf2.48xlarge", blueprint=BP
            ),
            explain=stop.error,
        )
    error = stopped.value
    assert error.message == (
        f"the upgrade of {BP} cannot finish: the EC2 vCPU quota refuses inf2.48xlarge (limit 384 vCPUs): "
        f"quota {INF_QUOTA}. The old RayCluster {OLD} still serves {BP}; the pending RayCluster {NEW} of "
        f"RayService {NS}/{BP} cannot get its nodes, 1 pod(s) waiting for a node, and KubeRay keeps it and "
        f"retries for ever while its pods stay Pending. Its nodes that did launch bill meanwhile: {own} "
        "(m5.xlarge, $0.19/h), about $0.19/h in all."
    )
    hint = error.hint or ""
    assert f"--quota-code {INF_QUOTA} --desired-value N --region us-west-2" in hint
    assert "then `llmctl up` again: it waits for the pending cluster until it serves" in hint
    assert (
        "or replace instead: `llmctl up --replace` deletes the running cluster first (downtime: about 42 min "
        "(the last recorded start); the pending cluster takes its nodes)" in hint
    )
    assert (
        "a rollback to the previous code is no way out" in hint
        and "shouldPrepareNewCluster 1419-1436" in hint
    )


def test_up_waiting_on_a_surge_the_quota_refuses_stops_with_the_surge_s_words(
    engine: StandinEngine,
    aws: str,
    ec2_quotas: Callable[[dict[str, float]], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """deploy, code change (the surge fits the quota `up` checks), `up`: KubeRay's pending cluster then
    meets EC2's refusal (another launch took the room meanwhile). The old code said 'the workload in
    namespace llama2-inf2 cannot start', as if nothing served."""
    lifecycle().up(BP, region=aws, wait=False)
    running_node(aws)
    ec2_quotas({INF_QUOTA: 384})  # the surge fits when `up` checks
    change_the_code(tmp_path, monkeypatch)
    engine.kube(*upgrading(), REFUSED)
    with pytest.raises(ServingError) as stopped:
        lifecycle().up(BP, region=aws, wait_timeout_s=60)
    error = stopped.value
    assert error.message.startswith(
        f"the upgrade of {BP} cannot finish: the EC2 vCPU quota refuses inf2.48xlarge (limit 384 vCPUs)"
    ), error.message
    assert (
        f"The old RayCluster {OLD} still serves {BP}; the pending RayCluster {NEW} of RayService {NS}/{BP} "
        "cannot get its nodes, 1 pod(s) waiting for a node, and KubeRay keeps it and retries for ever"
    ) in error.message
    assert error.message.endswith("None of its nodes launched: it bills nothing yet.")
    assert (
        "`llmctl up --replace` deletes the running cluster first (downtime: unknown (no start recorded)"
        in (error.hint or "")
    )


def test_up_replace_after_a_stuck_surge_deletes_the_active_cluster_and_waits_for_the_pending_one(
    engine: StandinEngine, tmp_path: Path
) -> None:
    """`up --replace` while an earlier surge waits (the stop's way out): the RayService's spec is the
    pending cluster's, so llmctl deletes the active cluster; KubeRay promotes the pending one once its
    pods get the freed nodes (steps 1 then 3 of the recorded upgrade)."""
    from llmctl.infra.lifecycle.day_two import DayTwo
    from llmctl.infra.lifecycle.progress import Progress
    from llmctl.infra.lifecycle.upgrade import replace_pending
    from llmctl.infra.workload.scheduling.rollout import Rollout

    steps = json.loads(DATA.read_text())["steps"]
    engine.kube({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": OLD, "namespace": NS}})
    (engine.root / "kube-sequence.json").write_text(
        json.dumps({"advance_on": "RayService", "steps": [steps[1], steps[3]]})
    )
    said: list[str] = []
    progress = Progress("quiet")
    progress.note = said.append  # type: ignore[method-assign]
    # the state already holds the surge's spec: --replace changes upgradeStrategy alone (predict: updated)
    updated = Rollout("updated", f"RayService/{BP}", "upgradeStrategy change on the RayService", "")
    replace_pending(
        progress, _kubeconfig(tmp_path), NS, DayTwo(BP, "replace", [updated]), wait=True, timeout_s=30
    )
    deletes = [json.loads(line) for line in (engine.root / "kube-deletes.jsonl").read_text().splitlines()]
    assert deletes == [["RayCluster", NS, OLD]]
    assert said == [
        f"deleted RayCluster {OLD}: the pending RayCluster {NEW} takes its nodes (downtime until it serves)",
        f"RayService/{BP}: new RayCluster {NEW}",
    ]

    # nothing of a RayService in this change (or nothing deployed): no RayService is read at all
    calls = (engine.root / "kubectl-calls.jsonl").read_text()
    replace_pending(progress, _kubeconfig(tmp_path), NS, None, wait=True, timeout_s=30)
    assert (engine.root / "kubectl-calls.jsonl").read_text() == calls
