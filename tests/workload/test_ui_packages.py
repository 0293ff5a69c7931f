"""The Gradio UI pod's packages: its lock, fetched from the cache bucket's wheelhouse on EKS (its own
service account, an init container, `--no-index --require-hashes`), and on an existing cluster carried
in the app's ConfigMap and installed from the index, hash-checked."""

from __future__ import annotations

import shlex
from typing import Any

from workload_helpers import config_for

from llmctl.blueprints.versions import versions
from llmctl.infra.workload.builders.common import SERVICE_ACCOUNT
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import LOCK_FILE
from llmctl.infra.workload.delivery.ui_packages import (
    FETCH_UI_CONTAINER,
    UI_PACKAGES_DIR,
    UI_PACKAGES_VOLUME,
    UI_SERVICE_ACCOUNT,
    needs_ui_access,
    ui_lock,
)
from llmctl.infra.workload.delivery.wheelhouse import wheelhouse_key
from llmctl.infra.workload.manifests import build_manifests
from llmctl.serving.lockfiles import lock_for, locks, parse_lock, requirement_names

Obj = dict[str, Any]
LOCK = locks().locks["gradio"]


def _objects(config: WorkloadConfig) -> list[Obj]:
    return build_manifests(config, hf_token=None)


def _find(objects: list[Obj], kind: str, name: str) -> Obj:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _existing_cluster(config: WorkloadConfig) -> WorkloadConfig:
    facts = config.platform.model_copy(update={"target": "kubeconfig", "cache_bucket": None})
    return config.model_copy(update={"platform": facts})


def test_the_gradio_lock_belongs_to_the_ui_and_pins_the_recorded_gradio() -> None:
    assert (LOCK.kind, LOCK.component, LOCK.label) == ("ui", "gradio", "the gradio UI")
    assert lock_for("gradio", versions().images["python_slim"].image, kind="ui") == LOCK
    pinned = parse_lock(LOCK.path.read_text())
    assert pinned["gradio"][0] == versions().python["gradio"].value  # one pin, recorded in versions.yaml
    assert {"gradio", "httpx"} <= set(requirement_names(LOCK.requirements_path)) and "httpx" in pinned
    # the lock is resolved for the interpreter the image's tag names (python:3.11-slim: 3.11)
    tag = versions().images["python_slim"].image.split(":", 1)[1]
    assert locks().base(LOCK).python == tag.split("-", 1)[0]


def test_on_eks_the_gradio_pod_fetches_its_wheelhouse_and_installs_with_no_index() -> None:
    config = config_for("llama2-inf2")
    objects = _objects(config)
    account = _find(objects, "ServiceAccount", UI_SERVICE_ACCOUNT)
    assert account["metadata"]["namespace"] == config.ns
    spec = _find(objects, "Deployment", "llama2-inf2-gradio")["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == UI_SERVICE_ACCOUNT != SERVICE_ACCOUNT
    [fetch] = spec["initContainers"]
    assert fetch["name"] == FETCH_UI_CONTAINER
    assert fetch["image"].startswith(versions().images["aws_cli"].image)
    bucket = config.platform.cache_bucket
    assert shlex.split(fetch["command"][-1]) == [
        "aws",
        "s3",
        "cp",
        "--only-show-errors",
        "--recursive",
        f"s3://{bucket}/{wheelhouse_key(LOCK)}/",
        f"{UI_PACKAGES_DIR}/",
    ]
    assert {"name": UI_PACKAGES_VOLUME, "emptyDir": {}} in spec["volumes"]
    [gradio] = spec["containers"]
    assert {"name": UI_PACKAGES_VOLUME, "mountPath": UI_PACKAGES_DIR, "readOnly": True} in gradio[
        "volumeMounts"
    ]
    script = gradio["command"][-1]
    lock = f"{UI_PACKAGES_DIR}/{LOCK_FILE}"
    assert f"--no-index --find-links {UI_PACKAGES_DIR} --require-hashes -r {lock}" in script
    assert script.endswith("&& exec python /app/app.py") and "gradio==" not in script
    # the lock travels in the wheelhouse, not the ConfigMap
    assert LOCK_FILE not in _find(objects, "ConfigMap", "llama2-inf2-gradio-app")["data"]
    assert needs_ui_access(config) == wheelhouse_key(LOCK)


def test_on_an_existing_cluster_the_lock_rides_in_the_configmap_and_comes_from_the_index() -> None:
    config = _existing_cluster(config_for("llama2-inf2"))
    objects = _objects(config)
    assert not [o for o in objects if o["metadata"]["name"] == UI_SERVICE_ACCOUNT]
    app = _find(objects, "ConfigMap", "llama2-inf2-gradio-app")
    assert app["data"][LOCK_FILE] == LOCK.path.read_text()
    spec = _find(objects, "Deployment", "llama2-inf2-gradio")["spec"]["template"]["spec"]
    assert "initContainers" not in spec and "serviceAccountName" not in spec
    assert {"key": LOCK_FILE, "path": LOCK_FILE} in spec["volumes"][0]["configMap"]["items"]
    script = spec["containers"][0]["command"][-1]
    assert f"pip install --no-cache-dir -q --require-hashes -r /app/{LOCK_FILE} &&" in script
    assert "--no-index" not in script
    assert needs_ui_access(config) is None


def test_only_a_ui_that_installs_packages_has_a_lock() -> None:
    assert ui_lock(config_for("llama2-inf2")) == LOCK
    for name in ("tiny-cpu", "llama3-vllm-inf2"):  # no UI; Open WebUI (its image carries its packages)
        config = config_for(name)
        assert ui_lock(config) is None and needs_ui_access(config) is None
        assert not [o for o in _objects(config) if o["metadata"]["name"] == UI_SERVICE_ACCOUNT]
