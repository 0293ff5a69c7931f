"""The fast-path plan on four GPUs (issue 52, docs/gpu-runs.md "tp 2, routing and tp 4 on the fast
path"): the starts of each phase, a step that stops every server, and ``bench-route`` (the
shared-prefix and multi-turn loads on two Ray clusters that differ only in their request router).

- ``start-pair``: our app on the fast path at tp 2 (``ray2fe``, GPUs 0-1) and plain vLLM at tp 2
  (``vllm2fe``, GPUs 2-3), started together; ``bench-f --names ray2fe,vllm2fe`` compares them.
- ``start-route``: two fast-path clusters of 2 replicas at tp 1, ``rayrd`` (GPUs 0-1) and ``rayrp``
  (GPUs 2-3), each with the request router ``--routers`` names for it (default ``default,prefix_aware``).
- ``start-fast4`` / ``start-plain4``: tp 4 on every GPU, our app on the fast path (``ray4fe``) or
  plain vLLM (``vllm4fe``), everything else stopped first; ``bench-f --names ray4fe`` (or ``vllm4fe``).
- ``stop-all``: every server started so far (by its pid file), Ray's clusters and their HAProxy.

``--eager`` starts every engine of these steps in vLLM's eager mode (no torch.compile, no CUDA graphs).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable

import device_servers as servers
from device_base import EAGER, RES, SERVERS, export, record
from device_bench import chat_check, engine_metrics, llmctl_bench, parse_histograms, scrape, window
from device_logs import fast_lines

EXPORT_S = 12.0  # Ray's metrics agent exports every few seconds (bench-f reads ours after as long)


def engine_flags(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The eager switch for our app's driver (vLLM engine kwargs) and for plain ``vllm serve``."""
    if not getattr(args, "eager", False):
        return (), ()
    return ("--engine-extra", json.dumps(EAGER)), ("--enforce-eager",)


def started(step: str, args: argparse.Namespace, names: list[str], **fields: object) -> None:
    eager = bool(getattr(args, "eager", False))
    record(step, servers=names, fast_path=servers.FAST_PATH, eager=eager, **fields)
    export()


def start_pair(args: argparse.Namespace) -> None:
    """Phase A: the two serving paths at tp 2 side by side, one engine per GPU pair."""
    driver, flags = engine_flags(args)
    servers.ray_vllm("ray2fe", tp=2, gpus_total=2, driver=driver)
    servers.plain_vllm("vllm2fe", tp=2, flags=flags)
    started("start_pair", args, ["ray2fe", "vllm2fe"], tensor_parallel=2)


def routers(args: argparse.Namespace) -> dict[str, str]:
    """Which request router each routing cluster gets: ``--routers`` names them in the order
    rayrd, rayrp (the values are the blueprint's ``serving.request_router``, passed on as given)."""
    given = [value for value in getattr(args, "routers", "default,prefix_aware").split(",") if value]
    if len(given) != 2:
        raise ValueError(f"--routers needs two values (rayrd, rayrp), got {given}")
    return dict(zip(("rayrd", "rayrp"), given, strict=True))


def start_route(args: argparse.Namespace) -> None:
    """Phase B: two clusters of 2 replicas at tp 1, one per GPU pair, differing only in their router."""
    stop_all(args)
    driver, _ = engine_flags(args)
    chosen = routers(args)
    for name, router in chosen.items():
        servers.ray_vllm(
            name, tp=1, gpus_total=2, driver=("--replicas", "2", "--router", router, *driver), router=router
        )
    started("start_route", args, list(chosen), routers=chosen, replicas=2, tensor_parallel=1)


def start_fast4(args: argparse.Namespace) -> None:
    """Phase C: our app on the fast path at tp 4 on every GPU."""
    stop_all(args)
    driver, _ = engine_flags(args)
    servers.ray_vllm("ray4fe", tp=4, gpus_total=4, driver=driver)
    started("start_fast4", args, ["ray4fe"], tensor_parallel=4)


def start_plain4(args: argparse.Namespace) -> None:
    """Phase C: plain vLLM at tp 4 on every GPU, once our app is measured and stopped."""
    stop_all(args)
    _, flags = engine_flags(args)
    servers.plain_vllm("vllm4fe", tp=4, flags=flags)
    started("start_plain4", args, ["vllm4fe"], tensor_parallel=4)


def stop_all(_: argparse.Namespace | None = None) -> None:
    """Every server with a pid file stopped (Ray's clusters and HAProxy with them); the pid files are
    renamed, so a later stop does not signal an id the system gave to another process since."""
    names = [name for name in SERVERS if (RES / f"{name}.pid").exists()]
    if not names:
        return
    servers.stop(names)
    for name in names:
        (RES / f"{name}.pid").rename(RES / f"{name}.stopped")
    record("stopped", servers=names)


