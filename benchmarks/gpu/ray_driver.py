"""Deploy the 70B blueprint's Serve application as the rendered RayService's ``serveConfigV2`` does, on a
Ray cluster started on the device, and record Ray's view of the replica's placement bundles.

The import path and the args are the rendered ones (``llmctl render -b llama2-70b-vllm-gpu``, made by
``make gpu-prepare``); only what the device forces changes, and the results say so: the model (the
tiny random Llama), ``tensor_parallel``, ``pipeline_parallel`` (``--pp``; as rendered unless given, and
recorded either way), the context (``--max-context``: the tiny model's positions, for a blueprint whose
context is longer), ``num_replicas`` (``--replicas``, default 1), each worker's GPU bundle
(``--gpu-fraction``: replicas sharing one GPU) and, when ``--router`` names one, the blueprint's
``serving.request_router`` (the app turns it into Ray's router as in the cluster:
serving/serve_llm/routing.py). (The app sets no Ray ``accelerator_type``
since issue 42, so the blueprint's A100 instance type needs no renaming on an H100 or H200.)

A prefix router under direct streaming also needs HAProxy to forward the body
(``RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY=1``), which Ray reads at ``ray start``, not here:
the changes record the value this driver's environment (the one ``ray start`` was given) holds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: read by Ray's HAProxy at `ray start` (infra/workload/builders/fast_path.py FORWARD_BODY_ENV)
FORWARD_BODY_ENV = "RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY"


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--address", "--config", "--model", "--ready", "--bundles"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tp", type=int, required=True)
    parser.add_argument(
        "--pp", type=int, default=None, help="compute.pipeline_parallel (default: as rendered)"
    )
    parser.add_argument(
        "--max-context", type=int, default=None, help="model.max_context (default: as rendered)"
    )
    parser.add_argument(
        "--util", type=float, required=True, help="gpu_memory_utilization (the GPUs are shared)"
    )
    parser.add_argument("--experimental", default=None, help="LLMConfig.experimental_configs (a variant)")
    parser.add_argument(
        "--engine-extra", default=None, help="vLLM engine kwargs (JSON) added to the LLMConfig's (a variant)"
    )
    parser.add_argument("--no-start", action="store_true", help="Serve runs already: replace the app")
    parser.add_argument("--replicas", type=int, default=1, help="the app's num_replicas (default 1)")
    parser.add_argument(
        "--router", default=None, help="serving.request_router (default | prefix_aware; default: as rendered)"
    )
    parser.add_argument(
        "--gpu-fraction", type=float, default=None, help="each worker's GPU bundle (default: as built, 1)"
    )
    args = parser.parse_args()
    failed = Path(str(args.ready).replace(".ready", ".failed"))
    try:
        deploy(args)
    except Exception:
        failed.write_text(traceback.format_exc())
        raise


def patch_llm_config(change: Callable[[dict[str, Any]], object]) -> None:
    """Apply ``change`` to every LLMConfig the app builds (serving/ray_vllm/app.py ``llm_config``)."""
    from llmctl.serving.ray_vllm import app as ray_vllm_app

    original = ray_vllm_app.llm_config

    def changed(*a: Any, **k: Any) -> dict[str, Any]:
        found: dict[str, Any] = original(*a, **k)
        change(found)
        return found

    ray_vllm_app.llm_config = changed


def gpu_bundle(fraction: float) -> Callable[[dict[str, Any]], None]:
    """The change that gives each worker's placement bundle ``fraction`` of a GPU. Ray 2.58.0 accepts
    it (``ray/llm/_internal/common/placement.py`` BundleConfig: GPU a float >= 0, "fractional values
    (e.g. GPU=0.5)") and passes it on to vLLM's Ray workers (``serve/engines/vllm/vllm_models.py``
    ``_detect_fractional_gpu_from_pg`` sets ``VLLM_RAY_PER_WORKER_GPUS``, which vLLM 0.26.0's Ray
    executor asks each worker's GPUs with; its ``v1/executor/ray_utils.py`` ``initialize_ray_cluster``
    counts a bundle with any GPU as a device and refuses only more than 1)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"--gpu-fraction {fraction}: give a part of one GPU, above 0 and at most 1")

    def change(found: dict[str, Any]) -> None:
        found["placement_group_config"]["bundle_per_worker"]["GPU"] = fraction
        # the engine process reads VLLM_RAY_PER_WORKER_GPUS from its own environment (vLLM 0.26.0
        # ray_executor_v2.py _get_actor_resource_kwargs); Ray 2.58.0 puts the detected fraction only in
        # the runtime_env of its callback's node tasks (core/configs/llm_config.py), so on 2026-11-29
        # each worker still asked for {'GPU': 1.0} and did not fit its 0.5 bundle: the replica's own
        # runtime_env carries it, which the replica and its EngineCore child inherit
        env = found.setdefault("runtime_env", {}).setdefault("env_vars", {})
        env["VLLM_RAY_PER_WORKER_GPUS"] = str(fraction)

    return change


