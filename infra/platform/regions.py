"""The AWS regions this machine knows offline: botocore's endpoint data (shipped with boto3).

A region name is checked against it before anything is planned or called, so a typo such as
`us-wset-2` is refused with the closest real name instead of planning subnets in `us-wset-2a`.
"""

from __future__ import annotations

import functools

from llmctl.errors import BadInput, did_you_mean


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region of every partition in botocore's endpoint data (no network, no credentials)."""
    from botocore.loaders import Loader

    data = Loader().load_data("endpoints")
    return frozenset(region for partition in data["partitions"] for region in partition.get("regions", {}))


def region_problem(region: str) -> str | None:
    """None for a known region; else one sentence naming the region and, for a typo, the closest one."""
    if region in known_regions():
        return None
    close = did_you_mean(region, sorted(known_regions()))
    return f"{region!r} is not an AWS region" + (f"; {close}" if close else " (e.g. 'us-west-2')")


def check_region_flag(region: str) -> None:
    """`--region` names a known region, or one line with the closest name (bad input, exit 2)."""
    problem = region_problem(region)
    if problem:
        raise BadInput(
            f"--region {problem}",
            "pass a region code such as us-west-2 (`aws ec2 describe-regions` lists them)",
        )
