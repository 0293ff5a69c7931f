"""How the serving code reaches the pods, and the pod pieces each way needs (pure, no cloud calls).

Three deliveries (:class:`~llmctl.infra.workload.config.Delivery`):

- **image**: the app is baked into the image the pods run: the `--image` override, the blueprint's
  `image.serving_image`, or the stack's ECR image when `up` found it with `DescribeImages`
  (pushed by `llmctl images build --push`).
- **wheel** (EKS, no image found): `up` builds a wheel of this llmctl and uploads it to the
  platform's cache bucket under a content-addressed key (`prepare/delivery.py`). Each serving pod
  gets an init container (the pinned AWS CLI image) that copies the wheel and the runtime lock's
  wheelhouse (`wheelhouse.py`) into an emptyDir with the pod's Pod Identity; the serving container
  then checks the lock's and the wheel's sha256 against the values in its own spec (written by `up`),
  installs the runtime's lock (the file its Dockerfile installs) from that wheelhouse with
  `--no-index --require-hashes`, and the local wheel with `--no-deps`, and starts. Only the CLI may
  write those prefixes (`bucket_grants.py`).
- **configmap** (an existing cluster, `--target kubeconfig`, no image): `up` builds the same wheel
  and the workload stack puts it in ConfigMaps, in parts under the API server's 1 MiB (`wheel_parts.py`:
  named after the wheel's content digest so new code rolls the pods), combined by one projected volume
  mounted read-only into each serving pod; the container joins the parts, checks the wheel's sha256
  against its spec, takes the runtime's lock out of the wheel (which carries it), installs it from the
  package index (hash-checked: a wheelhouse does not fit a ConfigMap) and the wheel with `--no-deps`.

On an externally managed image (PEP 668) the installs go into a `--system-site-packages` venv that
is put first on PATH (:func:`venv_step`).

The app itself is never installed from a package index (by its distribution name `llmctl-eks`,
which this project does not publish, or by `llmctl`, which belongs to another project on PyPI). Without a decision from `up` (render, validate,
preview), :func:`planned_delivery` gives the plan: `up` replaces its placeholder digest.
"""

from __future__ import annotations

import functools
import shlex
from pathlib import Path
from typing import Any

from llmctl import DISTRIBUTION, __version__
from llmctl.errors import LlmctlError
from llmctl.infra.workload.config import Delivery, WorkloadConfig
from llmctl.infra.workload.delivery.wheel_parts import (
    ASSEMBLED_DIR,
    join_step,
    part_configmaps,
    part_count,
    part_names,
    parts_volume,
    wheel_size,
)
from llmctl.infra.workload.delivery.wheelhouse import WHEELHOUSE_PREFIX, lock_digest, wheelhouse_key
from llmctl.serving.lockfiles import LockSpec, lock_for, parse_lock

Obj = dict[str, Any]

#: key prefix of delivered wheels in the cache bucket: llmctl/wheels/<sha256 of the contents>/<file>
WHEEL_PREFIX = "llmctl/wheels"
#: the digest segment of an offline plan's key (the real one is known once `up` built the wheel)
PLANNED_DIGEST = "planned"
#: where the fetched wheel lives in the pod (an emptyDir shared by the init and serving containers)
APP_DIR = "/opt/llmctl/app"
APP_VOLUME = "llmctl-app"
FETCH_CONTAINER = "fetch-llmctl"
#: ConfigMap delivery: the parts' names start with it (`wheel_parts.py`)
CONFIGMAP_PREFIX = "llmctl-app"
#: `up`'s choice: auto (default), image (the ECR image must exist) or wheel (skip the ECR check)
DELIVERY_ENV = "LLMCTL_DELIVERY"


def wheel_file() -> str:
    """The wheel's file name (PEP 427: the normalised distribution name, pure Python)."""
    return f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"


def image_tag(digest: str) -> str:
    """The ECR tag of the image of this code: `<version>-<first 12 hex of the code digest>`.

    `llmctl images build --push` writes it and `up` looks it up, both with the digest of the wheel
    of the code they run, so an image of older code (same version) is never taken for this one.
    """
    return f"{__version__.replace('+', '_')}-{digest[:12]}"


def wheel_key(digest: str, file: str | None = None) -> str:
    """The content-addressed key of a wheel in the cache bucket."""
    return f"{WHEEL_PREFIX}/{digest}/{file or wheel_file()}"


