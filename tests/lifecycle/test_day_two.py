"""Day two (issue 51), through the stand-in engine and a moto account: llama2-inf2 is deployed, the
code changes, and `plan` says KubeRay's zero-downtime upgrade needs a second inf2.48xlarge with its
cost and the quota's verdict; `up` refuses it with the quota's numbers before changing anything;
`up --replace` goes ahead with the downtime stated, deletes the active RayCluster after the update
and waits for KubeRay's new one.

The RayService status the stand-in kubectl serves is shaped as KubeRay v1.7.0 writes it
(ray-operator/apis/ray/v1/rayservice_types.go: `status.activeServiceStatus.rayClusterName`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lifecycle_support import changed_code, lifecycle, ready_pod
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.blueprints.hardware import hardware
from llmctl.errors import PrerequisiteError
from llmctl.infra.aws.session import new_session

BP = "llama2-inf2"
WL = f"llmctl-{BP}"
INF_QUOTA = "L-1945791B"
PRICE = hardware().instance("inf2.48xlarge").on_demand_usd


def running_node(region: str) -> None:
    """The serving node of the deployed cluster, as Karpenter launched and tagged it."""
    ec2 = new_session(region).client("ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.run_instances(
        ImageId=image,
        InstanceType="inf2.48xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "karpenter.sh/nodepool", "Value": "inferentia-inf2"},
                    {"Key": "eks:eks-cluster-name", "Value": "llmctl-dev"},
                ],
            }
        ],
    )


def change_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The next build of llmctl's wheel has one more module (as a code change makes it); its S3 key."""
    from llmctl.infra.workload.prepare import delivery as deploy_delivery

    changed = changed_code(deploy_delivery.build_wheel(tmp_path / "built"), tmp_path, monkeypatch)
    return f"llmctl/wheels/{deploy_delivery.content_digest(changed)}/{changed.name}"


def rayservice(engine: StandinEngine) -> dict[str, Any]:
    [found] = [
        res["inputs"]
        for res in engine.resources(WL, "dev").values()
        if res["type"] == "kubernetes:ray.io/v1:RayService"
    ]
    return dict(found)


