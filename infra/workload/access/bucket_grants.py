"""Which prefixes of the platform's cache bucket a workload's pods may read and write (pure).

The tenant rule (docs/security.md): only the CLI writes what pods execute. Each kind of pod of a
workload has its own service account and role, granted only what its code does:

- serving pods (Ray workers, Triton and TorchServe pods): read the llmctl wheels and lock wheelhouses
  the CLI uploaded (`llmctl/wheels/`, `llmctl/wheelhouse/`) and the mirror of their model revision
  (`models/<model id>/<revision>/`); write only their own compile cache (`neuron-cache/<namespace>/`,
  one per workload: the replicas compile and publish it);
- the Ray head: read the delivered code only (it installs the wheel too; no replica runs on it, so
  it neither loads weights nor compiles);
- the mirror Job: read its lock's wheelhouse; write only its model revision's mirror prefix.

No other prefix is granted, so another workload's compile cache, another model's mirror and every
wheel stay out of reach of a pod's writes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from llmctl.blueprints.hub_names import SAFE_CHARS
from llmctl.errors import BadInput
from llmctl.infra.workload.builders.cache import (
    compile_cache_enabled,
    compile_cache_prefix,
    mirror_enabled,
    mirror_lock,
    model_prefix,
)
from llmctl.infra.workload.builders.ray import head_service_account
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import WHEEL_PREFIX, needs_bucket_access
from llmctl.infra.workload.delivery.wheelhouse import WHEELHOUSE_PREFIX, wheelhouse_key


class Grants(BaseModel):
    """What one workload identity may do in the cache bucket, by key prefix (no trailing slash)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: tuple[str, ...] = Field(
        (),
        description="Prefixes it may list and get objects under (the code the CLI wrote: wheels, wheelhouses; "
        "the model mirror).",
    )
    write: tuple[str, ...] = Field(
        (),
        description="Prefixes it may also put and delete objects under: its own model mirror (the mirror "
        "Job) or its own compile cache (the serving pods), never code another workload installs.",
    )


def _literal(prefix: str) -> str:
    """The prefix, when IAM reads it literally: no wildcard (``*``, ``?``), no policy variable (``${``),
    no empty or ``..`` segment. A model id or revision reaches here (issue 53, finding 4); the blueprint
    schema refuses such names first (`llmctl.blueprints.hub_names`), this keeps any other path out."""
    segments = prefix.split("/")
    if not set(prefix) <= SAFE_CHARS or any(s in ("", ".", "..") for s in segments):
        raise BadInput(
            f"refusing to grant the bucket prefix {prefix!r}: IAM would not read it literally",
            "set model.id and model.revision to a Hub repository id and a branch, tag or commit",
        )
    return prefix


def s3_statements(partition: str, bucket: str, grants: Grants) -> list[dict[str, object]]:
    """List, get (and, under `grants.write`, put and delete) below the granted prefixes, nothing else,
    in the account's ARN partition. A prefix matches itself and every key below `<prefix>/`; a prefix
    IAM would read as a pattern is refused (`_literal`)."""
    arn = f"arn:{partition}:s3:::{bucket}"
    every = sorted({_literal(prefix) for prefix in (*grants.read, *grants.write)})
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


def _code(config: WorkloadConfig) -> tuple[str, ...]:
    """The prefixes of the code the CLI delivered (wheel delivery), read by every Ray and serving pod."""
    return (WHEEL_PREFIX, WHEELHOUSE_PREFIX) if needs_bucket_access(config) else ()


def _grants(read: tuple[str, ...], write: tuple[str, ...] = ()) -> Grants | None:
    return Grants(read=read, write=write) if read or write else None


def serving_grants(config: WorkloadConfig) -> Grants | None:
    """The serving pods' grants (Ray workers, Triton, TorchServe), or None when they need no bucket access."""
    read = (*_code(config), *([model_prefix(config)] if mirror_enabled(config) else []))
    write = (compile_cache_prefix(config),) if compile_cache_enabled(config) else ()
    return _grants(read, write)


def head_grants(config: WorkloadConfig) -> Grants | None:
    """The Ray head's grants: the delivered code it installs, or None (an image, or no Ray head)."""
    return _grants(_code(config)) if head_service_account(config) else None


def mirror_grants(config: WorkloadConfig) -> Grants | None:
    """The mirror Job's grants: its lock's wheelhouse, and its model revision's mirror (None: no mirror)."""
    if not mirror_enabled(config):
        return None
    return _grants((wheelhouse_key(mirror_lock()),), (model_prefix(config),))


def read_grants(prefix: str) -> Grants:
    """Read-only access to one prefix (the Gradio UI pod: its lock's wheelhouse)."""
    return Grants(read=(prefix,))
