"""`llmctl bench` / `llmctl chat` flags turned into endpoint URLs and a checked ``BenchConfig``.

Validation only: the one thing read is the local endpoint registry (for ``--blueprint``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from llmctl.errors import BadInput, did_you_mean
from llmctl.serving.client.bench.client import normalize_base_url
from llmctl.serving.client.bench.metrics import parse_slo
from llmctl.serving.client.bench.replicas import endpoint_source
from llmctl.serving.client.bench.runner import BenchConfig, default_out_dir

ARRIVALS = ("poisson", "constant")
EXTRA_BODY_EXAMPLE = "e.g. --extra-body '{\"top_p\": 0.9}'"


def parse_list(text: str, kind: type[int] | type[float], flag: str) -> list[Any]:
    """A comma-separated list of positive numbers (``1,2,4``) with errors naming the flag."""
    values: list[Any] = []
    for item in text.replace(" ", "").split(","):
        if not item:
            continue
        try:
            value = kind(item)
        except ValueError:
            raise BadInput(
                f"{flag} {text!r}: {item!r} is not a {'whole ' if kind is int else ''}number",
                f"e.g. {flag} 1,2,4,8,16" if kind is int else f"e.g. {flag} 0.5,1,2",
            ) from None
        if value <= 0:
            raise BadInput(f"{flag} values must be positive, got {item}", f"e.g. {flag} 1,2,4")
        values.append(value)
    if not values:
        raise BadInput(f"{flag} is empty", f"e.g. {flag} 1,2,4")
    return values


class Resolved(NamedTuple):
    """Where to send requests, and what a deployed blueprint says about them."""

    urls: list[str]
    model: str | None
    max_output_tokens: int | None


def resolve_endpoints(
    endpoints: list[str] | None, blueprint: str | None, stack: str, workload: str | None = None
) -> Resolved:
    """OpenAI base URLs (normalized), and the model and output-token limit of a deployed blueprint
    (its named workload with `workload`, e.g. `pr-42`)."""
    if endpoints and blueprint:
        raise BadInput("give --endpoint or --blueprint, not both", "drop one of them")
    if workload and not blueprint:
        raise BadInput(
            "--workload needs --blueprint", "pass --blueprint NAME --workload NAME (see `llmctl status`)"
        )
    urls: list[str] = []
    if endpoints:
        urls = [u for item in endpoints for u in item.split(";") if u.strip()]
    elif not blueprint and os.environ.get("OPENAI_API_BASE"):
        urls = [u for u in os.environ["OPENAI_API_BASE"].split(";") if u.strip()]
    if urls:
        return Resolved([normalize_base_url(u) for u in urls], None, None)
    if not endpoints:
        # a deployed blueprint: the one named, else the stack's only endpoint (as status and down find it)
        from llmctl.serving.client.deployed import find_endpoint, sole_endpoint

        deployed = find_endpoint(stack, blueprint, workload) if blueprint else sole_endpoint(stack)
        raw_limit = deployed.extra.get("max_new_tokens", "")
        limit = int(raw_limit) if raw_limit.isdigit() else None
        return Resolved([normalize_base_url(deployed.base_url)], deployed.model or None, limit)
    raise BadInput(
        "no endpoint to talk to",
        "pass --endpoint http://HOST:PORT/v1 or --blueprint NAME (a blueprint deployed with `llmctl up`)",
    )


def parse_extra_body(text: str | None) -> dict[str, Any]:
    """``--extra-body``: a JSON object merged into every request body."""
    if not text:
        return {}
    try:
        extra = json.loads(text)
    except ValueError as error:
        raise BadInput(f"--extra-body is not JSON: {error}", EXTRA_BODY_EXAMPLE) from None
    if not isinstance(extra, dict):
        raise BadInput("--extra-body must be a JSON object", EXTRA_BODY_EXAMPLE)
    return extra


def check_workload(settings: dict[str, Any]) -> None:
    """The prefix-cache workload flags (workloads.py): one workload at a time, each flag with its pair."""
    prefix, groups = settings.get("prefix_tokens"), settings.get("prefix_groups")
    conversations, turns = settings.get("conversations"), settings.get("turns")
    if prefix and conversations:
        raise BadInput(
            "--prefix-tokens (shared system prompts) and --conversations exclude each other",
            "run one workload per call",
        )
    if groups and not prefix:
        raise BadInput("--prefix-groups needs --prefix-tokens", "e.g. --prefix-tokens 1024 --prefix-groups 8")
    if turns and not conversations:
        raise BadInput("--turns needs --conversations", "e.g. --conversations 16 --turns 5")
    if settings.get("shared_prefix") and (prefix or conversations):
        raise BadInput(
            "--shared-prefix drops the nonce that keeps these workloads' questions apart",
            "drop --shared-prefix",
        )


def bench_config(
    *,
    endpoints: list[str] | None,
    blueprint: str | None,
    stack: str,
    concurrency: str | None,
    workload: str | None = None,
    rate: str | None,
    arrival: str,
    llm_api: str,
    slo: str | None,
    extra_body: str | None,
    model: str | None,
    max_output_tokens: int | None,
    out: Path | None,
    **settings: Any,
) -> BenchConfig:
    """Check the flags of one ``llmctl bench`` run; ``settings`` are BenchConfig fields as given."""
    if llm_api != "openai":
        raise BadInput(f"--llm-api {llm_api!r} is not supported", "llmctl bench speaks the OpenAI API only")
    if arrival not in ARRIVALS:
        hint = did_you_mean(arrival, list(ARRIVALS)) or "choose poisson or constant"
        raise BadInput(f"unknown --arrival {arrival!r}", hint)
    if rate and concurrency:
        raise BadInput(
            "--rate (open loop) and --concurrency (closed loop) exclude each other",
            "cap an open loop with --max-concurrency",
        )
    if rate and settings.get("loops") not in (None, 1):
        raise BadInput(
            "--loops splits a closed loop's slots over processes; an open loop (--rate) runs on one",
            "drop --loops, or use --concurrency",
        )
    check_workload(settings)
    levels = parse_list(concurrency or "1", int, "--concurrency")
    rates = parse_list(rate, float, "--rate") if rate else None
    extra = parse_extra_body(extra_body)
    urls, deployed_model, deployed_limit = resolve_endpoints(endpoints, blueprint, stack, workload)
    settings.setdefault("replicas", endpoint_source(stack, blueprint, workload))
    return BenchConfig(
        endpoints=urls,
        out_dir=out or default_out_dir(),
        model=model or deployed_model,
        concurrency=levels,
        rates=rates,
        arrival=arrival,
        max_output_tokens=max_output_tokens or deployed_limit,
        slo=parse_slo(slo),
        extra_body=extra,
        **settings,
    )
