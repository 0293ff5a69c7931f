"""What the platform needs from a blueprint beyond its pools (the root volume its model needs, KEDA for
a Deployment that scales on its queue) reaches the platform `llmctl up` deploys, through the stand-in
engine: `up` builds the platform from the environment's workload records, so the records carry them."""

from __future__ import annotations

from typing import Any

import pytest
from lifecycle_support import lifecycle, short
from standin_support import StandinEngine

from llmctl.infra.lifecycle.engine import PLATFORM_PROJECT

REGION = "us-west-2"


@pytest.fixture(autouse=True)
def hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both models are gated: a (dummy) token, which only ends up in a Secret of the stand-in."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)


def settings(engine: StandinEngine, stack: str) -> dict[str, Any]:
    """The platform config `up` wrote to the platform stack (Pulumi.<stack>.yaml)."""
    import yaml

    from llmctl.state import state_dir

    path = state_dir() / "workspaces" / PLATFORM_PROJECT / f"Pulumi.{stack}.yaml"
    return dict(yaml.safe_load(path.read_text())["config"])


def platform(engine: StandinEngine, stack: str) -> dict[str, dict[str, Any]]:
    """The platform's saved resources by short name."""
    return {short(urn): res for urn, res in engine.resources(PLATFORM_PROJECT, stack).items()}


def root_volume(engine: StandinEngine, stack: str) -> str:
    """The root volume of the EC2NodeClass of the pool of replicas over several nodes the platform
    stack saved."""
    node_class = platform(engine, stack)[
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::nodepools-gpu-nvidia-efa-nodeclass"
    ]
    [root] = node_class["inputs"]["spec"]["blockDeviceMappings"]
    return str(root["ebs"]["volumeSize"])


def test_up_of_the_405b_blueprint_gives_its_gpu_nodes_a_1000_gib_root_volume(engine: StandinEngine) -> None:
    """811.7 GB of weights on each node (blueprints/catalog/llama31-405b-vllm-gpu.yaml): `up` deployed
    the pool's default 500 GiB before. A later `up` of another blueprint reads the 405B workload's
    record back from the backend and keeps the 1000 GiB."""
    lifecycle(stack="big").up("llama31-405b-vllm-gpu", region=REGION, wait=False)
    assert root_volume(engine, "big") == "1000Gi"
    assert settings(engine, "big")["llmctl:root_volume_gib"] == '{"gpu-nvidia-efa": 1000}'
    lifecycle(stack="big").up("tiny-cpu", region=REGION, wait=False)
    assert root_volume(engine, "big") == "1000Gi"


def test_up_of_a_queue_scaled_triton_blueprint_installs_keda(engine: StandinEngine) -> None:
    lifecycle(stack="q").up("llama2-triton-vllm-gpu", region=REGION, wait=False)
    assert "kubernetes:helm.sh/v3:Release::keda-release" in platform(engine, "q")
    assert settings(engine, "q")["llmctl:queue_scaling"] == "true"
