"""Ray Serve LLM's ``PrefixCacheAffinityRouter`` for direct streaming (imported by Ray only).

Under direct streaming ``LLMRouter`` asks the deployment handle for a replica without reserving it
(Ray 2.58.0 ``serve/_private/router.py`` ``choose_replica``, ``_reserve=False``), and Serve then never
calls ``on_request_routed``, the router's only call that records a prompt in its prefix tree
(``llm/_internal/serve/routing_policies/prefix_aware/prefix_aware_router.py``). This subclass records
it in ``choose_replicas`` for the replica ``LLMRouter`` takes: the first of the first rank
(``llm/_internal/serve/core/ingress/router.py`` ``_pick_replica``). The insert is sent without
waiting (the tree actor runs calls from one caller in order, so the next match sees it), where Ray's
own hook blocks the router's event loop on ``ray.get``. Only this module imports Ray; the choice of
class is :mod:`.routing`'s.
"""

from __future__ import annotations

import time
from typing import Any

from ray.llm._internal.serve.routing_policies.prefix_aware.prefix_aware_router import (
    PrefixCacheAffinityRouter,
)


def first_pick(ranks: list[Any]) -> Any:
    """The replica ``LLMRouter`` takes from ``choose_replicas``' ranks (None when there is none)."""
    return next((replica for rank in ranks for replica in rank), None)


class DirectStreamingPrefixRouter(PrefixCacheAffinityRouter):
    """Ray's prefix router that records each prompt for the replica it picks."""

    async def choose_replicas(self, candidate_replicas: list[Any], pending_request: Any = None) -> Any:
        ranks = await super().choose_replicas(candidate_replicas, pending_request=pending_request)
        picked = first_pick(ranks)
        if picked is None or pending_request is None or not pending_request.args:
            return ranks
        try:
            text = self._extract_text_from_request(pending_request)
        except ValueError:  # no messages / prompt: nothing to remember
            return ranks
        if text:
            self._tree_actor.insert.remote(text, picked.replica_id.to_full_id_str(), time.time())
        return ranks

    def on_request_routed(self, pending_request: Any, replica_id: Any, result: Any) -> None:
        """Recorded at the pick already; a reserving caller would record it twice."""
