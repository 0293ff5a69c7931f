"""`llmctl up --target kubeconfig --pools FILE`: the user's pools, the cluster parts check (a stand-in
`kubectl` on PATH answers from canned JSON) and the workload stack alone (the stand-in `pulumi`)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from lifecycle_support import FakePulumi
from typer.testing import CliRunner

from llmctl.cli.app import app
from llmctl.errors import BlueprintError, LlmctlError
from llmctl.infra.lifecycle.backend import resolve_backend
from llmctl.infra.lifecycle.engine import Engine
from llmctl.infra.lifecycle.orchestrate import Lifecycle
from llmctl.infra.lifecycle.progress import Progress
from llmctl.infra.workload.parts import MissingPartsError
from llmctl.state import list_endpoints, load_endpoint

BP = "llama2-inf2"  # RayService, 12 Neuron devices (my-scheduler), an internal load balancer
WL = f"llmctl-{BP}"

# kubectl [--kubeconfig F] <verb> <resource> [...] -o json: answers from $FAKE_KUBECTL_DIR/<resource>.json
KUBECTL = """
import json, os, sys
from pathlib import Path
root = Path(os.environ["FAKE_KUBECTL_DIR"])
args = sys.argv[1:]
with (root / "calls.jsonl").open("a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["version", "--client"]:
    print(json.dumps({"clientVersion": {"gitVersion": "v1.35.0"}}))
    sys.exit(0)
if args[:1] == ["--kubeconfig"]:
    args = args[2:]
resource = args[1] if len(args) > 1 else ""
path = root / f"{resource}.json"
print(path.read_text() if path.exists() else json.dumps({"items": []}))
"""

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


def items(*objects: dict[str, Any]) -> dict[str, Any]:
    return {"items": list(objects)}


def controller(namespace: str, name: str, image: str = "registry/x:1") -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}},
    }


class FakeKubectl:
    def __init__(self, root: Path) -> None:
        self.root = root

    def answer(self, resource: str, data: dict[str, Any]) -> None:
        (self.root / f"{resource}.json").write_text(json.dumps(data))

    def complete_cluster(self) -> None:
        """Every part llama2-inf2 needs, the way a k3s cluster with the charts installed shows them."""
        self.answer("crd", items({"metadata": {"name": "rayservices.ray.io"}}))
        self.answer(
            "daemonsets",
            items(
                controller(
                    "kube-system", "neuron-device-plugin", "public.ecr.aws/neuron/neuron-device-plugin:2"
                ),
                controller("kube-system", "svclb-traefik-4f2a", "rancher/klipper-lb:v0.4"),
            ),
        )
        self.answer("deployments", items(controller("kube-system", "my-scheduler")))
        ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        self.answer("pods", items({"metadata": {"name": "head"}, "status": ready}))
        self.answer("service", {"status": {"loadBalancer": {"ingress": [{"ip": "192.168.1.50"}]}}})

    def calls(self) -> list[list[str]]:
        path = self.root / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_pulumi: FakePulumi) -> FakeKubectl:
    bin_dir = tmp_path / "kubectl-bin"
    bin_dir.mkdir()
    data = tmp_path / "fake-kubectl"
    data.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(f"#!{sys.executable}\n{KUBECTL}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_KUBECTL_DIR", str(data))
    fake_pulumi.control(outputs={WL: {"namespace": BP, "service": f"{BP}-serve-svc", "port": 8000}})
    return FakeKubectl(data)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    kubeconfig = tmp_path / "k3s.yaml"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump(POOLS))
    return kubeconfig, pools


def lifecycle() -> Lifecycle:
    return Lifecycle(Engine(resolve_backend()), Progress("quiet"), stack="dev")


def pulumi_ops(fake: FakePulumi) -> list[tuple[str, str, str]]:
    return [op for op in fake.ops() if op[0] in ("up", "preview", "destroy")]


def test_missing_parts_are_listed_and_nothing_is_deployed(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    kubectl.answer("deployments", items(controller("kube-system", "coredns")))
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
    assert pulumi_ops(fake_pulumi) == []
    assert list_endpoints("dev") == []
    # the three inventory queries, all against the given kubeconfig
    queries = [call[2:4] for call in kubectl.calls()]
    assert queries == [["get", "crd"], ["get", "daemonsets"], ["get", "deployments"]]
    assert all(call[:2] == ["--kubeconfig", str(kubeconfig)] for call in kubectl.calls())


def test_declared_parts_are_not_required(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    kubectl.complete_cluster()
    kubectl.answer("daemonsets", items(controller("kube-system", "neuron-device-plugin")))  # no svclb
    data = {**POOLS, "present": ["load-balancer"]}
    pools.write_text(yaml.safe_dump(data))
    result = lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert result.endpoint.target == "kubeconfig"


def test_up_with_every_part_deploys_only_the_workload(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    kubectl.complete_cluster()
    result = lifecycle().up(
        BP,
        region="us-west-2",
        target="kubeconfig",
        kubeconfig=kubeconfig,
        pools=pools,
        confirm=lambda p: True,
    )
    assert pulumi_ops(fake_pulumi) == [("up", WL, "dev")]  # no platform stack on an existing cluster
    assert result.plan is not None and result.plan.cluster == "lab" and result.plan.changes == {}
    assert [name for name, _ in result.timeline.phases] == ["cluster check", f"workload {BP}", "readiness"]
    endpoint = load_endpoint("dev", BP)
    assert endpoint.target == "kubeconfig" and endpoint.base_url == "http://192.168.1.50:8000/v1"
    assert endpoint.extra["cluster"] == "lab" and endpoint.extra["kubeconfig"] == str(kubeconfig)


def test_the_named_pools_decide_schedulability_before_kubectl_or_pulumi(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    pools.write_text(yaml.safe_dump({"pools": POOLS["pools"][:1]}))  # no Neuron pool
    with pytest.raises(BlueprintError) as info:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert any("no pool of the cluster runs inf2.48xlarge" in text for _, text in info.value.problems)
    assert kubectl.calls() == [] and pulumi_ops(fake_pulumi) == []


def test_kubeconfig_target_needs_a_pools_file(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path]
) -> None:
    kubeconfig, _ = files
    with pytest.raises(LlmctlError) as info:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig)
    assert "--pools FILE" in info.value.message and "instance_types" in (info.value.hint or "")
    assert pulumi_ops(fake_pulumi) == []


def test_cli_refuses_pools_without_the_kubeconfig_target(files: tuple[Path, Path]) -> None:
    _, pools = files
    result = CliRunner().invoke(app, ["up", "-b", BP, "--pools", str(pools), "--yes"])
    assert result.exit_code == 1
    assert "--pools applies to --target kubeconfig only" in result.stderr
    assert "--target kubeconfig --kubeconfig FILE" in result.stderr


def test_cli_reports_missing_parts_as_json(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path]
) -> None:
    kubeconfig, pools = files
    args = ["up", "-b", BP, "--target", "kubeconfig", "--kubeconfig", str(kubeconfig), "--pools", str(pools)]
    result = CliRunner().invoke(app, [*args, "--yes", "--json"])
    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["error"] == "MissingPartsError"
    paths = [p["path"] for p in report["problems"]]
    assert len(paths) == 4 and paths[0] == "KubeRay operator (CRD rayservices.ray.io)"
    assert "helm upgrade --install" in result.stderr
    assert pulumi_ops(fake_pulumi) == []


def test_down_on_an_existing_cluster_destroys_only_workloads(
    kubectl: FakeKubectl, fake_pulumi: FakePulumi, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig, pools = files
    kubectl.complete_cluster()
    lifecycle().up(
        BP,
        region="us-west-2",
        target="kubeconfig",
        kubeconfig=kubeconfig,
        pools=pools,
        confirm=lambda p: True,
    )
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)  # no AWS needed to tear down a workload on an existing cluster
    result = CliRunner().invoke(app, ["down", "--target", "kubeconfig", "--yes", "--progress", "plain"])
    assert result.exit_code == 0, result.output
    destroyed = [op for op in pulumi_ops(fake_pulumi) if op[0] == "destroy"]
    assert destroyed == [("destroy", WL, "dev")]  # the workload only: no platform stack, no sweep
    assert list_endpoints("dev") == []