def fixed_image(config: WorkloadConfig) -> Delivery | None:
    """The image delivery the config or blueprint names (no cloud check needed), or None."""
    if config.image:
        return Delivery(mode="image", image=config.image, reason="the --image override", decided=True)
    if config.blueprint.image.serving_image:
        return Delivery(
            mode="image",
            image=config.blueprint.image.serving_image,
            reason="the blueprint's image.serving_image",
            decided=True,
        )
    return None


def configmap_name(digest: str | None) -> str:
    """The base name of the ConfigMaps holding the wheel's parts (`<base>-1` ...): named after its content
    digest (new code, new names, new pods)."""
    return f"{CONFIGMAP_PREFIX}-{(digest or PLANNED_DIGEST)[:12]}"


def configmap_names(delivery: Delivery) -> list[str]:
    """The ConfigMaps holding the delivered wheel's parts, in the order the pod joins them."""
    return part_names(configmap_name(delivery.wheel_digest), part_count(wheel_size(delivery.wheel_path)))


def configmap_delivery(
    config: WorkloadConfig, wheel: Path | None = None, digest: str | None = None
) -> Delivery:
    """An existing cluster without a built image: the wheel in a ConfigMap the pods mount."""
    return Delivery(
        mode="configmap",
        image=config.blueprint.image.base,
        wheel_path=str(wheel) if wheel else None,
        wheel_digest=digest,
        reason=f"no image on this cluster: the pods install this llmctl's wheel from the ConfigMaps "
        f"{configmap_name(digest)}-*",
        decided=wheel is not None,
    )


def cache_bucket_name(config: WorkloadConfig) -> str:
    """The platform's cache bucket (EKS), or offline its placeholder (the real name has a suffix)."""
    return config.platform.cache_bucket or f"llmctl-{config.stack}-{config.platform.region}-cache"


def planned_delivery(config: WorkloadConfig) -> Delivery:
    """The delivery without asking AWS: a named image, else a wheel in the cache bucket (EKS)."""
    fixed = fixed_image(config)
    if fixed is not None:
        return fixed
    if config.platform.target != "eks":
        return configmap_delivery(config)
    return Delivery(
        mode="wheel",
        image=config.blueprint.image.base,
        wheel_uri=f"s3://{cache_bucket_name(config)}/{wheel_key(PLANNED_DIGEST)}",
        reason="planned: `up` uses the stack's ECR image when it exists, else uploads this wheel",
    )


def delivery_of(config: WorkloadConfig) -> Delivery:
    """The delivery in effect: the one `up` decided, else the plan."""
    return config.delivery or planned_delivery(config)


# --- pod pieces ------------------------------------------------------------------------------------

#: where the wheelhouse lands in the pod (wheel mode), beside the llmctl wheel
WHEELHOUSE_DIR = f"{APP_DIR}/wheelhouse"
#: the lock inside the ConfigMap (configmap mode) and inside a wheelhouse
LOCK_FILE = "requirements.txt"
#: the virtual environment made on an externally managed image (PEP 668), seeing the image's packages
VENV_DIR = "/opt/llmctl/venv"
#: wheel mode: the wheels the lock leaves out (a CPU torch; `outside_wheels.py`), and their
#: hash-pinned requirements, beside the lock's wheelhouse
OUTSIDE_DIR = f"{WHEELHOUSE_DIR}/outside"


def runtime_lock(config: WorkloadConfig, image: str) -> LockSpec:
    """The lock the runtime's pods install on `image` (refused, with the fix, when none was resolved)."""

    return lock_for(config.blueprint.runtime, image)


def locked_names(config: WorkloadConfig, image: str) -> set[str]:
    """The projects the runtime's lock installs on `image` (normalised names)."""
    return set(_lock_names(runtime_lock(config, image).path.read_text(encoding="utf-8")))


@functools.cache  # a handful of locks, one per runtime and image
def _lock_names(text: str) -> frozenset[str]:
    """A lock's names by its content: each manifest build asks again, and a lock is a few thousand
    lines."""
    return frozenset(parse_lock(text))


def outside_lock_args(spec: LockSpec) -> list[str]:
    """pip arguments for what the lock leaves out (`<lock>.outside.txt`: an index option and pins)."""
    if not spec.outside_lock:
        return []
    args: list[str] = []
    for raw in spec.outside_path.read_text(encoding="utf-8").splitlines():
        line = raw.partition("#")[0].strip()
        args.extend(shlex.split(line) if line.startswith("-") else [line] if line else [])
    return args


