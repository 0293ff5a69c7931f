"""Triton's vLLM engine on the device: the ``model.json`` our repository writes, loaded as the
vLLM backend loads it (``AsyncEngineArgs(**model.json)``, triton-inference-server/vllm_backend
src/model.py ``_init_engine_args``), an engine started with it, tokens generated, and the engine's
queue gauges sampled under a burst larger than ``max_num_seqs``.

Triton's server itself is not on the package index (it ships only in NGC images), so its own metrics
(``nv_inference_*``) and the backend's ``REPORT_CUSTOM_METRICS`` are not exercised here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--util", type=float, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--metrics", required=True)
    args = parser.parse_args()
    result: dict[str, object] = {}
    try:
        asyncio.run(run(args, result))
    except Exception as error:  # the failure is the result
        result["error"] = repr(error)[-3000:]
    with open(args.out, "w") as out:
        json.dump(result, out)


async def run(args: argparse.Namespace, result: dict[str, object]) -> None:
    import vllm
    from prometheus_client import REGISTRY, generate_latest
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.blueprints.schema import Blueprint
    from llmctl.serving.triton_vllm.repository import model_name, render_model_repository

    blueprint = load_blueprint("llama2-triton-vllm-gpu")
    data = blueprint.model_dump(mode="json")
    changed = {"serving.gpu_memory_utilization": [data["serving"]["gpu_memory_utilization"], args.util]}
    data["serving"]["gpu_memory_utilization"] = args.util  # GPU 0 is shared with plain vLLM
    files = render_model_repository(Blueprint.model_validate(data), args.model)
    engine_config = json.loads(files[f"{model_name(blueprint)}/1/model.json"])
    result.update(vllm=vllm.__version__, model_json=engine_config, changed_from_blueprint=changed)
    started = time.time()
    engine_args = AsyncEngineArgs(**engine_config)
    engine = AsyncLLM.from_engine_args(engine_args)
    result["engine_start_s"] = round(time.time() - started, 1)

    async def one(max_tokens: int) -> int:
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, min_tokens=max_tokens)
        tokens = 0
        async for output in engine.generate("hello from triton", params, str(uuid.uuid4())):
            tokens = len(output.outputs[0].token_ids)
        return tokens

    result["first_request_tokens"] = await one(16)

    def gauge(name: str) -> float:
        value = 0.0
        for family in REGISTRY.collect():
            for sample in family.samples:
                if sample.name == name:
                    value += sample.value
        return value

    peak = {"vllm:num_requests_waiting": 0.0, "vllm:num_requests_running": 0.0}
    burst = int(engine_config.get("max_num_seqs", 256)) * 2 + 64
    tasks = [asyncio.create_task(one(128)) for _ in range(burst)]
    started = time.time()
    while not all(task.done() for task in tasks):
        for name in peak:
            peak[name] = max(peak[name], gauge(name))
        await asyncio.sleep(0.1)
    counts = [task.result() for task in tasks]
    result["burst"] = {
        "requests": burst,
        "seconds": round(time.time() - started, 2),
        "tokens": sum(counts),
        "peak_gauges": peak,
        "after_gauges": {name: gauge(name) for name in peak},
    }
    text = generate_latest(REGISTRY).decode()
    with open(args.metrics, "w") as out:
        out.write(text)
    result["metric_names"] = sorted(
        {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line.startswith("vllm:")}
    )
    engine.shutdown()


if __name__ == "__main__":
    main()
