"""Issue 52, cache-aware routing: ``serving.request_router`` from the blueprint to Ray's router.

Ray's side is Ray 2.58.0's (its wheel): ``LLMConfig.deployment_config.request_router_config`` is
Serve's ``RequestRouterConfig`` (ray/serve/config.py); Ray Serve LLM's ``PrefixCacheAffinityRouter``
(ray/serve/llm/request_router.py); HAProxy sends ``/internal/route`` the body only with
``RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY=1`` (ray/serve/_private/constants.py); the pick-only
path of direct streaming never calls ``on_request_routed`` (ray/serve/_private/router.py
``choose_replica``), hence llmctl's subclass there (serving/serve_llm/routing.py). Every test fails
on the code before the setting: no field, no router config, no env, no rule, no `show` line.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml
from workload_helpers import TOKEN, blueprint, config_for, find

from llmctl.blueprints import request_router
from llmctl.blueprints.hardware import hardware
from llmctl.blueprints.rules import check
from llmctl.blueprints.schema import Blueprint
from llmctl.infra.workload.manifests import build_manifests
from llmctl.serving.ray_vllm.app import llm_config
from llmctl.serving.serve_llm import routing

GPU = "llama2-70b-vllm-gpu"
FORWARD_BODY = "RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY"


def _with_serving(name: str, **serving: Any) -> Blueprint:
    bp = blueprint(name)
    return bp.model_copy(update={"serving": bp.serving.model_copy(update=serving)})


def _rendered(bp: Blueprint) -> list[dict[str, Any]]:
    return build_manifests(config_for(bp.name).model_copy(update={"blueprint": bp}), hf_token=TOKEN)


def _env(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    cluster = find(objects, "RayService")["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [
        {e["name"]: e["value"] for e in pod["template"]["spec"]["containers"][0]["env"] if "value" in e}
        for pod in pods
    ]


def test_the_default_leaves_rays_router_alone() -> None:
    bp = blueprint(GPU)
    assert bp.serving.request_router == "default"  # no catalog blueprint turns it on
    assert "request_router_config" not in llm_config(bp)["deployment_config"]
    assert all(FORWARD_BODY not in env for env in _env(_rendered(bp)))


@pytest.mark.parametrize("direct", [False, True])
def test_prefix_aware_builds_rays_prefix_router(monkeypatch: pytest.MonkeyPatch, direct: bool) -> None:
    monkeypatch.setenv(routing.DIRECT_STREAMING_ENV, "1" if direct else "0")
    bp = _with_serving(GPU, request_router="prefix_aware")
    config = llm_config(bp, {"num_replicas": 2})["deployment_config"]
    expected = routing.DIRECT_PREFIX_ROUTER if direct else routing.RAY_PREFIX_ROUTER
    assert config["request_router_config"] == {"request_router_class": expected}
    assert config["num_replicas"] == 2
    # Serve's own config takes llmctl's class and finds it (imported where the app is built); Ray's
    # public module needs pyarrow through LLMConfig, absent here, so its path is checked in the source
    from ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router import (
        PrefixCacheAffinityRouter,
    )
    from ray.serve.config import RequestRouterConfig

    if direct:
        loaded = RequestRouterConfig(**config["request_router_config"]).get_request_router_class()
        assert issubclass(loaded, PrefixCacheAffinityRouter) and loaded is not PrefixCacheAffinityRouter
    else:
        module, _, name = expected.partition(":")
        ray_dir = Path(importlib.util.find_spec("ray").origin).parent  # type: ignore[union-attr,arg-type]
        source = ray_dir.parent.joinpath(*module.split(".")).with_suffix(".py")
        assert f"class {name}(" in source.read_text()


def test_the_rendered_service_carries_it_and_haproxy_forwards_the_body() -> None:
    bp = _with_serving(GPU, request_router="prefix_aware")
    objects = _rendered(bp)
    app = yaml.safe_load(find(objects, "RayService")["spec"]["serveConfigV2"])["applications"][0]
    assert app["args"]["blueprint"]["serving"]["request_router"] == "prefix_aware"  # the app builds from it
    envs = _env(objects)
    assert len(envs) == 2 and all(env[FORWARD_BODY] == "1" for env in envs)  # head (HAProxy) and workers
    assert all(env["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1" for env in envs)
    # without the fast path there is no HAProxy: nothing to forward
    off = _with_serving(GPU, request_router="prefix_aware", ray_fast_path=False)
    assert all(FORWARD_BODY not in env for env in _env(_rendered(off)))


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("tiny-cpu", "ray-cpu does not serve Ray Serve LLM's app"),
        ("llama2-inf2", "ray-neuronx does not serve Ray Serve LLM's app"),
        ("llama3-vllm-inf2", "its vLLM on Neuron runs without prefix caching"),
    ],
)
def test_blueprints_that_cannot_route_by_prefix_are_refused(name: str, reason: str) -> None:
    asked = _with_serving(name, request_router="prefix_aware")
    why_not = request_router.blocker(asked)
    assert why_not is not None and why_not.startswith(reason)
    assert (
        "serving.request_router",
        f"this blueprint cannot route by prefix: {why_not}; use default",
    ) in check(asked, hardware())
    shown = request_router.describe(asked)
    assert shown == {"request_router": "prefix_aware", "request_router_reason": f"cannot: {why_not}"}
    assert not any(field == "serving.request_router" for field, _ in check(blueprint(name), hardware()))


def test_direct_streaming_on_a_ray_before_the_fix_is_refused() -> None:
    bp = _with_serving(GPU, request_router="prefix_aware")
    old = bp.model_copy(
        update={"image": bp.image.model_copy(update={"base": "rayproject/ray-llm:2.56.0-py312-cu128"})}
    )
    assert request_router.blocker(old) == (
        "its Ray is 2.56.0: with direct streaming (serving.ray_fast_path) the prefix router hangs every "
        "request before Ray 2.56.1 (ray-project/ray#64326); set serving.ray_fast_path false"
    )
    default_path = old.model_copy(update={"serving": old.serving.model_copy(update={"ray_fast_path": False})})
    assert request_router.blocker(default_path) is None
    assert request_router.blocker(bp) is None and check(bp, hardware()) == []


def test_blueprints_show_says_which_router_and_why() -> None:
    from llmctl.blueprints.describe import describe

    shown = describe(GPU)["derived"]
    assert shown["request_router"] == "default"
    assert shown["request_router_reason"].startswith("default: Ray Serve LLM's RoundRobinRouter")
    assert "prefix_aware can be set" in shown["request_router_reason"]
    on = request_router.describe(_with_serving(GPU, request_router="prefix_aware"))
    assert on["request_router_reason"].startswith("prefix_aware: Ray Serve LLM's PrefixCacheAffinityRouter")
    assert "HAProxy forwards the body" in on["request_router_reason"]
    cpu = describe("tiny-cpu")["derived"]["request_router_reason"]
    assert cpu == "default: the runtime's own (no Ray Serve LLM deployment router)"


class _Tree:
    """The prefix tree actor's ``insert`` (a Ray actor: the boundary), recording its calls."""

    def __init__(self) -> None:
        self.inserted: list[tuple[str, str]] = []
        self.insert = self

    def remote(self, text: str, tenant: str, _at: float) -> None:
        self.inserted.append((text, tenant))


