"""Optional UIs: Open WebUI (talks to the OpenAI API) and Gradio (talks to the seed's /infer route).

Each is a Deployment on the CPU head pool plus a ClusterIP Service `<blueprint>-ui` on port 80,
reached with `kubectl port-forward` (or `llmctl connect`). Their images are pinned in
`blueprints/data/versions.yaml`; the Gradio pod installs its lock (`serving/locks/gradio.txt`) as
`ui_packages.py` describes, with no package index on EKS.
"""

from __future__ import annotations

from llmctl.blueprints.versions import by_digest, versions
from llmctl.errors import LlmctlError
from llmctl.infra.workload.builders import common, placement, writable
from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.builders.exposure import port, service
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery import ui_packages
from llmctl.infra.workload.delivery.serving_code import NON_ROOT_USER

UI_PORT = 80
WEBUI_SECRET = "open-webui-secret"
WEBUI_SECRET_KEY = "WEBUI_SECRET_KEY"
OPEN_WEBUI_PORT = 8080
#: Open WebUI's data folder in its image (DATA_DIR: open-webui v0.9.1 backend/open_webui/env.py, BACKEND_DIR
#: / "data"; the image's WORKDIR is /app/backend): accounts, chats, uploads, the vector store, model caches
OPEN_WEBUI_DATA = "/app/backend/data"
#: the static folder in the image (env.py STATIC_DIR, OPEN_WEBUI_DIR / "static"), and where it lives on a
#: volume instead: at every start the backend deletes its files and copies the frontend build's static
#: files over them (config.py, "Static DIR"), so it must be writable
OPEN_WEBUI_IMAGE_STATIC = "/app/backend/open_webui/static"
OPEN_WEBUI_STATIC = "/opt/llmctl/open-webui-static"
#: copies the image's static folder to the volume before the start refills it (the folders the frontend
#: build lacks: assets/pdf-style.css for chat PDFs, swagger-ui); fonts stay in the image, where FONTS_DIR
#: reads them (env.py: OPEN_WEBUI_DIR / "static" / "fonts", independent of STATIC_DIR)
_SEED_STATIC = (
    f'cd {OPEN_WEBUI_IMAGE_STATIC} && for entry in *; do [ "$entry" = fonts ] || cp -R "$entry" '
    f"{OPEN_WEBUI_STATIC}/; done"
)
GRADIO_PORT = 7860

_GRADIO_APP = '''\
"""Gradio chat UI for an llmctl endpoint and its /infer route."""
import hmac
import os

KEY = os.environ.get("LLMCTL_API_KEY", "")


def allowed(username, password):
    """With an API key on the endpoint, the UI asks for it as the password (any user name)."""
    return bool(KEY) and hmac.compare_digest(password.encode(), KEY.encode())


import gradio as gr
import httpx

ENDPOINT = os.environ["LLMCTL_ENDPOINT"].rstrip("/")
HEADERS = {"Authorization": "Bearer " + KEY} if KEY else {}


def answer(message, history):
    response = httpx.get(ENDPOINT + "/infer", params={"sentence": message}, headers=HEADERS, timeout=600)
    response.raise_for_status()
    return response.text


gr.ChatInterface(answer, title=os.environ.get("LLMCTL_TITLE", "llmctl")).launch(
    server_name="0.0.0.0",
    server_port=int(os.environ.get("GRADIO_PORT", "7860")),
    auth=allowed if KEY else None,
    auth_message="Password: the API key of the endpoint",
)
'''


def ui_service_name(config: WorkloadConfig) -> str:
    """Name of the UI's Service."""
    return f"{config.blueprint.name}-ui"


def _ui_pod(config: WorkloadConfig, container: Obj, volumes: list[Obj]) -> Obj:
    return {
        **placement.scheduling(placement.cpu_pool(config)),
        "containers": [container],
        "volumes": volumes,
    }


