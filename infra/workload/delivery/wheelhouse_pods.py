"""The pod pieces that install a lock's wheelhouse from the cache bucket with no package index (pure):
a workload UI's pod (`ui_packages.py`) and the model-mirror Job (`builders/cache.py`).

An init container (the pinned AWS CLI image, with the pod's own Pod Identity, which may only read that
prefix) copies ``llmctl/wheelhouse/<sha256 of the lock>/`` into an emptyDir; the main container checks
the lock's sha256 against the value in its own spec (so a changed object in S3 is refused), then
installs it with ``--no-index --find-links --require-hashes`` (pip checks every wheel against the
lock). Only the CLI writes that prefix (`prepare/delivery.py`, `upload_lock_wheelhouse`).
"""

from __future__ import annotations

import shlex
from typing import Any

from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import (
    LOCK_FILE,
    aws_cli_container,
    cache_bucket_name,
    pip_install,
    verify_step,
)
from llmctl.infra.workload.delivery.wheelhouse import lock_digest, wheelhouse_key
from llmctl.serving.lockfiles import LockSpec

Obj = dict[str, Any]


def lock_wheelhouse_uri(config: WorkloadConfig, spec: LockSpec) -> str:
    """s3:// prefix of a lock's wheelhouse in the platform's cache bucket."""
    return f"s3://{cache_bucket_name(config)}/{wheelhouse_key(spec)}/"


def install_from_wheelhouse(spec: LockSpec, folder: str) -> str:
    """Shell: check the fetched lock's sha256 against the spec's value, then install it from `folder`
    with no index, every wheel hash-checked."""
    lock = f"{folder}/{LOCK_FILE}"
    check = verify_step({lock: lock_digest(spec)})
    return (
        check + " && " + pip_install(["--no-index", "--find-links", folder, "--require-hashes", "-r", lock])
    )


def with_wheelhouse(
    config: WorkloadConfig,
    spec: LockSpec,
    pod_spec: Obj,
    *,
    fetch_name: str,
    volume: str,
    folder: str,
    service_account: str,
) -> Obj:
    """The pod spec, run as `service_account`, with the lock's wheelhouse fetched into `folder` (the
    emptyDir `volume`, mounted read-only into every container) by the init container `fetch_name`."""
    uri = lock_wheelhouse_uri(config, spec)
    script = f"aws s3 cp --only-show-errors --recursive {shlex.quote(uri)} {folder}/"
    fetch = aws_cli_container(config, fetch_name, script, volume, folder)
    mount = {"name": volume, "mountPath": folder, "readOnly": True}
    containers = [{**c, "volumeMounts": [*c.get("volumeMounts", []), mount]} for c in pod_spec["containers"]]
    return {
        **pod_spec,
        "serviceAccountName": service_account,
        "initContainers": [*pod_spec.get("initContainers", []), fetch],
        "containers": containers,
        "volumes": [*pod_spec.get("volumes", []), {"name": volume, "emptyDir": {}}],
    }
