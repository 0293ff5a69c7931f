"""Issue 52, cache-aware routing on the device: ray_driver.py's ``--replicas`` and ``--router`` change
the rendered app's args the way the product does (the blueprint's ``serving.request_router``, the
app's ``num_replicas``), so the app it deploys builds Ray's router exactly as in the cluster, and the
changes say so."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
import yaml
from test_gpu_harness import load

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.serving.common.ingress import parse_args
from llmctl.serving.ray_vllm.app import ARGS, llm_config
from llmctl.serving.serve_llm import routing

GPU = "llama2-70b-vllm-gpu"


def _rendered_app() -> dict[str, Any]:
    bp = load_blueprint(GPU)
    config = WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))
    service = next(o for o in build_manifests(config, hf_token="hf_x") if o["kind"] == "RayService")
    app: dict[str, Any] = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]
    return app


def _args(**flags: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"tp": 1, "model": "/tiny", "util": 0.4, **flags})


def test_the_flags_default_to_one_replica_and_the_rendered_router() -> None:
    driver = load("ray_driver")
    parser_flags = driver.main.__code__.co_consts  # the flag names the harness calls it with
    assert "--replicas" in parser_flags and "--router" in parser_flags
    app_args, changes = driver.device_args(_rendered_app(), _args(replicas=1, router=None))
    assert app_args["num_replicas"] == 1 and changes["args.num_replicas"] == [None, 1]
    assert "serving.request_router" not in changes
    assert app_args["blueprint"]["serving"]["request_router"] == "default"


def test_two_replicas_and_the_prefix_router_reach_the_llm_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(routing.DIRECT_STREAMING_ENV, "1")  # as `device.py --fast-path` starts Ray
    monkeypatch.setenv(driver_env := "RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY", "1")
    driver = load("ray_driver")
    app_args, changes = driver.device_args(_rendered_app(), _args(replicas=2, router="prefix_aware"))
    assert changes["args.num_replicas"] == [None, 2]
    assert changes["serving.request_router"] == ["default", "prefix_aware"]
    assert changes[f"env.{driver_env}"] == [None, "1"]
    blueprint, options = parse_args(app_args, ARGS)
    deployment = llm_config(blueprint, options)["deployment_config"]
    assert deployment["num_replicas"] == 2 and "autoscaling_config" not in deployment
    assert deployment["request_router_config"] == {"request_router_class": routing.DIRECT_PREFIX_ROUTER}
    assert llm_config(blueprint, options)["engine_kwargs"]["tensor_parallel_size"] == 1
