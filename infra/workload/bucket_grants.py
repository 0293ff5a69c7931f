"""Which prefixes of the platform's cache bucket a workload's pods may read and write (pure).

The tenant rule (docs/security.md): only the CLI writes what pods execute. A workload's roles
read the llmctl wheels and lock wheelhouses the CLI uploaded (`llmctl/wheels/`, `llmctl/wheelhouse/`)
and may write only their own caches: the mirror of their own model revision
(`models/<model id>/<revision>/`, written by the workload's mirror Job) and their own compile cache
(`neuron-cache/<namespace>/`, one per workload). No other prefix is granted, so another workload's
compile cache, another model's mirror and every wheel stay out of reach of a pod's writes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from llmctl.infra.workload.builders.cache import (
    compile_cache_enabled,
    compile_cache_prefix,
    mirror_enabled,
    model_prefix,
)
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery import WHEEL_PREFIX, needs_bucket_access
from llmctl.infra.workload.wheelhouse import WHEELHOUSE_PREFIX


class Grants(BaseModel):
    """What one workload identity may do in the cache bucket, by key prefix (no trailing slash)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: tuple[str, ...] = Field(
        (),
        description="Prefixes it may list and get objects under (the code the CLI wrote: wheels, wheelhouses).",
    )
    write: tuple[str, ...] = Field(
        (),
        description="Prefixes it may also put and delete objects under: its own model mirror and its own "
        "compile cache, never code another workload installs.",
    )


def s3_statements(partition: str, bucket: str, grants: Grants) -> list[dict[str, object]]:
    """List, get (and, under `grants.write`, put and delete) below the granted prefixes, nothing else,
    in the account's ARN partition. A prefix matches itself and every key below `<prefix>/`."""
    arn = f"arn:{partition}:s3:::{bucket}"
    every = sorted({*grants.read, *grants.write})
    listed = [pattern for prefix in every for pattern in (prefix, f"{prefix}/*")]
    statements: list[dict[str, object]] = [
        {
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [arn],
            "Condition": {"StringLike": {"s3:prefix": listed}},
        },
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": [f"{arn}/{prefix}/*" for prefix in every],
        },
    ]
    if grants.write:
        statements.append(
            {
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                "Resource": [f"{arn}/{prefix}/*" for prefix in sorted(grants.write)],
            }
        )
    return statements


def serving_grants(config: WorkloadConfig) -> Grants | None:
    """The serving pods' (and the mirror Job's) grants, or None when they need no bucket access."""
    read = (WHEEL_PREFIX, WHEELHOUSE_PREFIX) if needs_bucket_access(config) else ()
    write = [model_prefix(config)] if mirror_enabled(config) else []
    if compile_cache_enabled(config):
        write.append(compile_cache_prefix(config))
    if not read and not write:
        return None
    return Grants(read=read, write=tuple(write))


def read_grants(prefix: str) -> Grants:
    """Read-only access to one prefix (the Gradio UI pod: its lock's wheelhouse)."""
    return Grants(read=(prefix,))
