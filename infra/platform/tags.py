"""The standard tags every taggable AWS resource of a platform carries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmctl.infra.platform.config import PlatformConfig

STACK_TAG = "llmctl:stack"
CLUSTER_TAG = "llmctl:cluster"
REQUIRED_TAGS = (STACK_TAG, CLUSTER_TAG)


def standard_tags(
    stack: str,
    cluster: str,
    user: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The user's tags, then resource-specific `extra` tags, then llmctl:stack and llmctl:cluster.

    The llmctl tags win over user tags with the same key: the teardown sweep relies on them.
    """
    tags = dict(user or {})
    tags.update(extra or {})
    tags[STACK_TAG] = stack
    tags[CLUSTER_TAG] = cluster
    return tags


def tags_for(config: PlatformConfig, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The standard tags of a platform config, plus `extra`."""
    return standard_tags(config.stack, config.cluster_name, config.tags, extra)