def pip_install(args: list[str]) -> str:
    """One `python3 -m pip install` shell command (the interpreter first on PATH: the venv's when made;
    into the user site where :func:`user_site_step` exported `PIP_USER`)."""
    return "python3 -m pip install --no-cache-dir -q " + " ".join(shlex.quote(a) for a in args)


def venv_in(folder: str) -> str:
    """Shell: make a venv in `folder` that sees the image's packages and put it first on PATH.
    `--without-pip`: the image's own pip (a system package) runs inside it and installs into it, so
    images without python3-venv's ensurepip work too."""
    return (
        f'python3 -m venv --without-pip --system-site-packages {folder} && export PATH="{folder}/bin:$PATH"'
    )


_MANAGED = (
    '[ -f "$(python3 -c \'import sysconfig; print(sysconfig.get_path("stdlib"))\')/EXTERNALLY-MANAGED" ]'
)


def venv_step() -> str:
    """Shell: on an externally managed interpreter (PEP 668: an EXTERNALLY-MANAGED file in its stdlib
    folder, where pip looks: pypa/pip src/pip/_internal/utils/misc.py `check_externally_managed`), make
    a venv that sees the image's packages and put it first on PATH (:func:`venv_in`)."""
    return f"if {_MANAGED}; then {venv_in(VENV_DIR)}; fi"


#: the variable naming the user site's base folder (Python's `site.USER_BASE`: `$PYTHONUSERBASE`, else
#: `~/.local`; CPython Lib/site.py `_getuserbase`)
USER_BASE_ENV = "PYTHONUSERBASE"


def user_site_step() -> str:
    """Shell, for a container on a read-only root filesystem (the runtimes' containers,
    `builders/writable.py`): the install goes to a volume, never into the image.

    On an interpreter outside a venv that is not externally managed (the Ray images' conda Python and
    the Neuron PyTorch DLC's /opt/conda: ray-project/ray docker/base-deps/Dockerfile,
    aws-neuron/deep-learning-containers docker/pytorch/inference/2.7.0/Dockerfile.neuronx), into the user
    site under `$PYTHONUSERBASE`: `PIP_USER=1` is pip's `--user` (pip reads an option from `PIP_<NAME>`),
    and the user site's scripts go first on PATH (`ray` itself when the lock carries Ray). The variable
    is set in the container's env (the step refuses to go on without it), so every process of the pod,
    Ray's workers and exec hooks included, sees what was installed; Python puts the user site on sys.path
    ahead of site-packages (CPython Lib/site.py `main`: `addusersitepackages` before `addsitepackages`).
    A pinned version that differs from the image's goes into the user site and the image's copy is left
    alone (pip 23.2.1 src/pip/_internal/req/req_install.py `check_if_exists`: outside a venv a `--user`
    install never uninstalls from site-packages).

    On an externally managed interpreter (PEP 668), where pip refuses a `--user` install too, the venv
    of :func:`venv_step`, which must then be on a volume (`VENV_DIR`: the container mounts one there).

    On an interpreter in a venv without the system site (AWS's Ray LLM DLC: /opt/venv, aws/deep-learning-
    containers docker/ray_llm/Dockerfile.cuda), Python reads no user site (CPython Lib/site.py `venv`:
    ENABLE_USER_SITE = False) and pip refuses `--user` (pip `virtualenv_no_global`): the installs go
    under the same base with pip's `--prefix` (`PIP_PREFIX`), whose site folders the step puts on
    PYTHONPATH, exported to `ray start`, the raylet and its workers (not to exec hooks: they see the
    container's env only)."""
    missing = f"llmctl: {USER_BASE_ENV} is not set: the pod has no user site to install into"
    base = f': "${{{USER_BASE_ENV}:?{missing}}}" && export '
    user = f'{base}PIP_USER=1 PATH="${USER_BASE_ENV}/bin:$PATH"'
    paths = f"$(python3 -c {shlex.quote(_PREFIX_SITES)})${{PYTHONPATH:+:$PYTHONPATH}}"
    prefix = f'{base}PIP_PREFIX="${USER_BASE_ENV}" PYTHONPATH="{paths}" PATH="${USER_BASE_ENV}/bin:$PATH"'
    return f"if {_MANAGED}; then {venv_in(VENV_DIR)}; elif {_NO_USER_SITE}; then {prefix}; else {user}; fi"