def open_webui(config: WorkloadConfig, endpoint_url: str) -> list[Obj]:
    """Open WebUI pointed at the endpoint's OpenAI API (`<endpoint_url>/v1`), as llmctl's non-root user on
    a read-only root filesystem (checked with the pinned release: benchmarks/verify_open_webui.py).

    The image is built as root (its Dockerfile's `ARG UID=0`: /app and /root belong to root, /root mode
    700), so another user reads the app but writes nothing of the image: every place it writes is an
    emptyDir. Its data folder (the database, uploads, the vector store, the model caches the image's ENV
    puts under it); its static folder (`STATIC_DIR`, seeded from the image's by an init container;
    without it the start's refill fails file by file with a read-only error); HOME, /tmp and /var/tmp
    (`writable.read_only_root`: the image's HOME, /root, is root's alone; chromadb keeps its telemetry id
    in ~/.cache, torch makes its inductor folder in the temporary folder). start.sh writes
    `.webui_secret_key` into /app/backend only without WEBUI_SECRET_KEY, which the pod always has."""
    key_env = common.api_key_env(config)
    env: list[Obj] = [
        {"name": "OPENAI_API_BASE_URL", "value": endpoint_url + "/v1"},
        {"name": "ENABLE_OLLAMA_API", "value": "false"},
        # the key that signs the UI's session tokens: from a Secret, the same across restarts (without it
        # Open WebUI makes one per start, in its data folder)
        common.secret_env("WEBUI_SECRET_KEY", WEBUI_SECRET, WEBUI_SECRET_KEY),
        *(
            [{**key_env[0], "name": "OPENAI_API_KEY"}]
            if key_env
            else [{"name": "OPENAI_API_KEY", "value": "none"}]
        ),
        {"name": "STATIC_DIR", "value": OPEN_WEBUI_STATIC},
    ]
    image = by_digest(versions().images["open_webui"].image)
    container: Obj = {
        "name": "open-webui",
        "image": image,
        "ports": [{"name": "http", "containerPort": OPEN_WEBUI_PORT}],
        "env": env,
        "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "2Gi"}},
        **common.http_probes("/health", "http", startup_seconds=600),
        "volumeMounts": [
            {"name": "data", "mountPath": OPEN_WEBUI_DATA},
            {"name": "static", "mountPath": OPEN_WEBUI_STATIC},
        ],
    }
    seed: Obj = {
        "name": "seed-static",
        "image": image,
        "command": ["/bin/sh", "-c", _SEED_STATIC],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "static", "mountPath": OPEN_WEBUI_STATIC}],
        "securityContext": {"readOnlyRootFilesystem": True},
    }
    pod = _ui_pod(config, container, [{"name": "data", "emptyDir": {}}, {"name": "static", "emptyDir": {}}])
    pod = writable.read_only_root({**pod, "initContainers": [seed]}, "open-webui", installs=False)
    # the image has no user but root (`ARG UID=0`); the UI runs as llmctl's non-root user, as the Gradio UI
    # does (`security.harden_pod` keeps a pod's chosen user, init container included)
    pod["securityContext"] = {"runAsUser": NON_ROOT_USER[0], "runAsGroup": NON_ROOT_USER[1]}
    name = f"{config.blueprint.name}-open-webui"
    return [
        common.deployment(config, name, "ui", pod, replicas=1),
        service(config, ui_service_name(config), "ui", [port("http", UI_PORT, "http")], exposed=False),
    ]


def gradio(config: WorkloadConfig, endpoint_url: str) -> list[Obj]:
    """A Gradio chat UI pointed at the endpoint's /infer route (`<endpoint_url>/infer`), installing
    the gradio lock at start (from the cache bucket's wheelhouse on EKS: no package index)."""
    lock = ui_packages.ui_lock(config)
    if lock is None:
        raise LlmctlError(
            "no dependency lock for the gradio UI in serving/locks/locks.yaml",
            "add its row (kind: ui, component: gradio) and run `make locks`",
        )
    files = {"app.py": _GRADIO_APP, **ui_packages.configmap_files(config, lock)}
    script, items = common.config_map(config, f"{config.blueprint.name}-gradio-app", files, "ui")
    container: Obj = {
        "name": "gradio",
        "image": by_digest(versions().images["python_slim"].image),
        "command": [
            "/bin/sh",
            "-c",
            f"{ui_packages.install_command(config, lock, '/app')} && exec python /app/app.py",
        ],
        "ports": [{"name": "http", "containerPort": GRADIO_PORT}],
        "env": [
            {"name": "LLMCTL_ENDPOINT", "value": endpoint_url},
            {"name": "LLMCTL_TITLE", "value": config.blueprint.description or config.blueprint.name},
            {"name": "GRADIO_PORT", "value": str(GRADIO_PORT)},
            {"name": "HOME", "value": ui_packages.UI_WORK},  # the image has no home for the UI's user
            *common.api_key_env(config),
        ],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        **common.http_probes("/", "http", startup_seconds=600),
        "workingDir": ui_packages.UI_WORK,
        "securityContext": {"readOnlyRootFilesystem": True},
        "volumeMounts": [
            {"name": "app", "mountPath": "/app", "readOnly": True},
            {"name": "work", "mountPath": ui_packages.UI_WORK},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    pod = _ui_pod(
        config,
        container,
        [
            {"name": "app", "configMap": {"name": script["metadata"]["name"], "items": items}},
            {"name": "work", "emptyDir": {"sizeLimit": "2Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
    )
    # python:slim has no user but root and the UI needs none: it runs as llmctl's non-root user, as the
    # model-mirror Job on the same image does (`security.harden_pod` keeps a pod's chosen user)
    pod["securityContext"] = {"runAsUser": NON_ROOT_USER[0], "runAsGroup": NON_ROOT_USER[1]}
    pod = ui_packages.with_packages(config, lock, pod)
    name = f"{config.blueprint.name}-gradio"
    return [
        script,
        common.deployment(config, name, "ui", pod, replicas=1),
        service(config, ui_service_name(config), "ui", [port("http", UI_PORT, "http")], exposed=False),
    ]


def secrets(config: WorkloadConfig, webui_secret: str | None) -> list[Obj]:
    """The UI's own Secrets (Open WebUI's session signing key; `webui_secret` None: an empty value,
    as for `llmctl render`, which redacts it anyway)."""
    if config.blueprint.ui != "open-webui":
        return []
    return [common.opaque_secret(config, WEBUI_SECRET, WEBUI_SECRET_KEY, webui_secret)]


def build(config: WorkloadConfig, endpoint_url: str) -> list[Obj]:
    """The blueprint's UI objects (empty for `ui: none`); `endpoint_url` is the app's in-cluster root."""
    if config.blueprint.ui == "open-webui":
        return open_webui(config, endpoint_url)
    if config.blueprint.ui == "gradio":
        return gradio(config, endpoint_url)
    return []
