"""Cache-aware routing on ONE H200 (issue 52, docs/gpu-runs.md "Routing on one H200"): two replicas of
our Ray app (fast path, tp 1) sharing GPU 0, a model whose prefill costs something (Llama-3-8B's
shape with vLLM's dummy weights) and a KV cache per replica too small for every shared prefix, so
that a router which ignores prefixes makes the engines recompute them and a prefix-aware one does not.

- ``start-route1 --router R``: everything stopped, then one cluster of 2 replicas on GPU 0, each
  replica's placement bundle half the GPU (``ray_driver.py --gpu-fraction``), with the request router
  R (``default`` starts ``rayr1d``, ``prefix_aware`` ``rayr1p``: one name per router, so each load's
  label says which router ran). One cluster at a time: two Ray clusters starting together on one host
  collided on ports on 2026-11-28 (h200x4-fastpath-route).
- ``bench-route1 --names rayr1d`` (or ``rayr1p``): device_plan.bench_route's loop (chat, each load,
  the engines' windows and per-replica counters through Ray's export) over the loads below.

Why the 2026-11-28 four-GPU run missed the goal (prefix-aware TTFT p90 3-29 ms worse): the tiny
model's prefill was nearly free, and each replica's KV cache held all 8 prefixes of 1024 tokens, so
round robin hit the cache too (0.70 against 0.75). Here both are changed; the arithmetic is below.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import device_plan as plan
import device_servers as servers
from device_base import EAGER, MODEL, WHEELS

NAMES = {"default": "rayr1d", "prefix_aware": "rayr1p"}  # device_base.SERVERS: port 8019, GPU 0
CACHE = "rayr1"  # both clusters' kernel caches in one folder: the second start reuses the first's JIT

# Llama-3-8B's shape (issue 52's figures for it), with the tiny model's tokenizer and its vocabulary
# (512): about the prefill and decode cost of 8B, and no 16 GB of weights written or read
SHAPE_8B = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "dtype": "bfloat16",
}
MAX_CONTEXT = 8192  # the driver's --max-context: the longest prompt below (5632) + 128 output tokens fit
MODEL_8B = WHEELS / "shape8b"
# the tiny model's weights (and its marker, which names the tiny shape) stay behind: vLLM 0.26.0's
# dummy loader reads no weight file (model_executor/model_loader/dummy_loader.py: download_model
# does nothing, load_weights fills every layer with initialize_dummy_weights), and a local folder
# without *.safetensors gives the dtype check nothing to read (transformers_utils/config.py
# get_safetensors_params_metadata), so config.json's dtype decides
LEFT_OUT = ("*.safetensors", "*.safetensors.index.json", "*.bin", "llmctl-tiny.json")

# KV bytes per token of the 8B shape in bf16: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2  # 131072 = 128 KiB
# each replica's KV cache: 5 GiB = 40960 tokens (2560 blocks of 16). vLLM 0.26.0 skips the memory
# profile when it is set (v1/worker/gpu_worker.py determine_available_memory: "reserved ... as
# specified by kv_cache_memory_bytes config and skipped memory profiling"), which two engines starting
# together on one GPU need: the profile counts the other engine's allocations as its own
KV_CACHE_BYTES = 5 * 1024**3
# what each engine asks to find free at init (v1/worker/utils.py request_memory: free memory >= total
# x gpu_memory_utilization, else it refuses to start); with kv_cache_memory_bytes set, nothing else
# reads it. 0.35 x 141 GiB = 49 GiB, while one engine holds 13 GiB of weights (the 8B shape at vocab
# 512: 32 x 218.1e6 + 2 x 512 x 4096 = 6.98e9 parameters in bf16), 5 GiB of KV and its activations:
# the second engine still finds over 100 GiB free whichever starts first
UTIL_8B = 0.35
GPU_FRACTION = 0.5  # each replica's bundle: {"GPU": 0.5} (Ray Serve LLM passes it on to vLLM's workers)

# The loads (128 output tokens each, --stddev 0: ignore_eos). Group and conversation counts are ODD:
# with the default router under direct streaming (Ray 2.58.0 serve/experimental/round_robin_router.py,
# a strict cursor) request i goes to replica i mod 2, and the workloads send request i to group (or
# conversation) i mod G (serving/client/bench/workloads.py): with G even, round robin would pin every
# group to one replica and act as a prefix-aware router; with G odd each replica sees every group.
#
# prefix: 15 system prompts of 4096 tokens (61440 tokens = 7.5 GiB of KV, 183 % of one replica's
# 40960), a 128-token question behind each. The prefix-aware router keeps each group on one replica:
# 7 or 8 groups = 28672-32768 tokens, with 16 x 256 tokens of questions and answers in flight 36864 at
# most, under 40960. Round robin sends all 15 to each replica: every group comes back after 14 others,
# past what the cache holds, so the engine recomputes 4096 tokens (about 2 x 7e9 x 4096 = 57 TFLOP) for
# most requests. 180 requests: 12 per group, the first of each a miss for either router.
# turns: 17 conversations of 5 turns of 1024-token questions and 128-token stand-in answers: turn t's
# prompt is 1024 (t + 1) + 128 t = 1024, 2176, 3328, 4480, 5632 tokens (+ 128 output: 5760 <= 8192),
# 3456 a conversation on average with its output, 58752 for all 17 (143 % of one replica's cache).
# Prefix-aware: 8 or 9 conversations a replica, 31104 at most; round robin: all 17 on each. 170
# requests: two rounds of 17 conversations (the second round's turn 0 a miss for either router).
LEVELS = (16,)
WORKLOADS: dict[str, plan.Shape] = {
    "prefix": lambda c: (
        ("--prefix-tokens", "4096", "--prefix-groups", "15", "--mean-input-tokens", "128"),
        180,
    ),
    "turns": lambda c: (
        ("--conversations", "17", "--turns", "5", "--mean-input-tokens", "1024"),
        170,
    ),
}


def engine_extra() -> dict[str, object]:
    """The engine kwargs added to the LLMConfig's: eager, dummy weights, the fixed KV cache."""
    return {**EAGER, "load_format": "dummy", "kv_cache_memory_bytes": KV_CACHE_BYTES}