def device_args(app: dict[str, Any], args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The app's args with the device's changes, and the changes as ``{what: [rendered, device]}``."""
    app_args = dict(app["args"])
    blueprint = app_args["blueprint"]
    changes: dict[str, Any] = {
        "compute.tensor_parallel": [blueprint["compute"]["tensor_parallel"], args.tp],
        "args.model_source": [app_args.get("model_source"), args.model],
        "args.served_model_name": [app_args.get("served_model_name"), "tiny"],
        "args.num_replicas": [app_args.get("num_replicas"), args.replicas],
        "serving.gpu_memory_utilization": [blueprint["serving"]["gpu_memory_utilization"], args.util],
    }
    # kept or forced, recorded either way: the stages a replica spans (serving/ray_vllm/app.py turns it
    # into vLLM's pipeline_parallel_size and a PACK placement group)
    rendered_pp = blueprint["compute"].get("pipeline_parallel", 1)
    pp = rendered_pp if getattr(args, "pp", None) is None else args.pp
    changes["compute.pipeline_parallel"] = [rendered_pp, pp]
    blueprint["compute"]["pipeline_parallel"] = pp
    if getattr(args, "max_context", None) is not None:  # vLLM refuses a max_model_len past the model's
        changes["model.max_context"] = [blueprint["model"]["max_context"], args.max_context]
        blueprint["model"]["max_context"] = args.max_context
    blueprint["serving"]["gpu_memory_utilization"] = args.util
    blueprint["compute"]["tensor_parallel"] = args.tp
    app_args.update(model_source=args.model, served_model_name="tiny", num_replicas=args.replicas)
    if args.router is not None:  # the blueprint's own setting, so the app builds Ray's router from it
        changes["serving.request_router"] = [blueprint["serving"].get("request_router"), args.router]
        blueprint["serving"]["request_router"] = args.router
    changes["env." + FORWARD_BODY_ENV] = [None, os.environ.get(FORWARD_BODY_ENV)]
    return app_args, changes


def deploy(args: argparse.Namespace) -> None:
    import ray
    from ray import serve

    ray.init(address=args.address)
    config = json.loads(Path(args.config).read_text())
    app = config["applications"][0]
    app_args, changes = device_args(app, args)
    if args.experimental:  # the variant only: Ray Serve LLM's experimental_configs added to the LLMConfig
        extra = json.loads(args.experimental)
        patch_llm_config(lambda found: found.__setitem__("experimental_configs", extra))
        changes["llm_config.experimental_configs"] = [None, extra]
    if args.engine_extra:  # the variant only: vLLM engine kwargs added to the LLMConfig's
        engine_extra = json.loads(args.engine_extra)
        patch_llm_config(lambda found: found["engine_kwargs"].update(engine_extra))
        changes["llm_config.engine_kwargs"] = [None, engine_extra]
    if args.gpu_fraction is not None:  # replicas sharing a GPU (device_route1.py): each bundle a part
        built = gpu_bundle(args.gpu_fraction)
        patch_llm_config(built)
        changes["llm_config.placement_group_config.bundle_per_worker.GPU"] = [1, args.gpu_fraction]
    module, _, attr = app["import_path"].partition(":")
    builder = getattr(importlib.import_module(module), attr)
    started = time.time()
    if args.no_start:
        serve.delete(app["name"])
    else:
        serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    application = builder(app_args)
    serve.run(application, name=app["name"], route_prefix=app["route_prefix"])
    from ray.util import placement_group_table

    Path(args.bundles).write_text(
        json.dumps(
            {
                "import_path": app["import_path"],
                "changes": changes,
                "deploy_seconds": round(time.time() - started, 1),
                "placement_groups": [
                    {
                        "bundles": table.get("bundles"),
                        "strategy": table.get("strategy"),
                        "state": table.get("state"),
                        # which Ray node holds each bundle (vLLM's executor orders its ranks by it)
                        "bundles_to_node_id": table.get("bundles_to_node_id"),
                    }
                    for table in placement_group_table().values()
                ],
                "nodes": nodes(ray.nodes()),
                "cluster_resources": ray.cluster_resources(),
                "available_resources": ray.available_resources(),
            },
            default=str,
        )
    )
    Path(args.ready).write_text(str(time.time()))  # after the bundles: the waiter reads both
    while True:  # the driver stays: the cluster is torn down by `ray stop`
        time.sleep(60)


def nodes(listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ray's nodes as ``ray.nodes()`` lists them: id, address, head or not, GPUs, alive."""
    return [
        {
            "node_id": node.get("NodeID"),
            "address": node.get("NodeManagerAddress"),
            "head": "node:__internal_head__" in node.get("Resources", {}),
            "gpus": node.get("Resources", {}).get("GPU"),
            "alive": node.get("Alive"),
        }
        for node in listed
    ]


if __name__ == "__main__":
    main()
