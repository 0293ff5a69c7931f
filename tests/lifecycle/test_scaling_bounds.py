"""Scaling bounds that KubeRay never carries to a running RayCluster (issue 51), and `up` carrying them.

KubeRay v1.7.0's cluster hash mutes worker groups' replicas/minReplicas/maxReplicas
(ray-operator/controllers/ray/utils/util.go 645-668), so a change of `scaling.max_replicas` alone leaves
the RayCluster as it was (rayservice_controller.go `shouldUpdateCluster` 1351-1377); the Ray
autoscaler reads its bounds from the RayCluster (ray 2.58.0 autoscaler/_private/kuberay/
autoscaling_config.py 204-207). The RayService status and the RayCluster the stand-in kubectl serves
are shaped as KubeRay writes them: `status.activeServiceStatus.rayClusterName` / `pendingServiceStatus`
(ray-operator/apis/ray/v1/rayservice_types.go), and a RayCluster whose spec is the RayService's
`rayClusterConfig` (constructRayClusterForRayService copies it, rayservice_controller.go 1506-1544)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from lifecycle_support import lifecycle
from standin_support import StandinEngine
from typer.testing import CliRunner

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.lifecycle.ray_bounds import PLAN_LINE, GroupBounds, patch_ops, wanted_bounds
from llmctl.infra.workload.scheduling.rollout import Rollout, cluster_hash, predict

BP = "tiny-cpu"
WL = f"llmctl-{BP}"


def group(name: str, replicas: int | None, low: int, high: int) -> dict[str, Any]:
    found: dict[str, Any] = {"groupName": name, "minReplicas": low, "maxReplicas": high, "template": {}}
    if replicas is not None:
        found["replicas"] = replicas
    return found


def cluster(*groups: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "RayCluster", "spec": {"workerGroupSpecs": list(groups)}}


# ---- the pure rule ---------------------------------------------------------------------------------
def test_a_raised_max_is_patched_with_the_group_tested_first_and_replicas_left_to_the_autoscaler() -> None:
    ops, said = patch_ops(cluster(group("a", 1, 1, 2), group("b", 2, 1, 3)), [GroupBounds("rs", "b", 1, 5)])
    assert ops == [
        {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "b"},
        {"op": "add", "path": "/spec/workerGroupSpecs/1/maxReplicas", "value": 5},
    ]
    assert said == ["b: maxReplicas 3 -> 5"]


def test_bounds_that_exclude_the_running_replicas_clamp_them() -> None:
    ops, said = patch_ops(cluster(group("g", 3, 1, 4)), [GroupBounds("rs", "g", 0, 2)])
    assert [op["path"].rsplit("/", 1)[1] for op in ops] == [
        "groupName",
        "minReplicas",
        "maxReplicas",
        "replicas",
    ]
    assert said == ["g: minReplicas 1 -> 0, maxReplicas 4 -> 2, replicas 3 -> 2"]
    ops, said = patch_ops(cluster(group("g", None, 1, 4)), [GroupBounds("rs", "g", 2, 4)])
    assert said == ["g: minReplicas 1 -> 2, replicas 0 -> 2"]  # absent: the CRD default, 0


def test_a_cluster_that_has_the_bounds_or_an_unknown_group_is_not_patched() -> None:
    assert patch_ops(cluster(group("g", 2, 1, 3)), [GroupBounds("rs", "g", 1, 3)]) == ([], [])
    assert patch_ops(cluster(group("g", 2, 1, 3)), [GroupBounds("rs", "other", 1, 9)]) == ([], [])


def _rayservice(high: int, command: str = "serve") -> dict[str, Any]:
    return {
        "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "ns"},
        "spec": {
            "upgradeStrategy": {"type": "NewCluster"},
            "rayClusterConfig": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"command": [command]}]}}},
                "workerGroupSpecs": [group("g", 1, 1, high)],
            },
        },
    }


def test_bounds_are_carried_only_where_kubernetes_does_not_write_the_new_spec_itself() -> None:
    old, moved = [_rayservice(2)], [_rayservice(4)]
    rollouts = predict(old, moved, strategy="surge")
    assert [r.kind for r in rollouts] == ["unchanged"]
    [bounds] = wanted_bounds(old, moved, rollouts)
    assert (bounds.max_replicas, bounds.was_max_replicas, bounds.moved) == (4, 2, True)
    assert bounds.text() == "worker group g: maxReplicas 2 -> 4"
    rebuilt = [_rayservice(4, command="serve --new")]  # a cluster change: the new cluster has the bounds
    assert wanted_bounds(old, rebuilt, predict(old, rebuilt, strategy="surge")) == []
    replaced = [Rollout("replace-cluster", "RayService/rs", "", "")]
    assert wanted_bounds(old, moved, replaced) == []


def test_a_saved_state_s_float_numbers_hash_as_the_rendered_ints() -> None:
    """The stand-in's state (and Pulumi's property values) hold numbers as float64: 600.0 is KubeRay's
    int32 600, so the same spec read back from state is not a cluster change."""
    rendered = _rayservice(2)
    rendered["spec"]["rayClusterConfig"]["autoscalerOptions"] = {"idleTimeoutSeconds": 600}
    saved = copy.deepcopy(rendered)
    saved["spec"]["rayClusterConfig"]["autoscalerOptions"]["idleTimeoutSeconds"] = 600.0
    assert cluster_hash(saved) == cluster_hash(rendered)
    assert predict([saved], [rendered], strategy="surge") == []
    saved["spec"]["rayClusterConfig"]["autoscalerOptions"]["idleTimeoutSeconds"] = 600.5
    assert cluster_hash(saved) != cluster_hash(rendered)


# ---- the sequence: deploy, max_replicas up, plan, up ----------------------------------------------
def _deployed_rayservice(engine: StandinEngine) -> dict[str, Any]:
    [found] = [
        res["inputs"]
        for res in engine.resources(WL, "dev").values()
        if res["type"] == "kubernetes:ray.io/v1:RayService"
    ]
    return dict(found)


def test_max_replicas_up_reaches_the_running_raycluster(
    engine: StandinEngine, aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.cli.app import app

    path = tmp_path / f"{BP}.yaml"
    data = yaml.safe_load(load_blueprint(BP).model_dump_json())
    path.write_text(yaml.safe_dump(data))
    lifecycle().up(str(path), region=aws, wait=False)

    # KubeRay made the active cluster from the RayService's rayClusterConfig (and named it in the status)
    deployed = _deployed_rayservice(engine)
    [worker] = deployed["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert (worker["minReplicas"], worker["maxReplicas"]) == (1, 2)
    active = f"{BP}-raycluster-x2f9k"
    engine.kube(
        {
            "kind": "RayService",
            "metadata": {"name": BP, "namespace": BP},
            "status": {"activeServiceStatus": {"rayClusterName": active}},
        },
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": active, "namespace": BP},
            "spec": copy.deepcopy(deployed["spec"]["rayClusterConfig"]),
        },
    )

    data["scaling"]["max_replicas"] = 4
    path.write_text(yaml.safe_dump(data))

    plan = CliRunner().invoke(app, ["plan", "-b", str(path), "--region", aws])
    assert plan.exit_code == 0, plan.output
    assert f"1. RayService/{BP}: unchanged: only fields KubeRay leaves out of its cluster hash" in plan.stdout
    assert (
        f"RayService/{BP}: {PLAN_LINE} (worker group {worker['groupName']}: maxReplicas 2 -> 4)"
        in plan.stdout
    )
    as_json = CliRunner().invoke(app, ["plan", "-b", str(path), "--region", aws, "--json"])
    [found] = json.loads(as_json.stdout)["rollouts"]
    assert found["bounds"] == [
        {
            "rayservice": BP,
            "group": worker["groupName"],
            "min_replicas": 1,
            "max_replicas": 4,
            "was_min_replicas": 1,
            "was_max_replicas": 2,
        }
    ]

    said: list[str] = []
    progress = Progress("quiet")
    monkeypatch.setattr(progress, "note", said.append)
    lifecycle(progress).up(str(path), region=aws, wait=False)
    assert _deployed_rayservice(engine)["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["maxReplicas"] == 4
    patches = [json.loads(line) for line in (engine.root / "kube-patches.jsonl").read_text().splitlines()]
    assert patches == [
        [
            "RayCluster",
            BP,
            active,
            "json",
            [
                {"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": worker["groupName"]},
                {"op": "add", "path": "/spec/workerGroupSpecs/0/maxReplicas", "value": 4},
            ],
        ]
    ]
    [live] = [o for o in json.loads((engine.root / "kube.json").read_text()) if o["kind"] == "RayCluster"]
    assert live["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 4
    assert any(
        line.startswith(f"patched the active RayCluster {active} of RayService {BP} ") for line in said
    ), said

    # the next up finds the cluster with the bounds: nothing more to patch
    lifecycle().up(str(path), region=aws, wait=False)
    assert len((engine.root / "kube-patches.jsonl").read_text().splitlines()) == 1
