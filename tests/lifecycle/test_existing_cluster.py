"""`llmctl up --target kubeconfig --pools FILE`: the user's pools, the cluster parts check (a stand-in
`kubectl` on PATH answers from canned JSON) and the workload stack alone (the stand-in `pulumi`)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from lifecycle_support import ready_pod
from standin_support import StandinEngine, kube_objects
from typer.testing import CliRunner

from llmctl import DISTRIBUTION
from llmctl.cli.app import app
from llmctl.errors import BlueprintError, LlmctlError
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.workload.delivery.serving_code import wheel_file
from llmctl.infra.workload.delivery.wheel_parts import part_count
from llmctl.infra.workload.parts import MissingPartsError
from llmctl.infra.workload.prepare.delivery import content_digest
from llmctl.state import list_endpoints, load_endpoint

BP = "llama2-inf2"  # RayService, 12 Neuron devices (my-scheduler), an internal load balancer
WL = f"llmctl-{BP}"

POOLS = {
    "name": "lab",
    "pools": [
        {"name": "cpu", "labels": {"pool": "cpu"}, "instance_types": ["m5.xlarge"]},
        {
            "name": "neuron",
            "labels": {"accel": "inf2"},
            "taints": [{"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}],
            "instance_types": ["inf2.48xlarge"],
        },
    ],
}


def controller(kind: str, namespace: str, name: str, image: str = "registry/x:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
    }


def complete_cluster(engine: StandinEngine, *, svclb: bool = True) -> None:
    """Every part llama2-inf2 needs, the way a k3s cluster with the charts installed shows them, plus
    what KubeRay would make of the workload: a Ready pod and the serve Service with its address."""
    daemonsets = [
        controller(
            "DaemonSet", "kube-system", "neuron-device-plugin", "public.ecr.aws/neuron/neuron-device-plugin:2"
        )
    ]
    if svclb:
        daemonsets.append(
            controller("DaemonSet", "kube-system", "svclb-traefik-4f2a", "rancher/klipper-lb:v0.4")
        )
    engine.kube(
        {"kind": "CustomResourceDefinition", "metadata": {"name": "rayservices.ray.io"}},
        *daemonsets,
        controller("Deployment", "kube-system", "my-scheduler"),
        ready_pod(BP, "llama2-inf2-head"),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"namespace": BP, "name": f"{BP}-serve-svc"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.168.1.50"}]}},
        },
    )


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    kubeconfig = tmp_path / "k3s.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster: {server: 'https://127.0.0.1:6443'}\n"
    )
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(POOLS))
    return kubeconfig, pools


def lifecycle() -> Lifecycle:
    return Lifecycle(Engine(resolve_backend()), Progress("quiet"), stack="dev")


def pulumi_ops(engine: StandinEngine) -> list[tuple[str, str, str]]:
    return [op for op in engine.ops() if op[0] in ("up", "preview", "destroy")]


def test_missing_parts_are_listed_and_nothing_is_deployed(
    engine: StandinEngine, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    engine.kube(controller("Deployment", "kube-system", "coredns"))
    with pytest.raises(MissingPartsError) as info:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    error = info.value
    assert error.message == (
        "cluster lab lacks 4 part(s) blueprint 'llama2-inf2' needs: "
        "kuberay, load-balancer, neuron-device-plugin, neuron-scheduler"
    )
    problems = dict(error.problems)
    assert "helm upgrade --install kuberay-operator" in problems["KubeRay operator (CRD rayservices.ray.io)"]
    assert (
        "RayService/llama2-inf2 (worker group inf2)"
        in problems["Neuron scheduler `my-scheduler` (Deployment)"]
    )
    assert "no workload was deployed" in (error.hint or "")
    assert pulumi_ops(engine) == []
    assert list_endpoints("dev") == []
    # the three inventory queries, all against the given kubeconfig
    queries = [call[2:4] for call in engine.kubectl_calls()]
    assert queries == [["get", "crd"], ["get", "daemonsets"], ["get", "deployments"]]
    assert all(call[:2] == ["--kubeconfig", str(kubeconfig)] for call in engine.kubectl_calls())


def test_declared_parts_are_not_required(engine: StandinEngine, files: tuple[Path, Path]) -> None:
    kubeconfig, pools = files
    complete_cluster(engine, svclb=False)
    data = {**POOLS, "present": ["load-balancer"]}
    pools.write_text(yaml.safe_dump(data))
    result = lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert result.endpoint.target == "kubeconfig" and pulumi_ops(engine) == [("up", WL, "dev")]
    pools.write_text(yaml.safe_dump(POOLS))  # not declared: the missing load balancer is reported
    with pytest.raises(MissingPartsError) as info:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert info.value.message.endswith("needs: load-balancer")


def test_up_with_every_part_deploys_only_the_workload(
    engine: StandinEngine, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    complete_cluster(engine)
    result = lifecycle().up(
        BP,
        region="us-west-2",
        target="kubeconfig",
        kubeconfig=kubeconfig,
        pools=pools,
        confirm=lambda p: True,
    )
    assert pulumi_ops(engine) == [("up", WL, "dev")]  # no platform stack on an existing cluster
    assert result.plan is not None and result.plan.cluster == "lab" and result.plan.changes == {}
    assert [name for name, _ in result.timeline.phases] == ["cluster check", f"workload {BP}", "readiness"]
    endpoint = load_endpoint("dev", BP)
    assert endpoint.target == "kubeconfig" and endpoint.base_url == "http://192.168.1.50:8000/v1"
    assert endpoint.extra["cluster"] == "lab" and endpoint.extra["kubeconfig"] == str(kubeconfig)
    assert_the_wheel_went_in_a_configmap(engine)


def app_parts(engine: StandinEngine) -> dict[str, dict[str, Any]]:
    """The workload stack's ConfigMaps holding the wheel's parts, by URN."""
    return {
        urn: res
        for urn, res in engine.resources(WL, "dev").items()
        if res["type"] == "kubernetes:core/v1:ConfigMap"
        and res["inputs"]["metadata"]["name"].startswith("llmctl-app-")
    }


def assert_the_wheel_went_in_a_configmap(engine: StandinEngine) -> None:
    """The serving code reached the pods in ConfigMaps holding the parts of the wheel `up` built (it is
    over the 1 MiB one ConfigMap holds): no image, no index."""
    objects = kube_objects(engine.resources(WL, "dev"))
    parts = sorted((res["inputs"] for res in app_parts(engine).values()), key=lambda o: o["metadata"]["name"])
    [wheel] = Path(os.environ["LLMCTL_STATE_DIR"], "wheels").glob(f"*/{wheel_file()}")
    digest = content_digest(wheel)
    names = [f"llmctl-app-{digest[:12]}-{i}" for i in range(1, len(parts) + 1)]
    assert [p["metadata"]["name"] for p in parts] == names and wheel.parent.name == digest
    joined = b"".join(base64.b64decode(p["binaryData"][f"part-{i}"]) for i, p in enumerate(parts, 1))
    assert joined == wheel.read_bytes() and len(parts) == part_count(wheel.stat().st_size)
    assert all(p["metadata"]["namespace"] == BP and p["immutable"] is True for p in parts)
    outputs = engine.outputs(WL, "dev")
    assert outputs["delivery"]["mode"] == "configmap" and outputs["delivery"]["wheel_digest"] == digest
    assert outputs["delivery"]["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    [service] = [o for o in objects if o["kind"] == "RayService"]
    text = json.dumps(service)
    sources = json.dumps({"sources": [{"configMap": {"name": name}} for name in names]})
    assert text.count(f'"projected": {sources}') >= 2  # head and workers
    assert f"--no-deps /tmp/llmctl-wheel/{wheel.name}" in text and f"{DISTRIBUTION}==" not in text


def test_the_named_pools_decide_schedulability_before_kubectl_or_pulumi(
    engine: StandinEngine, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    pools.write_text(yaml.safe_dump({"pools": POOLS["pools"][:1]}))  # no Neuron pool
    with pytest.raises(BlueprintError) as info:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert any("no pool of the cluster runs inf2.48xlarge" in text for _, text in info.value.problems)
    assert engine.kubectl_calls() == [] and pulumi_ops(engine) == []


def test_kubeconfig_target_needs_a_pools_file(engine: StandinEngine, files: tuple[Path, Path]) -> None:
    kubeconfig, _ = files
    with pytest.raises(LlmctlError) as info:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig)
    assert "--pools FILE" in info.value.message and "instance_types" in (info.value.hint or "")
    assert pulumi_ops(engine) == []


def test_cli_refuses_pools_without_the_kubeconfig_target(files: tuple[Path, Path]) -> None:
    _, pools = files
    result = CliRunner().invoke(app, ["up", "-b", BP, "--pools", str(pools), "--yes"])
    assert result.exit_code == 2
    assert "--pools applies to --target kubeconfig only" in result.stderr
    assert "--target kubeconfig --kubeconfig FILE" in result.stderr


def test_cli_reports_missing_parts_as_json(engine: StandinEngine, files: tuple[Path, Path]) -> None:
    kubeconfig, pools = files
    args = ["up", "-b", BP, "--target", "kubeconfig", "--kubeconfig", str(kubeconfig), "--pools", str(pools)]
    result = CliRunner().invoke(app, [*args, "--yes", "--json"])
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["error"] == "MissingPartsError"
    paths = [p["path"] for p in report["problems"]]
    assert len(paths) == 4 and paths[0] == "KubeRay operator (CRD rayservices.ray.io)"
    assert "helm upgrade --install" in result.stderr
    assert pulumi_ops(engine) == []


def test_down_on_an_existing_cluster_destroys_only_workloads(
    engine: StandinEngine, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig, pools = files
    complete_cluster(engine)
    lifecycle().up(
        BP,
        region="us-west-2",
        target="kubeconfig",
        kubeconfig=kubeconfig,
        pools=pools,
        confirm=lambda p: True,
    )
    parts = app_parts(engine)
    assert len(parts) >= 2  # the wheel (1029 KiB when the parts came in) in parts
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)  # no AWS needed to tear down a workload on an existing cluster
    result = CliRunner().invoke(app, ["down", "--target", "kubeconfig", "--yes", "--progress", "plain"])
    assert result.exit_code == 0, result.output
    destroyed = [op for op in pulumi_ops(engine) if op[0] == "destroy"]
    assert destroyed == [("destroy", WL, "dev")]  # the workload only: no platform stack, no sweep
    # every part of the wheel deleted with the stack
    deleted = {
        urn for run in engine.deletes() if run["kind"] == "destroy" for wave in run["waves"] for urn in wave
    }
    assert set(parts) <= deleted and app_parts(engine) == {}
    assert list_endpoints("dev") == []
