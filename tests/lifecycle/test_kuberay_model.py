"""The KubeRay model (kuberay_model.py) against KubeRay v1.7.0's own table tests
(data/kuberay/controller_cases.yaml, ported from rayservice_controller_unit_test.go) and against the
sequences its controller source describes: a second cluster and the switch, nothing under `None`,
worker groups appended in place, serveConfigV2 in place, a deleted active cluster rebuilt, and a
pending cluster whose pods never get nodes."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml
from kuberay_model import (
    DEFAULT_DELETION_DELAY_S,
    Operator,
    RayCluster,
    RayService,
    apply,
    delete_cluster,
    deploy,
    hash_equal,
    spec_hash,
    zero_downtime_enabled,
)

CASES = Path(__file__).parent / "data" / "kuberay" / "controller_cases.yaml"


@functools.cache
def cases() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(CASES.read_text())
    return data


def _set(obj: dict[str, Any], path: list[Any], value: Any) -> None:
    for key in path[:-1]:
        obj = obj[key] if isinstance(key, int) else obj.setdefault(key, {})
    obj[path[-1]] = value


def _cluster(name: str, cluster_spec: dict[str, Any], version: str = "v1.7.0") -> RayCluster:
    """A RayCluster as the tests build it: the hash and worker-group annotations of `cluster_spec`."""
    return RayCluster(
        name=name,
        hash=spec_hash(cluster_spec),
        worker_groups=len(cluster_spec.get("workerGroupSpecs") or []),
        kuberay_version=version,
        spec=copy.deepcopy(cluster_spec),
        launched=True,
    )


# ---- KubeRay's own cases ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", cases()["hash_muting"]["cases"], ids=lambda c: c["name"])
def test_the_hash_mutes_what_kuberay_mutes(case: dict[str, Any]) -> None:
    base = cases()["hash_muting"]["base"]
    changed = copy.deepcopy(base)
    for change in (case["change"], case.get("also")):
        if change:
            _set(changed, change["path"], change["value"])
    assert changed != base
    assert (spec_hash(changed) == spec_hash(base)) is case["equal"]


@pytest.mark.parametrize("case", cases()["hash_equal"]["cases"], ids=lambda c: c["name"])
def test_is_cluster_spec_hash_equal(case: dict[str, Any]) -> None:
    table = cases()["hash_equal"]
    service = copy.deepcopy(table["service"])
    cluster = _cluster("c", service["rayClusterConfig"])
    config = service["rayClusterConfig"]
    if case["diff_replicas"]:
        config["workerGroupSpecs"][0]["replicas"] += 1
    if case["add_group"]:
        config["workerGroupSpecs"].append(copy.deepcopy(table["new_group"]))
    if case["update"]:
        config.update(table["update"])
    assert hash_equal(service, cluster, case["partial"]) is case["expected"]


@pytest.mark.parametrize("case", cases()["should_prepare_new_cluster"]["cases"], ids=lambda c: c["name"])
def test_should_prepare_new_cluster(case: dict[str, Any]) -> None:
    table = cases()["should_prepare_new_cluster"]
    spec = {} if case.get("fresh_service") else copy.deepcopy(table["service_spec"])
    service = RayService(name="test-service", spec=spec)
    old = table["cluster_spec"]
    active = _cluster("active-cluster", old) if case["active"] else None
    pending = _cluster("pending-cluster", old) if case["pending"] else None
    assert Operator().should_prepare(service, active, pending, case["pending_serving"]) is case["expected"]


@pytest.mark.parametrize("case", cases()["zero_downtime"], ids=lambda c: c["name"])
def test_is_zero_downtime_upgrade_enabled(case: dict[str, Any]) -> None:
    strategy = {"type": case["strategy"]} if case["strategy"] is not None else None
    assert zero_downtime_enabled(strategy, case["env"]) is case["expected"]


@pytest.mark.parametrize("case", cases()["reconcile_ray_cluster"], ids=lambda c: c["name"])
def test_reconcile_ray_cluster(case: dict[str, Any]) -> None:
    service = RayService(
        name="test-service",
        spec={},
        active=case["status"].get("active"),
        pending=case["status"].get("pending"),
    )
    for row in case["clusters"]:
        service.clusters[row["name"]] = _cluster(row["name"], {}, row.get("kuberay_version", "v1.7.0"))
    if case.get("add_group"):
        service.spec = {"rayClusterConfig": {"workerGroupSpecs": [case["add_group"]]}}
    active, pending = Operator()._reconcile_clusters(service)
    expect = case["expect"]
    assert (active.name if active else None) == expect["active"]
    assert (pending.name if pending else None) == expect["pending"]
    if "created" in expect:
        assert service.created == expect["created"]
    touched = active or pending
    assert touched is not None
    if "kuberay_version" in expect:
        assert touched.kuberay_version == expect["kuberay_version"]
    if "worker_groups" in expect:
        assert touched.worker_groups == expect["worker_groups"]
        assert len(touched.spec.get("workerGroupSpecs") or []) == expect["worker_groups"]


@pytest.mark.parametrize("case", cases()["deletion_delay"], ids=lambda c: c["name"])
def test_ray_cluster_deletion_delay_seconds(case: dict[str, Any]) -> None:
    spec = {} if case["delay"] is None else {"rayClusterDeletionDelaySeconds": case["delay"]}
    service = RayService(name="test-rayservice", spec=spec)
    service.clusters["test-cluster"] = _cluster("test-cluster", {})
    operator = Operator(now=1000.0)
    operator._clean_up(service)
    assert service.dangling_since["test-cluster"] == 1000.0 + case["expected_s"]
    assert "test-cluster" in service.clusters  # deleted only once the time has passed
    operator.tick(case["expected_s"] + 1)
    operator._clean_up(service)
    assert "test-cluster" not in service.clusters


@pytest.mark.parametrize("case", cases()["upgrade_condition"], ids=lambda c: c["name"])
def test_upgrade_in_progress_condition(case: dict[str, Any]) -> None:
    spec = {"rayClusterConfig": {"rayVersion": "x"}}
    service = RayService(name="s", spec=spec, active=case["active"], pending=case["pending"])
    for name in (case["active"], case["pending"]):
        if name:
            service.clusters[name] = _cluster(name, spec["rayClusterConfig"])
            service.clusters[name].starting = 5  # not ready: the pass changes no name
    Operator().reconcile(service)
    assert service.upgrade_in_progress is case["expected"]


# ---- sequences from the controller source ---------------------------------------------------------
def _spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serveConfigV2": "applications: [{name: app, import_path: a:b}]",
        "rayClusterDeletionDelaySeconds": 60,
        "rayClusterConfig": {
            "rayVersion": "2.58.0",
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "image": "img:1"}]}}},
            "workerGroupSpecs": [
                {
                    "groupName": "inf2",
                    "replicas": 1,
                    "minReplicas": 1,
                    "maxReplicas": 1,
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": "img:1"}]}},
                }
            ],
        },
    }
    for path, value in changes.items():
        _set(spec, path.split("."), value)
    return spec


class Recorder(Operator):
    """An operator that records, after each reconcile, how many RayClusters the RayService owns."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.counts: list[int] = []

    def reconcile(self, service: RayService) -> None:
        super().reconcile(service)
        self.counts.append(len(service.clusters))