def test_a_code_change_on_a_deployed_inf2_stack_is_planned_refused_then_replaced(
    engine: StandinEngine,
    aws: str,
    ec2_quotas: Callable[[dict[str, float]], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llmctl.cli.app import app

    lifecycle().up(BP, region=aws, wait=False)
    deployed = rayservice(engine)
    assert deployed["spec"]["upgradeStrategy"] == {"type": "NewCluster"}  # surge, rendered explicitly
    running_node(aws)
    ec2_quotas({INF_QUOTA: 192})  # room for one inf2.48xlarge: the one running
    key = change_the_code(tmp_path, monkeypatch)

    # plan: the second cluster, its node, its cost, the quota's verdict
    result = CliRunner().invoke(app, ["plan", "-b", BP, "--region", aws, "--json"])
    assert result.exit_code == 0, result.output
    [found] = json.loads(result.stdout)["rollouts"]
    # the platform stack was read and compared: the one `up` deployed is the one planned, no node drifts
    exports = {Path(c["cwd"]).name for c in engine.calls() if c["command"] == "stack export"}
    assert "llmctl-platform" in exports and json.loads(result.stdout)["drift"] == []
    [cluster] = found["rollouts"]
    assert (cluster["kind"], cluster["object"]) == ("new-cluster", f"RayService/{BP}")
    assert (cluster["extra_nodes"], cluster["instance_type"]) == (1, "inf2.48xlarge")
    assert cluster["extra_usd_per_hour"] == round(PRICE, 4) and found["extra_nodes"] == {"inf2.48xlarge": 1}
    quota = next(c for c in found["capacity"] if c["name"].startswith(f"vCPU quota {INF_QUOTA}"))
    assert quota["ok"] is False and found["fits"] is False
    assert (
        "192 vCPUs (applied); running 192 (1 instance(s)) + 1 x inf2.48xlarge (192) = 384" in quota["detail"]
    )
    assert f"--quota-code {INF_QUOTA} --desired-value 384" in quota["fix"]
    limits = next(c for c in found["capacity"] if c["name"].startswith("NodePool inferentia-inf2"))
    assert limits["ok"] is True and "aws.amazon.com/neuron 24 of 72" in limits["detail"]
    assert any(line.startswith(f"the llmctl wheel s3://cache-bucket/{key}") for line in found["uploads"])
    text = CliRunner().invoke(app, ["plan", "-b", BP, "--region", aws])
    assert text.exit_code == 0, text.output
    assert f"1. RayService/{BP}: new-cluster: the cluster spec changed" in text.stdout
    assert f"+1 x inf2.48xlarge while both run: ${PRICE:,.2f}/h more" in text.stdout
    assert f"vCPU quota {INF_QUOTA} (upgrade): REFUSED" in text.stdout

    # up: refused with the quota's numbers before anything changed
    state = engine.resources(WL, "dev")
    ups = [op for op in engine.ops() if op[0] == "up"]
    with pytest.raises(PrerequisiteError) as refused:
        lifecycle().up(BP, region=aws, wait=False, confirm=lambda plan: pytest.fail("asked"))
    assert "needs 1 more inf2.48xlarge while the old and new pods both run" in refused.value.message
    assert "= 384 needed" in refused.value.message and "nothing was changed" in refused.value.message
    assert "--desired-value 384" in (refused.value.hint or "") and "llmctl up --replace" in (
        refused.value.hint or ""
    )
    assert engine.resources(WL, "dev") == state and [op for op in engine.ops() if op[0] == "up"] == ups

    # up --replace: the downtime stated before it asks; the active cluster deleted; the new one waited for
    old_cluster, new_cluster = f"{BP}-raycluster-4x7kq", f"{BP}-raycluster-9m2lt"
    engine.kube(
        ready_pod(BP, "llama2-inf2-raycluster-9m2lt-inf2-worker-abcde"),
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": old_cluster, "namespace": BP}},
    )

    def status(active: str) -> list[dict[str, Any]]:
        meta = {"name": BP, "namespace": BP}
        return [
            {
                "kind": "RayService",
                "metadata": meta,
                "status": {"activeServiceStatus": {"rayClusterName": active}},
            }
        ]

    (engine.root / "kube-sequence.json").write_text(
        json.dumps({"advance_on": "RayService", "steps": [status(old_cluster), status(new_cluster)]})
    )
    asked: list[list[str]] = []

    def confirm(plan: Any) -> bool:
        asked.append(plan.summary())
        return True

    result_up = lifecycle().up(BP, region=aws, replace=True, confirm=confirm, wait_timeout_s=60)
    [lines] = asked
    assert any(f"RayService/{BP}: replace-cluster:" in line for line in lines)
    assert (
        "  downtime: unknown (no start recorded): the new pods' node launch, image pull, weights and compile"
        in lines
    )
    assert not any("REFUSED" in line for line in lines)  # replace needs no extra node: no quota check
    assert rayservice(engine)["spec"]["upgradeStrategy"] == {"type": "None"}
    assert key in json.dumps(rayservice(engine)["spec"]["rayClusterConfig"])
    deletes = [json.loads(line) for line in (engine.root / "kube-deletes.jsonl").read_text().splitlines()]
    assert deletes == [["RayCluster", BP, old_cluster]]
    assert result_up.plan is not None
    carried = result_up.plan.to_dict()["rollouts"]  # `up --json`: plan.rollouts
    assert (carried["strategy"], carried["fits"], carried["extra_nodes"]) == ("replace", True, {})
    # the cluster replaced; the RayService's upgradeStrategy NewCluster -> None restarts nothing
    assert [r["kind"] for r in carried["rollouts"]] == ["replace-cluster", "updated"]
    assert carried["rollouts"][1]["text"] == "upgradeStrategy change on the RayService: no pod restarts"
    phases = [name for name, _ in result_up.timeline.phases]
    assert (
        phases.index(f"workload {BP}") < phases.index(f"replace RayService/{BP}") < phases.index("readiness")
    )


def test_replace_is_refused_where_there_is_no_deployed_workload_to_replace() -> None:
    from llmctl.cli.app import app

    result = CliRunner().invoke(app, ["up", "-b", "tiny-cpu", "--target", "local", "--replace", "--yes"])
    assert result.exit_code == 2, result.output
    assert "--replace does not apply to --target local" in result.stderr
