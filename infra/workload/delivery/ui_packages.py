"""How a workload UI's pod gets its Python packages: the UI's lock (``serving/locks/<ui>.txt``), as the
runtimes get theirs (pure, no cloud calls).

Only a UI that installs packages on its base image has a lock (the Gradio UI on ``python:3.11-slim``;
Open WebUI's image carries its own).

- **EKS**: `up` uploads the lock's wheelhouse to the platform's cache bucket once, under the same
  content-addressed prefix a runtime lock's goes to (`wheelhouse.py`). The UI pod runs as its own
  service account, `llmctl-ui`, whose Pod Identity role may only read that prefix; an init container
  (the pinned AWS CLI image) copies the prefix into an emptyDir and the UI container checks the lock's
  sha256 against its own spec, then installs it with `--no-index --find-links --require-hashes`. A pod start or restart needs only S3.
- **An existing cluster** (`--target kubeconfig`, no llmctl bucket): the lock goes into the UI's
  ConfigMap beside the app and the container installs it from the package index, every file checked
  against the lock's hashes: that cluster needs index access (`up` says so).
"""

from __future__ import annotations

from typing import Any

from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import LOCK_FILE, pip_install, venv_in
from llmctl.infra.workload.delivery.wheelhouse import wheelhouse_key
from llmctl.infra.workload.delivery.wheelhouse_pods import (
    install_from_wheelhouse,
    with_wheelhouse,
)
from llmctl.infra.workload.meta import metadata
from llmctl.serving.lockfiles import LockSpec, locks

Obj = dict[str, Any]

#: the UI pod's service account (EKS: its Pod Identity role reads the UI lock's wheelhouse, nothing else)
UI_SERVICE_ACCOUNT = "llmctl-ui"
#: where the init container puts the UI lock's wheelhouse (an emptyDir shared with the UI container)
UI_PACKAGES_DIR = "/opt/llmctl/ui/wheelhouse"
UI_PACKAGES_VOLUME = "llmctl-ui-packages"
FETCH_UI_CONTAINER = "fetch-ui-packages"
#: the UI container's work volume (an emptyDir): its home, its working directory and the venv its lock
#: goes into; the UI runs as a non-root user on a read-only root filesystem, so it writes nowhere else
#: but /tmp (Gradio's uploads and caches)
UI_WORK = "/work"
UI_VENV = f"{UI_WORK}/venv"


def ui_lock(config: WorkloadConfig) -> LockSpec | None:
    """The lock of the blueprint's UI (None: no UI, or one whose image carries its packages)."""
    for spec in locks().locks.values():
        if spec.kind == "ui" and spec.component == config.blueprint.ui:
            return spec
    return None


def from_bucket(config: WorkloadConfig) -> bool:
    """Whether the UI pod fetches its wheelhouse from the cache bucket (EKS) rather than the index."""
    return config.platform.target == "eks"


def install_command(config: WorkloadConfig, spec: LockSpec, app_dir: str) -> str:
    """Shell that installs the UI's lock into a venv on the pod's work volume (the image's own
    site-packages belong to root): from the fetched wheelhouse with no index (EKS), else from the
    index, hash-checked, with the lock read from the app's ConfigMap mounted at `app_dir`."""
    if from_bucket(config):
        install = install_from_wheelhouse(spec, UI_PACKAGES_DIR)
    else:
        install = pip_install(["--require-hashes", "-r", f"{app_dir}/{LOCK_FILE}"])
    return f"{venv_in(UI_VENV)} && {install}"


def configmap_files(config: WorkloadConfig, spec: LockSpec) -> dict[str, str]:
    """What the UI's ConfigMap carries besides the app: the lock, where the pod installs from the index."""
    return {} if from_bucket(config) else {LOCK_FILE: spec.path.read_text(encoding="utf-8")}


def with_packages(config: WorkloadConfig, spec: LockSpec, pod_spec: Obj) -> Obj:
    """The UI pod spec with its wheelhouse fetched from S3 by an init container, under the UI's own
    service account (EKS); unchanged elsewhere."""
    if not from_bucket(config):
        return pod_spec
    return with_wheelhouse(
        config,
        spec,
        pod_spec,
        fetch_name=FETCH_UI_CONTAINER,
        volume=UI_PACKAGES_VOLUME,
        folder=UI_PACKAGES_DIR,
        service_account=UI_SERVICE_ACCOUNT,
    )


def service_account(config: WorkloadConfig) -> list[Obj]:
    """The UI's service account (EKS: the Pod Identity association for its wheelhouse targets it)."""
    if not from_bucket(config) or ui_lock(config) is None:
        return []
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(config, UI_SERVICE_ACCOUNT, "ui")}
    ]


def needs_ui_access(config: WorkloadConfig) -> str | None:
    """The key prefix (no trailing slash) the UI pod reads in the cache bucket, or None."""
    spec = ui_lock(config)
    return wheelhouse_key(spec) if spec is not None and from_bucket(config) else None