def test_a_cluster_spec_change_builds_a_second_cluster_switches_and_deletes_the_old_one() -> None:
    operator = Recorder()
    service = deploy(operator, "llama", _spec())
    [first] = service.created
    assert service.active == first and service.pending is None and service.serving == first
    operator.counts.clear()
    start = operator.now
    apply(
        operator,
        service,
        _spec(
            **{
                "rayClusterConfig.headGroupSpec.template.spec.containers": [
                    {"name": "ray-head", "image": "img:2"}
                ]
            }
        ),
    )
    [_, second] = service.created
    assert service.active == second and service.pending is None and service.serving == second
    assert service.deleted == [first]
    assert max(operator.counts) == 2  # both ran meanwhile
    assert operator.now - start >= DEFAULT_DELETION_DELAY_S  # the old one went after the delay


def test_strategy_none_changes_no_cluster_but_the_serve_config_still_reaches_it() -> None:
    operator = Operator()
    service = deploy(operator, "llama", _spec(**{"upgradeStrategy": {"type": "None"}}))
    [first] = service.created
    old_hash = service.clusters[first].hash
    apply(
        operator,
        service,
        _spec(
            **{
                "upgradeStrategy": {"type": "None"},
                "rayClusterConfig.rayVersion": "2.59.0",
                "serveConfigV2": "new",
            }
        ),
    )
    assert service.created == [first] and service.pending is None
    assert service.clusters[first].hash == old_hash  # the change never reaches the pods
    assert service.clusters[first].serve_config == "new"  # 243-247: served while no new cluster is due