#: true when the interpreter reads no user site (in a venv without the system site: pip refuses `--user`)
_NO_USER_SITE = "python3 -c 'import site, sys; sys.exit(bool(site.ENABLE_USER_SITE))'"
#: the site folders pip's `--prefix $PYTHONUSERBASE` installs into, for PYTHONPATH: pip 26 src/pip/_internal/
#: locations/_sysconfig.py `get_scheme` (the preferred "prefix" scheme, `venv` in a venv, with every base
#: variable set to the prefix); platlib is lib64 where the Python's platlibdir says so (Fedora family)
_PREFIX_SITES = (
    'import os, sysconfig; b = os.environ["PYTHONUSERBASE"]; '
    'v = dict.fromkeys(["installed_base", "base", "installed_platbase", "platbase", "prefix", "exec_prefix"], b); '
    'p = sysconfig.get_paths(sysconfig.get_preferred_scheme("prefix"), vars=v); '
    'print(":".join(dict.fromkeys([p["purelib"], p["platlib"]])))'
)


#: the check a pod runs before it installs what it fetched from the bucket: each file's sha256 against the
#: value in its own spec (written by the CLI), so a changed object in S3 is refused, not installed
VERIFY_SCRIPT = (
    "import hashlib, sys\n"
    "for path, want in zip(sys.argv[1::2], sys.argv[2::2]):\n"
    "    got = hashlib.sha256(open(path, 'rb').read()).hexdigest()\n"
    "    if got != want:\n"
    "        sys.exit(f'llmctl: {path} has sha256 {got}, the pod spec says {want}: not installing it')\n"
)


def verify_step(files: dict[str, str]) -> str:
    """Shell: refuse to go on unless each file (path: expected sha256) has that sha256 (python3's hashlib:
    the interpreter that installs is there on every image, a sha256sum binary need not be)."""
    args = [arg for path, digest in sorted(files.items()) for arg in (path, digest)]
    return "python3 -c " + " ".join(shlex.quote(a) for a in [VERIFY_SCRIPT, *args])


#: configmap mode: where the pod writes the lock it takes out of the wheel (the mount is read-only)
CONFIGMAP_LOCK = "/tmp/llmctl-lock/requirements.txt"
#: the lock's member in this llmctl's wheel (the package data `serving/locks/<name>.txt`)
_LOCK_MEMBER = "llmctl/serving/locks/{name}.txt"
_EXTRACT = (
    "import os, sys, zipfile\n"
    "os.makedirs(os.path.dirname(sys.argv[3]), exist_ok=True)\n"
    "open(sys.argv[3], 'wb').write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))\n"
)


def lock_from_wheel_step(wheel: str, spec: LockSpec) -> str:
    """Shell: write the runtime's lock, as this llmctl's wheel carries it, to `CONFIGMAP_LOCK`."""
    member = _LOCK_MEMBER.format(name=spec.name)
    return "python3 -c " + " ".join(shlex.quote(a) for a in [_EXTRACT, wheel, member, CONFIGMAP_LOCK])


#: configmap mode: where the pod writes the hash-pinned requirements of what its lock leaves out
CONFIGMAP_OUTSIDE = "/tmp/llmctl-lock/outside.txt"
_WRITE = "import sys\nopen(sys.argv[1], 'w').write(sys.argv[2])\n"


def index_options(args: list[str]) -> list[str]:
    """The index options among an outside file's pip arguments (`--extra-index-url URL`), not its pins."""
    options: list[str] = []
    items = iter(args)
    for arg in items:
        if arg.startswith("-"):
            options.append(arg)
            if "=" not in arg:
                options.append(next(items, ""))
    return options


def outside_from_index_steps(requirements: str | None, outside: list[str]) -> list[str]:
    """Shell steps (configmap mode) installing what the lock leaves out from its index, each wheel pinned
    by the sha256 the stack recorded (`outside_wheels.pinned_requirements`): `--require-hashes`, and
    `--no-deps` (every wheel the lock and the image do not provide is in the file; the lock's own come
    next, hash-checked). With nothing recorded (a render or an offline plan) the pod refuses to start
    rather than install unpinned packages (issue 53, finding 5)."""
    if requirements is None:
        refusal = (
            "llmctl: no recorded sha256 for what this runtime's lock leaves out (a CPU torch); "
            "deploy with `llmctl up --target kubeconfig`, which records them"
        )
        return [f"{{ echo {shlex.quote(refusal)} >&2; exit 1; }}"]
    write = "python3 -c " + " ".join(shlex.quote(a) for a in [_WRITE, CONFIGMAP_OUTSIDE, requirements])
    pinned = ["--require-hashes", "--no-deps", *index_options(outside), "-r", CONFIGMAP_OUTSIDE]
    return [write, pip_install(pinned)]