# a load's shape at concurrency c: its `llmctl bench` flags and how many requests
Shape = Callable[[int], tuple[tuple[str, ...], int]]
# the routing loads (phase B): each workload fits max_model_len 4096 with 128 output tokens
WORKLOADS: dict[str, Shape] = {
    # 8 system prompts of 1024 tokens, a 256-token question behind each: a group's later requests can
    # reuse its prompt on the replica that served it first
    "prefix": lambda c: (
        ("--prefix-tokens", "1024", "--prefix-groups", "8", "--mean-input-tokens", "256"),
        max(128, 4 * c),
    ),
    # c conversations of 5 turns (turn 4: 5 x 256 question tokens and 4 x 128 answer tokens, about
    # 1800): turn t repeats turn t - 1's prompt, a hit where the same replica served it
    "turns": lambda c: (
        ("--conversations", str(c), "--turns", "5", "--mean-input-tokens", "256"),
        max(160, 5 * c),
    ),
}
ROUTE_LEVELS = (16, 64)
# vLLM's per-engine counters as Ray's metrics agent exports them (``ray_vllm_`` instead of ``vllm:``):
# the prefix cache's queried and hit tokens, and the requests each replica's engine finished
SERIES = (
    "ray_vllm_prefix_cache_queries_total",
    "ray_vllm_prefix_cache_hits_total",
    "ray_vllm_request_success_total",
    "ray_vllm_prompt_tokens_total",
)
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}\s+(\S+)")


def series(text: str) -> dict[str, dict[str, float]]:
    """Each counter of ``SERIES`` per label set (less ``finished_reason``): one set a replica's engine."""
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match or match.group(1) not in SERIES:
            continue
        labels = sorted(
            pair
            for pair in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', match.group(2))
            if pair[0] != "finished_reason"
        )
        key = ",".join(f"{k}={v}" for k, v in labels)
        counters = found.setdefault(match.group(1), {})
        try:
            counters[key] = counters.get(key, 0.0) + float(match.group(3))
        except ValueError:
            continue
    return found


def series_delta(before: str, after: str) -> dict[str, dict[str, float]]:
    """What each label set's counters grew by between two scrapes (a set absent before counts from 0)."""
    earlier, later = series(before), series(after)
    return {
        name: {key: value - earlier.get(name, {}).get(key, 0.0) for key, value in sets.items()}
        for name, sets in later.items()
    }


def close_window(label: str, before: str, after: str, began: float) -> None:
    prefix = "ray_vllm_"
    histograms = window(
        parse_histograms(before, prefix), parse_histograms(after, prefix), time.time() - began
    )
    record("route_window", label=label, **histograms, series=series_delta(before, after))


def bench_route(
    args: argparse.Namespace,
    workloads: dict[str, Shape] = WORKLOADS,
    levels: tuple[int, ...] = ROUTE_LEVELS,
) -> None:
    """Phase B's loads: each workload at c16 and c64 on each cluster in turn, ``--rounds`` times. Each
    load's engine window (histograms, per-replica counters through Ray's metrics port) is closed by
    the scrape before that cluster's next load, at least EXPORT_S after it ended, so Ray's agent
    has exported it; the last ones after a final wait. ``workloads`` and ``levels``: another plan's
    loads (device_route1.py, one GPU)."""
    names = args.names.split(",")
    if pending := [n for n in names if not (RES / f"{n}.ready").exists()]:
        servers.wait(argparse.Namespace(names=",".join(pending), limit=args.limit))
    names = [n for n in names if (RES / f"{n}.ready").exists()]
    for name in names:
        if not getattr(args, "no_chat", False):
            chat_check(name, SERVERS[name][0])
    ended: dict[str, float] = {}
    open_windows: dict[str, tuple[str, str, float]] = {}

    def scrape_after_export(name: str) -> str:
        if name in ended:
            time.sleep(max(0.0, EXPORT_S - (time.time() - ended[name])))
        text = scrape(engine_metrics(name)[0])
        if name in open_windows:
            label, earlier, began = open_windows.pop(name)
            close_window(label, earlier, text, began)
        return text

    first = getattr(args, "first_round", 1)
    for round_ in range(first, first + args.rounds):
        for c in levels:
            for workload, shape in workloads.items():
                extra, requests = shape(c)
                for name in names:
                    before = scrape_after_export(name)
                    label = f"{name}-{workload}-c{c}-r{round_}"
                    began = time.time()
                    llmctl_bench(label, SERVERS[name][0], c, requests, extra=extra)
                    ended[name] = time.time()
                    open_windows[name] = (label, before, began)
                export()
    for name in list(open_windows):
        scrape_after_export(name)
    for name in names:
        fast_lines(name)
    export()
