"""Issue 52: the prefix router on Serve's pick-only path, under a real (local, CPU) Ray Serve.

Direct streaming's ``LLMRouter`` picks with ``handle.choose_replica(payload, _reserve=False)`` (Ray
2.58.0 ``ray/llm/_internal/serve/core/ingress/router.py`` ``_pick_replica``), and takes the first
replica of the first rank. On that path Serve never calls ``on_request_routed``
(``ray/serve/_private/router.py`` ``choose_replica``), so Ray's ``PrefixCacheAffinityRouter`` never
fills its prefix tree and every prompt goes to one replica; llmctl's ``DirectStreamingPrefixRouter``
records its picks, so prompt groups spread over both replicas and each group stays on one. Runs on
the Ray this environment has (2.60.0 when written); on 2026-11-28 it also passed on the pods' 2.58.0
(the ray==2.58.0 cp311 wheel unpacked ahead of it on PYTHONPATH), with the same figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmctl.serving.serve_llm import routing

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

PICKS = """
import asyncio, collections, json, sys
from types import SimpleNamespace
import ray
from ray import serve
from ray.serve.config import RequestRouterConfig

ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
serve.start(http_options={"location": "NoServer"})
out = {}
for n, cls in enumerate(json.loads(sys.argv[1])):
    name = f"echo{n}"  # an app of its own: the prefix tree actor is named after app and deployment
    @serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 0},
                      request_router_config=RequestRouterConfig(request_router_class=cls))
    class Echo:
        def __call__(self, x):
            return x
    serve.run(Echo.bind(), name=name, route_prefix=None)
    handle = serve.get_app_handle(name)

    async def picks():
        got = []
        for i in range(16):
            text = f"system prompt of group {i % 4}: " + "lorem ipsum " * 50 + f"question {i}"
            payload = SimpleNamespace(messages=[{"role": "user", "content": text}])
            async with handle.choose_replica(payload, _reserve=False) as selection:
                got.append((i % 4, selection.replica_id))
        return got

    got = asyncio.run(picks())
    groups = collections.defaultdict(set)
    for group, replica in got:
        groups[group].add(replica)
    out[cls] = {
        "requests_per_replica": sorted(collections.Counter(r for _, r in got).values()),
        "replicas_per_group": sorted(len(v) for v in groups.values()),
    }
    serve.delete(name)
print(json.dumps(out))
"""


def test_only_llmctls_router_spreads_prompt_groups_on_the_pick_only_path() -> None:
    stock = (
        "ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router:PrefixCacheAffinityRouter"
    )
    done = subprocess.run(
        [sys.executable, "-c", PICKS, json.dumps([stock, routing.DIRECT_PREFIX_ROUTER])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    # Ray's class: an empty tree, every replica tied, the first one taken every time
    assert found[stock] == {"requests_per_replica": [16], "replicas_per_group": [1, 1, 1, 1]}
    # llmctl's: the four groups split over the two replicas, each group on one replica
    assert found[routing.DIRECT_PREFIX_ROUTER] == {
        "requests_per_replica": [8, 8],
        "replicas_per_group": [1, 1, 1, 1],
    }