def test_env_false_turns_an_unset_strategy_off() -> None:
    operator = Operator(env_zero_downtime="False")
    service = deploy(operator, "llama", _spec())
    apply(operator, service, _spec(**{"rayClusterConfig.rayVersion": "2.59.0"}))
    assert len(service.created) == 1


def test_replicas_only_and_tolerations_reach_no_cluster() -> None:
    operator = Operator()
    service = deploy(operator, "llama", _spec())
    [first] = service.created
    before = copy.deepcopy(service.clusters[first].spec)
    apply(
        operator,
        service,
        _spec(
            **{
                "rayClusterConfig.workerGroupSpecs": [
                    {**_spec()["rayClusterConfig"]["workerGroupSpecs"][0], "replicas": 3, "maxReplicas": 3}
                ]
            }
        ),
    )
    assert service.created == [first] and service.clusters[first].spec == before
    assert service.clusters[first].updated_in_place == 0


def test_an_appended_worker_group_updates_the_active_cluster_in_place() -> None:
    operator = Operator()
    service = deploy(operator, "llama", _spec())
    [first] = service.created
    groups = _spec()["rayClusterConfig"]["workerGroupSpecs"]
    apply(
        operator,
        service,
        _spec(**{"rayClusterConfig.workerGroupSpecs": [*groups, {"groupName": "more", "replicas": 1}]}),
    )
    assert service.created == [first]
    assert service.clusters[first].updated_in_place == 1 and service.clusters[first].worker_groups == 2
    # an appended group that also changes an old one is a cluster change: a second cluster
    changed = [{**groups[0], "rayStartParams": {"num-cpus": "1"}}, {"groupName": "more", "replicas": 1}]
    apply(operator, service, _spec(**{"rayClusterConfig.workerGroupSpecs": changed}))
    assert len(service.created) == 2


def test_a_serve_config_change_is_submitted_in_place() -> None:
    operator = Operator()
    service = deploy(operator, "llama", _spec())
    [first] = service.created
    apply(operator, service, _spec(serveConfigV2="applications: [{name: app, import_path: a:c}]"))
    assert service.created == [first]
    assert service.clusters[first].serve_config == "applications: [{name: app, import_path: a:c}]"


def test_a_kuberay_version_change_updates_the_active_cluster_in_place() -> None:
    operator = Operator()
    service = deploy(operator, "llama", _spec())
    [first] = service.created
    operator.version = "v1.8.0"
    apply(operator, service, _spec())
    assert service.created == [first] and service.clusters[first].kuberay_version == "v1.8.0"


def test_a_deleted_active_cluster_is_rebuilt_and_the_endpoint_is_down_meanwhile() -> None:
    operator = Recorder()
    service = deploy(operator, "llama", _spec(**{"upgradeStrategy": {"type": "None"}}))
    [first] = service.created
    apply(
        operator,
        service,
        _spec(**{"upgradeStrategy": {"type": "None"}, "rayClusterConfig.rayVersion": "2.59.0"}),
    )
    assert service.created == [first]  # None: nothing yet
    operator.counts.clear()
    delete_cluster(operator, service, first)  # llmctl's replace: delete the active one
    [_, second] = service.created
    assert service.active == second and service.serving == second
    assert service.clusters[second].hash == spec_hash(service.spec["rayClusterConfig"])
    assert max(operator.counts) == 1  # never two


def test_a_pending_cluster_without_nodes_stays_pending_and_the_old_one_serves_on() -> None:
    launches = {"ok": True}
    operator = Operator(can_launch=lambda service, cluster: launches["ok"])
    service = deploy(operator, "llama", _spec())
    [first] = service.created
    launches["ok"] = False  # the vCPU quota holds one node: the second cluster's node never comes
    apply(operator, service, _spec(**{"rayClusterConfig.rayVersion": "2.59.0"}))
    [_, second] = service.created
    assert service.active == first and service.pending == second and service.serving == first
    assert service.upgrade_in_progress and len(service.clusters) == 2
