"""The Karpenter interruption queue gets a new name on every creation (SQS refuses a deleted queue's
name for 60 s: `QueueDeletedRecently`), and that real name is what the controller, the EventBridge
targets and the IAM policies use."""

from __future__ import annotations

import json
import re
from typing import Any

from platform_support import Graph

from llmctl.infra.plan.offline import ACCOUNT_ID, UNKNOWN, OfflineMocks, Registered, run_offline
from llmctl.infra.platform.config import PlatformConfig
from llmctl.infra.platform.karpenter import queue_name_prefix

QUEUE = "aws:sqs/queue:Queue"
TARGET = "aws:cloudwatch/eventTarget:EventTarget"


def _create(config: PlatformConfig, *, preview: bool = False) -> Graph:
    """One run of the platform program, as a fresh creation (not the cached test graphs)."""
    from llmctl.infra.platform.program import build_platform

    mocks = OfflineMocks(region=config.region, computed=not preview)
    resources: list[Registered] = run_offline(lambda: build_platform(config), mocks=mocks, preview=preview)
    return Graph(resources)


def _statement(policy: str, sid: str | None = None) -> dict[str, Any]:
    statements = json.loads(policy)["Statement"]
    return next(s for s in statements if sid is None or s.get("Sid") == sid)


def _queue_name(graph: Graph) -> str:
    name = graph.named("karpenter-release").inputs["values"]["settings"]["interruptionQueue"]
    assert isinstance(name, str)
    return name


def test_each_creation_names_the_queue_anew_and_everything_uses_that_name() -> None:
    config = PlatformConfig()
    names = []
    for _ in range(2):
        graph = _create(config)
        queue = graph.named("karpenter-interruption").inputs
        assert "name" not in queue and queue["namePrefix"] == "llmctl-dev-karpenter-"
        name = _queue_name(graph)
        assert re.fullmatch(r"llmctl-dev-karpenter-[0-9]{18}[0-9a-f]{8}", name), name
        arn = f"arn:aws:sqs:us-west-2:{ACCOUNT_ID}:{name}"
        targets = graph.of(TARGET)
        assert len(targets) == 5 and {t.inputs["arn"] for t in targets} == {arn}
        controller = _statement(
            graph.named("karpenter-controller-policy").inputs["policy"], "InterruptionQueue"
        )
        assert controller["Resource"] == arn
        assert _statement(graph.named("karpenter-interruption-policy").inputs["policy"])["Resource"] == arn
        names.append(name)
    assert names[0] != names[1]


def test_the_longest_cluster_name_fits_sqs() -> None:
    config = PlatformConfig(cluster_name="c" * 38)
    name = _queue_name(_create(config))
    assert name.startswith(queue_name_prefix("c" * 38)) and len(name) == 38 + len("-karpenter-") + 26 <= 80


def test_a_preview_does_not_invent_a_name() -> None:
    """Before creation the name is unknown: a plan shows it as such, not as a fixed name."""
    assert _queue_name(_create(PlatformConfig(), preview=True)) == UNKNOWN


def test_the_sweep_claims_the_queues_the_platform_creates_and_no_look_alike() -> None:
    """The sweep's name rule and the platform's naming agree (the sweep imports no Pulumi code)."""
    from llmctl.infra.aws.sweep_kinds import BY_NAME, Candidate, Scope
    from llmctl.infra.plan.offline import unique_name
    from llmctl.infra.platform.tags import CLUSTER_TAG

    owned = BY_NAME["interruption-queue"].owned
    url = "https://sqs.us-west-2.amazonaws.com/123456789012/"
    for cluster in ("llmctl-dev", "c" * 38):
        name = unique_name(queue_name_prefix(cluster))
        assert owned(Scope(cluster, "us-west-2"), Candidate(url + name, name, {CLUSTER_TAG: cluster}))
        # the same name without the stack's tag, or another cluster whose name extends ours
        assert owned(Scope(cluster, "us-west-2"), Candidate(url + name, name, {})) is None
        assert (
            owned(Scope(cluster[:-1], "us-west-2"), Candidate(url + name, name, {CLUSTER_TAG: cluster}))
            is None
        )