def install_script(
    config: WorkloadConfig, image: str, extra: list[str] | None = None, *, user_site: bool = False
) -> str:
    """Shell that installs the runtime's lock, then the app without dependencies, with no index
    (wheel mode: from the wheelhouse the init container copied); configmap mode takes the lock out of
    the mounted wheel and installs it from the index, hash-checked (the wheelhouse does not fit a
    ConfigMap).

    `extra` must be empty: a package outside the lock cannot be installed without an index.
    `user_site`: install into the user site under `$PYTHONUSERBASE`, or on an externally managed image
    into a venv at `VENV_DIR` (:func:`user_site_step`), both on volumes, so the root filesystem can stay
    read-only.
    """

    if extra:
        raise LlmctlError(
            f"the {config.blueprint.runtime} pods would install {' '.join(extra)} outside their lock",
            "add it to the runtime's requirements file and run `make locks`",
        )
    delivery = delivery_of(config)
    spec = runtime_lock(config, image)
    # the wheel the init container fetched, or the one joined from the ConfigMaps' parts
    folder = ASSEMBLED_DIR if delivery.mode == "configmap" else APP_DIR
    app = f"{folder}/{delivery.wheel_file or wheel_file()}"
    steps = [user_site_step() if user_site else venv_step()]
    outside = outside_lock_args(spec)
    if delivery.mode == "wheel":
        # the lock names every wheel by hash, and its own digest names the wheelhouse: checked first, with
        # the wheel's sha256 from the pod spec and the outside requirements' (their prefix's name)
        wanted = {f"{WHEELHOUSE_DIR}/{LOCK_FILE}": lock_digest(spec)}
        if delivery.wheel_sha256:
            wanted[app] = delivery.wheel_sha256
        outside_digest = str(outside_uri(config) or "").rstrip("/").rpartition("/")[2]
        if outside and outside_digest != PLANNED_DIGEST:
            wanted[f"{OUTSIDE_DIR}/{LOCK_FILE}"] = outside_digest
        steps.append(verify_step(wanted))
        # what the lock leaves out comes from the cache bucket too (fetched at the first `up`), and goes
        # in the same hash-checked run: one resolution, no index
        links, more = (
            (["--find-links", OUTSIDE_DIR], ["-r", f"{OUTSIDE_DIR}/{LOCK_FILE}"]) if outside else ([], [])
        )
        where = ["--no-index", "--find-links", WHEELHOUSE_DIR, *links]
        steps.append(pip_install([*where, "--require-hashes", *more, "-r", f"{WHEELHOUSE_DIR}/{LOCK_FILE}"]))
    else:
        # the parts joined on the container's /tmp, the whole wheel checked against the sha256 `up` wrote
        steps.append(join_step(APP_DIR, part_count(wheel_size(delivery.wheel_path)), app))
        if delivery.wheel_sha256:
            steps.append(verify_step({app: delivery.wheel_sha256}))
        # the lock comes out of the wheel, which carries it: the ConfigMaps hold the wheel alone
        steps.append(lock_from_wheel_step(app, spec))
        if outside:  # an existing cluster: from the index (a wheelhouse does not fit a ConfigMap), by hash
            steps.extend(outside_from_index_steps(delivery.outside_requirements, outside))
        steps.append(pip_install(["--require-hashes", "-r", CONFIGMAP_LOCK]))
    steps.append(pip_install(["--no-index", "--no-deps", app]))
    return " && ".join(steps)


def wheelhouse_uri(config: WorkloadConfig) -> str:
    """s3:// prefix of the runtime lock's wheelhouse, in the bucket the wheel is in (wheel mode)."""

    delivery = delivery_of(config)
    return f"s3://{_bucket(delivery)}/{wheelhouse_key(runtime_lock(config, delivery.image))}/"


def _bucket(delivery: Delivery) -> str:
    """The bucket of the wheel's s3:// URI (the wheelhouse and the outside wheels are beside it)."""
    return str(delivery.wheel_uri).removeprefix("s3://").partition("/")[0]


#: the non-root user (uid, gid) llmctl gives a process whose image has only root and which needs none
#: (the AWS CLI init containers, the model-mirror Job and the Gradio UI on python:slim): 65532, the
#: `nonroot` user of the distroless images, >= 10000 as checkov's CKV_K8S_40 asks; it needs no entry in
#: the image's /etc/passwd
NON_ROOT_USER = (65532, 65532)