def model_8b(source: Path = MODEL, target: Path = MODEL_8B) -> Path:
    """The tiny model's folder (made by ``setup``: ``llmctl models tiny``) again with Llama-3-8B's shape
    and no weights: its tokenizer, chat template and generation config as they are, config.json with
    ``SHAPE_8B``, the tokenizer's ``model_max_length`` raised to ``MAX_CONTEXT`` (vLLM 0.26.0
    config/model.py ``_get_and_verify_max_len`` takes the smaller of the config's positions and it)."""
    if (target / "config.json").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if path.is_file() and not any(path.match(pattern) for pattern in LEFT_OUT):
            shutil.copy(path, target / path.name)
    tokenizer = json.loads((target / "tokenizer_config.json").read_text())
    tokenizer["model_max_length"] = MAX_CONTEXT
    (target / "tokenizer_config.json").write_text(json.dumps(tokenizer, indent=2, sort_keys=True) + "\n")
    config = json.loads((source / "config.json").read_text())
    config.update(SHAPE_8B)
    (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")  # last
    return target


def start_route1(args: argparse.Namespace) -> None:
    """Everything stopped, then one cluster of 2 replicas on GPU 0, with the router ``--router``."""
    router = getattr(args, "router", "default")
    if router not in NAMES:
        raise ValueError(f"--router {router!r}: start-route1 knows {sorted(NAMES)}")
    plan.stop_all(args)
    name = NAMES[router]
    model = model_8b()
    driver: tuple[str, ...] = ("--replicas", "2", "--router", router, "--gpu-fraction", str(GPU_FRACTION))
    driver += ("--max-context", str(MAX_CONTEXT), "--engine-extra", json.dumps(engine_extra()))
    servers.ray_vllm(
        name, tp=1, gpus_total=1, driver=driver, cache=CACHE, router=router, model=model, util=UTIL_8B
    )
    plan.started(
        "start_route1",
        argparse.Namespace(eager=True),  # always: engine_extra's enforce_eager, whatever --eager says
        [name],
        router=router,
        replicas=2,
        tensor_parallel=1,
        gpu_fraction=GPU_FRACTION,
        model="Llama-3-8B shape, dummy weights",
        shape=SHAPE_8B,
        kv_cache_bytes=KV_CACHE_BYTES,
        util=UTIL_8B,
    )


def bench_route1(args: argparse.Namespace) -> None:
    """device_plan.bench_route over this module's loads (``--names rayr1d`` or ``rayr1p``)."""
    plan.bench_route(args, workloads=WORKLOADS, levels=LEVELS)
