"""Existing clusters (target kubeconfig): the cluster file, its facts, render/validate with `--pools`,
and the pure "which platform parts are missing" decision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner
from workload_helpers import blueprint, find, worker

from llmctl.blueprints.versions import versions
from llmctl.cli.app import app
from llmctl.errors import BlueprintError, LlmctlError
from llmctl.infra.workload.cluster import load_cluster_file, parse_cluster_file
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.parts import (
    Controller,
    Inventory,
    MissingPartsError,
    Need,
    missing_parts,
    required_parts,
)

runner = CliRunner()

POOLS = {
    "pools": [
        {"name": "cpu", "labels": {"pool": "cpu"}, "instance_types": ["m5.xlarge"]},
        {
            "name": "gpu",
            "labels": {"pool": "gpu"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "instance_types": ["g5.2xlarge"],
        },
        {
            "name": "neuron",
            "labels": {"accel": "inf2"},
            "taints": ["aws.amazon.com/neuron:NoSchedule"],
            "instance_types": ["inf2.48xlarge", "inf2.8xlarge"],
        },
    ]
}


def write(tmp_path: Path, data: Any, name: str = "pools.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


# --- the cluster file --------------------------------------------------------------------------------


def test_cluster_file_becomes_existing_pools(tmp_path: Path) -> None:
    kubeconfig = write(tmp_path, "apiVersion: v1\nkind: Config\n", "k3s-lab.yaml")
    facts = PlatformFacts.for_existing_cluster(write(tmp_path, POOLS), kubeconfig=kubeconfig, stack="dev")
    assert facts.target == "kubeconfig" and facts.cluster_name == "k3s-lab"
    assert facts.kubeconfig == "apiVersion: v1\nkind: Config\n"
    assert facts.cache_bucket is None and facts.ecr_registry is None
    assert [p.name for p in facts.pools] == ["cpu", "gpu", "neuron"]
    assert {p.managed_by for p in facts.pools} == {"existing"}
    neuron = facts.pools[2]
    assert (neuron.taints[0].key, neuron.taints[0].effect) == ("aws.amazon.com/neuron", "NoSchedule")
    assert neuron.node_labels() == {"accel": "inf2"}  # no Karpenter label on an existing pool
    assert not neuron.device_ownership  # undeclared: the host's device owner, so Neuron pods stay root


def test_cluster_file_declares_device_ownership(tmp_path: Path) -> None:
    """Issue 53: a pool whose containerd gives devices to the pod's user runs Neuron pods as non-root."""
    pools = [dict(row) for row in POOLS["pools"]]
    pools[2]["device_ownership"] = True
    facts = PlatformFacts.for_existing_cluster(write(tmp_path, {"pools": pools}))
    assert [p.device_ownership for p in facts.pools] == [False, False, True]
    pools[2]["device_ownership"] = "sometimes"
    with pytest.raises(BlueprintError) as info:
        load_cluster_file(write(tmp_path, {"pools": pools}))
    assert list(dict(info.value.problems)) == ["pools.2.device_ownership"]


def test_cluster_name_and_present_parts(tmp_path: Path) -> None:
    data = {**POOLS, "name": "lab", "present": ["load-balancer"]}
    facts = PlatformFacts.for_existing_cluster(write(tmp_path, data))
    assert facts.cluster_name == "lab" and facts.present_parts == ["load-balancer"]