def aws_cli_container(config: WorkloadConfig, name: str, script: str, volume: str, path: str) -> Obj:
    """An init container on the pinned AWS CLI image running `script` (S3 copies with the pod's Pod
    Identity) into the emptyDir `volume` mounted at `path`.

    It writes nothing but that volume (`aws s3 cp` with container credentials keeps no cache), so it
    runs on a read-only root filesystem, and as :data:`NON_ROOT_USER` in a pod of a root image (a pod
    with a user of its own runs it as that user: `security.harden_pod`); an emptyDir is world-writable,
    so the root container beside it reads what it wrote."""
    from llmctl.blueprints.versions import (  # lazy: read at call time: tests swap versions()
        by_digest,
        versions,
    )

    return {
        "name": name,
        "image": by_digest(versions().images["aws_cli"].image),
        "command": ["/bin/sh", "-c", script],
        "env": [{"name": "AWS_REGION", "value": config.platform.region}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": volume, "mountPath": path}],
        "securityContext": {
            "runAsUser": NON_ROOT_USER[0],
            "runAsGroup": NON_ROOT_USER[1],
            "readOnlyRootFilesystem": True,
        },
    }


def outside_uri(config: WorkloadConfig) -> str | None:
    """s3:// prefix of the wheels the runtime's lock leaves out (wheel mode): the one `up` recorded, else
    the plan's; None when the lock leaves nothing out."""
    delivery = delivery_of(config)
    if not runtime_lock(config, delivery.image).outside_lock:
        return None
    return delivery.outside_uri or f"s3://{_bucket(delivery)}/{WHEELHOUSE_PREFIX}/{PLANNED_DIGEST}/"


def fetch_container(config: WorkloadConfig) -> Obj:
    """The init container that copies the wheel from S3 with the pod's Pod Identity."""
    delivery = delivery_of(config)
    # the wheel, then the runtime lock's wheelhouse (everything the serving container installs)
    script = (
        f"aws s3 cp --only-show-errors {shlex.quote(str(delivery.wheel_uri))} "
        f"{shlex.quote(f'{APP_DIR}/{delivery.wheel_file}')} && aws s3 cp --only-show-errors --recursive "
        f"{shlex.quote(wheelhouse_uri(config))} {WHEELHOUSE_DIR}/"
    )
    outside = outside_uri(config)
    if outside:  # and what the lock leaves out (a CPU torch), fetched at the first `up`
        script += f" && aws s3 cp --only-show-errors --recursive {shlex.quote(outside)} {OUTSIDE_DIR}/"
    return aws_cli_container(config, FETCH_CONTAINER, script, APP_VOLUME, APP_DIR)


def with_app(config: WorkloadConfig, pod_spec: Obj) -> Obj:
    """The pod spec with the wheel at APP_DIR: fetched by an init container (wheel mode) or its parts
    mounted from the ConfigMaps by one projected volume (configmap mode); unchanged for an image."""
    delivery = delivery_of(config)
    if delivery.mode == "image":
        return pod_spec
    mount = {"name": APP_VOLUME, "mountPath": APP_DIR, "readOnly": True}
    containers = [{**c, "volumeMounts": [*c.get("volumeMounts", []), mount]} for c in pod_spec["containers"]]
    if delivery.mode == "configmap":
        volume = parts_volume(APP_VOLUME, configmap_names(delivery))
        return {**pod_spec, "containers": containers, "volumes": [*pod_spec.get("volumes", []), volume]}
    return {
        **pod_spec,
        "initContainers": [*pod_spec.get("initContainers", []), fetch_container(config)],
        "containers": containers,
        "volumes": [*pod_spec.get("volumes", []), {"name": APP_VOLUME, "emptyDir": {}}],
    }


def app_objects(config: WorkloadConfig) -> list[Obj]:
    """The ConfigMaps carrying the wheel's parts (configmap mode; none otherwise).

    Immutable, `binaryData` (`wheel_parts.part_configmaps`). An offline plan (no wheel built yet)
    renders one part with an empty value; `up` fills them with the wheel it built. The wheel alone: it
    carries the runtime's lock, which the pod takes out of it (install_script).
    """
    delivery = delivery_of(config)
    if delivery.mode != "configmap":
        return []
    data = Path(delivery.wheel_path).read_bytes() if delivery.wheel_path else b""
    digest = delivery.wheel_digest or PLANNED_DIGEST
    return part_configmaps(config, configmap_name(digest), data, digest)


def needs_bucket_access(config: WorkloadConfig) -> bool:
    """Whether the pods read the cache bucket to get the serving code."""
    return delivery_of(config).mode == "wheel"