class _Replica:
    def __init__(self, name: str) -> None:
        self.replica_id = type("Id", (), {"to_full_id_str": lambda _self: name})()


def test_under_direct_streaming_the_router_records_the_replica_it_picks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ray's router records a prompt only in ``on_request_routed``, which the pick-only path never
    calls: llmctl's records the first of the first rank, the replica LLMRouter takes."""
    import asyncio
    from types import SimpleNamespace

    from ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router import (
        PrefixCacheAffinityRouter,
    )

    from llmctl.serving.serve_llm.prefix_router import DirectStreamingPrefixRouter

    a, b = _Replica("A"), _Replica("B")

    async def rays_pick(_self: Any, candidate_replicas: Any, pending_request: Any = None) -> Any:
        return [[b, a]]  # Ray's ranking (tied smallest tenants, or the prefix match)

    monkeypatch.setattr(PrefixCacheAffinityRouter, "choose_replicas", rays_pick)
    router = object.__new__(DirectStreamingPrefixRouter)
    router._tree_actor = _Tree()
    chat = SimpleNamespace(messages=[{"role": "user", "content": "shared prefix. turn one"}])
    request = SimpleNamespace(args=[chat], kwargs={})
    assert asyncio.run(router.choose_replicas([a, b], request)) == [[b, a]]
    assert router._tree_actor.inserted == [("shared prefix. turn one", "B")]
    # a body without a prompt (HAProxy forwarded none) records nothing; nor does Serve's own hook
    asyncio.run(router.choose_replicas([a, b], SimpleNamespace(args=[], kwargs={})))
    asyncio.run(router.choose_replicas([a, b], SimpleNamespace(args=[SimpleNamespace(x=1)], kwargs={})))
    router.on_request_routed(request, "A", None)
    assert router._tree_actor.inserted == [("shared prefix. turn one", "B")]