def test_typos_name_the_field_path_and_the_closest_name(tmp_path: Path) -> None:
    data = {
        "pools": [
            {"name": "cpu", "lables": {"pool": "cpu"}, "instance_types": ["m5.xlarge", "m5.xlarg"]},
            {"name": "gpu", "instance_types": ["g5.2xlarge"], "taints": [{"key": "x", "effect": "Never"}]},
        ],
        "presnt": [],
    }
    with pytest.raises(BlueprintError) as info:
        load_cluster_file(write(tmp_path, data))
    problems = dict(info.value.problems)
    assert str(tmp_path / "pools.yaml") in info.value.message and info.value.source
    assert problems["pools.0.lables"] == "unknown field; did you mean 'labels'?"
    assert "did you mean 'm5.xlarge'" in problems["pools.0.instance_types.1"]
    assert "pools.1.taints.0.effect" in problems
    assert problems["presnt"] == "unknown field; did you mean 'present'?"
    assert "llmctl catalog instances" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("pools: [", "not valid YAML at line"),
        ("- a\n- b\n", "must be a YAML mapping"),
        ("pools: []\n", "pools"),
        (
            "pools: [{name: a, instance_types: [m5.xlarge]}, {name: a, instance_types: [m5.large]}]",
            "more than once",
        ),
        ("pools: [{name: a}]", "pools.0.instance_types"),
        ("pools: [{name: a, instance_types: [m5.large]}]\npresent: [karpenter]", "present.0"),
    ],
)
def test_bad_files_fail_cleanly(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(BlueprintError) as info:
        parse_cluster_file(text, "pools.yaml")
    assert words in info.value.message + " ".join(f"{p} {m}" for p, m in info.value.problems)


def test_missing_file_and_missing_flag_say_how_to_describe_pools(tmp_path: Path) -> None:
    with pytest.raises(BlueprintError) as info:
        load_cluster_file(tmp_path / "nope.yaml")
    assert "does not exist" in info.value.message and "instance_types" in (info.value.hint or "")
    with pytest.raises(LlmctlError) as flag:
        PlatformFacts.for_existing_cluster(None)
    assert "--pools FILE" in flag.value.message and "pools: [{name: cpu" in (flag.value.hint or "")


# --- render and validate with --pools ----------------------------------------------------------------


def test_render_uses_the_named_pools(tmp_path: Path) -> None:
    pools = write(tmp_path, POOLS)
    result = runner.invoke(app, ["render", "-b", "llama2-triton-vllm-gpu", "--pools", str(pools)])
    assert result.exit_code == 0, result.output
    [deployment] = [d for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "operator": "Exists"}]
    result = runner.invoke(app, ["render", "-b", "llama2-inf2", "--pools", str(pools), "--json"])
    objects = [d for d in yaml.safe_load_all(json.loads(result.stdout)["yaml"]) if d]
    rs = find(objects, "RayService")["spec"]["rayClusterConfig"]
    assert rs["headGroupSpec"]["template"]["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert worker(objects)["template"]["spec"]["nodeSelector"] == {"accel": "inf2"}
    assert not [o for o in objects if o["kind"] == "Job"]  # no cache bucket on an existing cluster


def test_validate_with_pools_passes_and_fails(tmp_path: Path) -> None:
    pools = write(tmp_path, POOLS)
    result = runner.invoke(app, ["validate", "-b", "llama2-inf2", "--pools", str(pools), "--json"])
    assert result.exit_code == 0, result.output
    assert [p["name"] for p in json.loads(result.stdout)["pools"]] == ["cpu", "gpu", "neuron"]
    only_cpu = write(tmp_path, {"pools": POOLS["pools"][:1]}, "cpu.yaml")
    result = runner.invoke(app, ["validate", "-b", "llama2-70b-vllm-gpu", "--pools", str(only_cpu)])
    assert result.exit_code == 2
    wanted = blueprint("llama2-70b-vllm-gpu").compute.instance_type
    assert f"no pool of the cluster runs {wanted} (pools: cpu)" in result.stderr


def test_validate_sizes_requests_against_the_named_instance_type(tmp_path: Path) -> None:
    from llmctl.blueprints._data import data_file

    text = data_file("catalog", "tiny-cpu.yaml").read_text()
    assert "cpus_per_replica: 2" in text
    whole_node = write(tmp_path, text.replace("cpus_per_replica: 2", "cpus_per_replica: 4"), "whole.yaml")
    cpu_pool = write(tmp_path, {"pools": POOLS["pools"][:1]}, "cpu.yaml")
    result = runner.invoke(app, ["validate", "-b", str(whole_node), "--pools", str(cpu_pool), "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 2 and not report["ok"]
    [problem] = report["problems"]
    assert "cpu 4 > 3.44 allocatable on m5.xlarge (pool 'cpu'" in problem["message"]


def test_bad_pools_file_is_a_clean_cli_error(tmp_path: Path) -> None:
    bad = write(tmp_path, {"pools": [{"name": "cpu", "instance_types": ["m5.xlarg"]}]})
    result = runner.invoke(app, ["validate", "-b", "tiny-cpu", "--pools", str(bad)])
    assert result.exit_code == 2
    assert "pools.0.instance_types.0" in result.stderr and "did you mean 'm5.xlarge'" in result.stderr


# --- which parts a workload needs, which are missing (pure) ------------------------------------------


def manifests_on(name: str, tmp_path: Path, **exposure: Any) -> list[dict[str, Any]]:
    bp = blueprint(name)
    if exposure:
        bp = bp.model_copy(update={"exposure": bp.exposure.model_copy(update=exposure)})
    facts = PlatformFacts.for_existing_cluster(write(tmp_path, POOLS))
    return build_manifests(WorkloadConfig(blueprint=bp, platform=facts), hf_token=None)


def test_required_parts_follow_the_workload_objects(tmp_path: Path) -> None:
    parts = {n.part: n.reason for n in required_parts(manifests_on("llama2-inf2", tmp_path))}
    assert set(parts) == {"kuberay", "neuron-device-plugin", "neuron-scheduler", "load-balancer"}
    assert parts["kuberay"] == "RayService/llama2-inf2"
    assert parts["neuron-scheduler"] == "RayService/llama2-inf2 (worker group inf2)"
    assert "type LoadBalancer" in parts["load-balancer"]
    port_forward = manifests_on("llama2-inf2", tmp_path, mode="port-forward")
    assert "load-balancer" not in {n.part for n in required_parts(port_forward)}
    assert {n.part for n in required_parts(manifests_on("llama3-vllm-inf2", tmp_path))} == {
        "kuberay",
        "neuron-device-plugin",
    }  # one device per replica: no Neuron scheduler
    assert {n.part for n in required_parts(manifests_on("llama2-triton-vllm-gpu", tmp_path))} == {
        "nvidia-device-plugin"
    }
    assert {n.part for n in required_parts(manifests_on("tiny-cpu", tmp_path))} == {"kuberay"}


def ds(namespace: str, name: str, *images: str) -> Controller:
    return Controller(namespace, name, images)


ALL_NEEDS = [
    Need("kuberay", "RayService/x"),
    Need("neuron-device-plugin", "RayService/x (worker group inf2)"),
    Need("neuron-scheduler", "RayService/x (worker group inf2)"),
    Need("nvidia-device-plugin", "Deployment/y (pod)"),
    Need("load-balancer", "Service/x (type LoadBalancer)"),
]


def test_an_empty_cluster_lacks_everything_with_pinned_install_commands() -> None:
    missing = {m.part: m for m in missing_parts(ALL_NEEDS, Inventory())}
    assert list(missing) == [n.part for n in ALL_NEEDS]
    charts = versions().charts
    assert f"--version {charts['kuberay_operator'].version}" in missing["kuberay"].install
    assert charts["kuberay_operator"].repository in missing["kuberay"].install
    assert "oci://public.ecr.aws/neuron/neuron-helm-chart" in missing["neuron-device-plugin"].install
    assert "scheduler.customScheduler.enabled=true" in missing["neuron-scheduler"].install
    assert f"--version {charts['nvidia_device_plugin'].version}" in missing["nvidia-device-plugin"].install
    lb = missing["load-balancer"].install
    assert f"--version {charts['aws_load_balancer_controller'].version}" in lb and "port-forward" in lb
    assert missing["neuron-scheduler"].as_dict()["needed_by"] == ["RayService/x (worker group inf2)"]


def test_a_complete_eks_like_cluster_lacks_nothing() -> None:
    inventory = Inventory.from_lists(
        {"items": [{"metadata": {"name": "rayservices.ray.io"}}]},
        {
            "items": [
                {
                    "metadata": {"namespace": "kube-system", "name": "neuron-device-plugin"},
                    "spec": {"template": {"spec": {"containers": [{"image": "public.ecr.aws/neuron/x:1"}]}}},
                },
                {
                    "metadata": {"namespace": "gpu-operator", "name": "plugin"},
                    "spec": {
                        "template": {
                            "spec": {"containers": [{"image": "nvcr.io/nvidia/k8s-device-plugin:v0.20"}]}
                        }
                    },
                },
            ]
        },
        {
            "items": [
                {"metadata": {"namespace": "kube-system", "name": "my-scheduler"}},
                {"metadata": {"namespace": "kube-system", "name": "aws-load-balancer-controller"}},
            ]
        },
    )
    assert missing_parts(ALL_NEEDS, inventory) == []


@pytest.mark.parametrize(
    "inventory",
    [
        Inventory(daemonsets=(ds("kube-system", "svclb-traefik-1a2b"),)),  # k3s servicelb
        Inventory(deployments=(ds("metallb-system", "controller"),)),
        Inventory(crds=frozenset({"ciliumloadbalancerippools.cilium.io"})),
    ],
)
def test_other_load_balancer_implementations_count(inventory: Inventory) -> None:
    assert missing_parts([Need("load-balancer", "Service/x")], inventory) == []


def test_declared_parts_are_not_checked_and_look_alikes_do_not_count() -> None:
    needs = [Need("load-balancer", "Service/x"), Need("neuron-scheduler", "RayService/x")]
    look_alikes = Inventory(
        deployments=(ds("kube-system", "neuron-scheduler"),)
    )  # the extension, not my-scheduler
    assert [m.part for m in missing_parts(needs, look_alikes, present=["load-balancer"])] == [
        "neuron-scheduler"
    ]


def test_missing_parts_error_lists_every_part() -> None:
    error = MissingPartsError("lab", "llama2-inf2", missing_parts(ALL_NEEDS[:2], Inventory()))
    assert (
        error.message
        == "cluster lab lacks 2 part(s) blueprint 'llama2-inf2' needs: kuberay, neuron-device-plugin"
    )
    assert [path for path, _ in error.problems] == [
        "KubeRay operator (CRD rayservices.ray.io)",
        "Neuron device plugin (DaemonSet)",
    ]
    assert all("install: helm upgrade --install" in text for _, text in error.problems)
    assert error.exit_code == 3 and "no workload was deployed" in (error.hint or "")
