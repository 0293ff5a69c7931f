"""A read-only root filesystem for the serving containers (Ray, Triton, TorchServe) and Open WebUI: every
place they write is an emptyDir (issue 53, finding 8; Open WebUI's own folders: `ui.py`).

What a serving container writes, and where it goes instead of the image:

- base-image mode's install (the runtime's lock and the app): into the user site under
  `$PYTHONUSERBASE` (`delivery.serving_code.user_site_step`), on the home volume; every process of the
  pod sees it, since the variable is in the container's env: `ray start`, the raylet and the workers it
  spawns (they inherit its environment), KubeRay's `wait-gcs-ready` init container (KubeRay v1.7.0
  controllers/ray/common/pod.go copies the Ray container's env, volume mounts and securityContext to
  it), TorchServe's Python workers (its frontend runs them with the start's interpreter and
  environment: pytorch/serve ts/model_server.py `--python sys.executable`) and the preStop hook. The
  locks hold only what the image lacks (serving/locks/locks.yaml: the image's packages are
  constraints, never emitted), so the user site adds packages and shadows none. On an externally
  managed Python (PEP 668: Triton's, Ubuntu's), where pip refuses `--user` too, into the venv at
  `VENV_DIR`, as before, now on a volume of its own (a built image keeps its own venv there: no
  volume over it);
- Ray's session folder `/tmp/ray` (logs, sockets, runtime envs), the temporary files of pip and
  Python's `tempfile`, llmctl's model and compile caches (`/tmp/llmctl-models`, `/tmp/llmctl-neuron`,
  `/tmp/llmctl-compile`) and the drain marker: `/tmp`. TMPDIR names it, first in `tempfile`'s list
  (CPython Lib/tempfile.py `_candidate_tempdir_list`), ahead of the Neuron DLCs' `TEMP` (a folder of
  the image: aws-neuron/deep-learning-containers docker/pytorch/inference/2.7.0/Dockerfile.neuronx);
- TEMP, which the Neuron DLCs set to a folder of the image and TorchServe hands Java as
  `java.io.tmpdir` (pytorch/serve ts/model_server.py): `/tmp` too; TorchServe's pid file goes to
  Python's temporary folder (the same file), its logs under its working directory (`logs/`:
  frontend/server/src/main/resources/log4j2.xml), which is llmctl's work volume (`extra` below);
- `/var/tmp`: the Neuron persistent cache's default folder (`/var/tmp/neuron-compile-cache`:
  awsdocs-neuron about-neuron/arch/neuron-features/neuron-caching.rst, v2.29.1);
- HOME: the engines' and libraries' caches (Hugging Face, vLLM, Triton, FlashInfer, CUDA's compute
  cache). The image's home stays where it is (the Ray images' Python lives in /home/ray/anaconda3:
  ray-project/ray docker/base-deps/Dockerfile), so HOME names a volume of its own. The login shell
  of the start command then reads no ~/.profile: the image's sets nothing but PATH, which the images
  also set as ENV (base-deps Dockerfile), and `conda init`.

A runtime adds the folders of its own (`extra`): Triton's model repository, TorchServe's work folder.
The volumes are on the node's disk (no `medium: Memory`, no size limit), as the container's writable
layer was: the model cache under /tmp can be tens of GB. `/dev/shm` stays the workers' own volume.
KubeRay adds its own emptyDir at /tmp/ray to an autoscaling head (shared with the autoscaler sidecar:
KubeRay v1.7.0 controllers/ray/common/pod.go `addEmptyDir`, which skips only a mount at that very path),
nested in /tmp.
"""

from __future__ import annotations

from llmctl.infra.workload.builders.common import Obj
from llmctl.infra.workload.delivery.serving_code import USER_BASE_ENV, VENV_DIR

#: the containers' home, on a volume of its own (not /home/<user>: the image's Python lives there)
HOME_DIR = "/opt/llmctl/home"
#: base-image mode's install goes into the user site under it (`<base>/lib/pythonX.Y/site-packages`)
USER_BASE = f"{HOME_DIR}/.local"
TMP_DIR = "/tmp"
#: volume name -> mount path of every place a Ray container writes
WRITABLE = {"llmctl-tmp": TMP_DIR, "llmctl-var-tmp": "/var/tmp", "llmctl-home": HOME_DIR}


def writable_env() -> list[Obj]:
    """HOME, the user site's base and TMPDIR, all on the container's volumes."""
    return [
        {"name": "HOME", "value": HOME_DIR},
        {"name": USER_BASE_ENV, "value": USER_BASE},
        {"name": "TMPDIR", "value": TMP_DIR},
        {"name": "TEMP", "value": TMP_DIR},
    ]


#: the volume of the venv an externally managed image's install makes (base-image mode only)
VENV_VOLUME = "llmctl-venv"


def read_only_root(spec: Obj, container: str, extra: dict[str, str] | None = None, *, installs: bool) -> Obj:
    """The pod spec with `container` on a read-only root filesystem: an emptyDir at each place it writes
    (`extra`: volume name -> path, the runtime's own folders; `installs`: the start installs the app,
    base-image mode, which may make a venv at `VENV_DIR`), the env that points there, and
    `readOnlyRootFilesystem` (which `security.harden_pod` keeps)."""
    folders = {**WRITABLE, **({VENV_VOLUME: VENV_DIR} if installs else {}), **(extra or {})}
    mounts = [{"name": name, "mountPath": path} for name, path in folders.items()]
    containers = []
    for each in spec["containers"]:
        if each["name"] == container:
            each = {
                **each,
                "env": [*each.get("env", []), *writable_env()],
                "volumeMounts": [*each.get("volumeMounts", []), *mounts],
                "securityContext": {**(each.get("securityContext") or {}), "readOnlyRootFilesystem": True},
            }
        containers.append(each)
    volumes = [{"name": name, "emptyDir": {}} for name in folders]
    return {**spec, "containers": containers, "volumes": [*spec.get("volumes", []), *volumes]}
