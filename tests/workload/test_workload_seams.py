"""The seams between the workload builders and the serving apps they start.

- Every Ray blueprint's rendered serveConfigV2 is a valid Serve config whose import_path resolves
  and whose args the app builder's own parsing accepts (ray-cpu builds the whole bound app;
  ray-neuronx and ray-vllm stop before their hardware libraries).
- ECR: one repository per workload stack, the same name for the stack, the builders and
  `llmctl images build`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner
from workload_helpers import CATALOG, blueprint, config_for, find, manifests_for, worker

from llmctl.errors import LlmctlError
from llmctl.infra.aws.images import repository_name
from llmctl.infra.workload.builders.common import serving_image
from llmctl.infra.workload.manifests import endpoint_info

RAY = [name for name in CATALOG if blueprint(name).runtime.startswith("ray-")]


def _serve_app(name: str) -> dict[str, Any]:
    config = yaml.safe_load(find(manifests_for(name), "RayService")["spec"]["serveConfigV2"])
    from ray.serve.schema import ServeDeploySchema

    ServeDeploySchema.model_validate(config)  # Ray's own schema for serveConfigV2
    (app,) = config["applications"]
    return dict(app)


def _worker_env(name: str) -> dict[str, str]:
    env = worker(manifests_for(name))["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e["value"] for e in env if "value" in e}


@pytest.mark.parametrize("name", RAY)
def test_serve_config_args_are_accepted_by_the_app_builder(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _serve_app(name)
    module_name, _, attr = app["import_path"].partition(":")
    assert callable(getattr(importlib.import_module(module_name), attr))
    module = importlib.import_module(module_name)
    from llmctl.serving.common.ingress import parse_args

    parsed, options = parse_args(app["args"], module.ARGS)
    assert parsed.pod_view() == blueprint(name).pod_view() and options == {}  # all but upgrade (llmctl's)
    assert app["route_prefix"] == parsed.serving.route_prefix
    assert endpoint_info(config_for(name)).url.endswith(f":8000{parsed.serving.route_prefix.rstrip('/')}")
    for key, value in _worker_env(name).items():  # what the replicas see
        monkeypatch.setenv(key, value)
    runtime = parsed.runtime
    if runtime == "ray-cpu":
        built = module.app_builder(app["args"])  # the whole bound app: engine options, no engine yet
        deployment = built._bound_deployment
        assert deployment.name == "openai"
        # slots + the bounded queue + headroom for probes: the app sheds beyond slots + queue itself
        queued = parsed.serving.max_queued_requests
        queued = parsed.serving.max_concurrent_requests if queued is None else queued
        assert deployment.max_ongoing_requests == 2 * (parsed.serving.max_concurrent_requests + queued) + 4
        assert deployment.max_queued_requests == deployment.max_ongoing_requests * parsed.scaling.max_replicas
    elif runtime == "ray-neuronx":
        from llmctl.serving.common.ingress import deployment_options
        from llmctl.serving.neuronx.settings import neuron_settings

        tp = parsed.compute.tensor_parallel
        options = deployment_options(parsed, {}, {"neuron_cores": tp})
        assert options["ray_actor_options"]["resources"] == {"neuron_cores": tp}
        group = worker(manifests_for(name))["rayStartParams"]["resources"]
        assert json.loads(group.strip('"').replace('\\"', '"')) == {"neuron_cores": tp}
        settings = neuron_settings(parsed)  # LLMCTL_COMPILE_CACHE_URL comes from the worker env
        assert settings.compile_cache_url == os.environ["LLMCTL_COMPILE_CACHE_URL"]
        assert "transformers_neuronx" not in sys.modules
    else:
        from llmctl.serving.ray_vllm.app import llm_config

        loading = llm_config(parsed, options)["model_loading_config"]
        mirror = os.environ.get("LLMCTL_MODEL_URI")
        assert loading["model_source"] == ({"bucket_uri": mirror} if mirror else parsed.model.id)
        assert "vllm" not in sys.modules


def test_an_unknown_app_argument_is_refused() -> None:
    from llmctl.errors import ServingError
    from llmctl.serving.ray_cpu.app import app_builder

    args = {"blueprint": blueprint("tiny-cpu").model_dump(mode="json"), "model_paht": "/m"}
    with pytest.raises(ServingError, match="model_paht") as caught:
        app_builder(args)
    assert caught.value.hint is not None and "model_path" in caught.value.hint


def test_ecr_repository_is_one_per_workload_stack() -> None:
    assert repository_name("dev", "llama2-inf2") == "llmctl/dev/llama2-inf2"
    names = {repository_name(stack, bp) for stack in ("dev", "prod") for bp in ("llama2-7b-cpu", "tiny-cpu")}
    assert len(names) == 4  # same runtime (ray-cpu), different stacks: no collision
    with pytest.raises(LlmctlError, match="ECR repository"):
        repository_name("Dev Env", "tiny-cpu")
    config = config_for("tiny-cpu", stack="qa")
    registry = config.model_copy(
        update={"platform": config.platform.model_copy(update={"ecr_registry": "1.dkr.ecr"})}
    )
    # a registry alone is no image: only `up`'s DescribeImages puts the ECR image in the pods
    assert serving_image(registry) == (config.blueprint.image.base, False)


def test_images_build_tags_for_the_workload_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the stand-in Docker CLI of tests/lifecycle: only the calls and flags `images build` makes
    standin = Path(__file__).parent.parent / "lifecycle" / "docker_standin.py"
    docker = tmp_path / "docker"
    docker.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(standin)!r}, run_name='__main__')\n"
    )
    docker.chmod(0o755)
    (tmp_path / "calls.jsonl").write_text("")
    monkeypatch.setenv("STANDIN_DOCKER_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    from llmctl.cli.app import app

    result = CliRunner().invoke(
        app, ["images", "build", "--blueprint", "tiny-cpu", "--stack", "qa", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["runtime"] == "ray-cpu" and out["image"].startswith("llmctl/qa/tiny-cpu:")
    assert out["base"] == blueprint("tiny-cpu").image.base
    built = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()][-1]
    assert built["-t"] == out["image"] and built["--load"] is True
    assert built["--build-arg"] == f"BASE_IMAGE={out['base']}"
    refused = CliRunner().invoke(
        app, ["images", "build", "--runtime", "ray-cpu", "--push", "--region", "us-west-2"]
    )
    assert refused.exit_code != 0 and "--push needs --blueprint" in refused.output
    mismatch = CliRunner().invoke(app, ["images", "build", "-b", "tiny-cpu", "--runtime", "ray-vllm"])
    assert mismatch.exit_code != 0 and "uses runtime ray-cpu" in mismatch.output


@pytest.mark.parametrize(
    ("name", "refused"), [("llama3-vllm-inf2", True), ("llama2-triton-vllm-gpu", True), ("tiny-cpu", False)]
)
def test_api_key_only_on_runtimes_whose_app_checks_it(name: str, refused: bool) -> None:
    from llmctl.blueprints.hardware import hardware
    from llmctl.blueprints.rules import check

    bp = blueprint(name)
    keyed = bp.model_copy(update={"exposure": bp.exposure.model_copy(update={"api_key": True})})
    problems = [field for field, _ in check(keyed, hardware())]
    assert ("exposure.api_key" in problems) == refused
    if not refused:  # the key reaches the app that enforces it: serving pods and the UI get it
        manifests = manifests_for_config(keyed)
        env = worker(manifests)["template"]["spec"]["containers"][0]["env"]
        assert {
            "name": "LLMCTL_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "api-key", "key": "LLMCTL_API_KEY"}},
        } in env
        # ... from a Secret the workload itself creates, under the name the serving app reads
        from llmctl.serving.common.auth import API_KEY_ENV

        [secret] = [m for m in manifests if m["kind"] == "Secret" and m["metadata"]["name"] == "api-key"]
        assert API_KEY_ENV in (secret.get("stringData") or secret.get("data") or {})


def manifests_for_config(bp: Any) -> list[dict[str, Any]]:
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
    from llmctl.infra.workload.manifests import build_manifests

    return build_manifests(
        WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp)), hf_token=None, api_key="k"
    )
