"""Issue 53, finding 8: the serving containers (Ray, Triton, TorchServe) run on a read-only root filesystem
(`builders/writable.py`).

Base-image mode installs the runtime's lock and the app with `pip install --user` into `$PYTHONUSERBASE`
on a volume, not into the image's Python; Ray's session folder, the temporary files and the caches go
to emptyDirs. The user-site claim (every process of the pod sees the install, ahead of the image's
site-packages) is checked here with a real interpreter outside a venv, as the images' Pythons are, and
a real `pip install --user` of a wheel built on the spot.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from workload_helpers import CATALOG, config_for

from llmctl.infra.workload.builders import writable
from llmctl.infra.workload.builders.stopping import DRAIN_FILE
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    CONFIGMAP_LOCK,
    VENV_DIR,
    pip_install,
    user_site_step,
)
from llmctl.infra.workload.delivery.wheel_parts import ASSEMBLED_DIR
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.scheduling.pods import pod_templates
from llmctl.serving.model_mirror import DEFAULT_MODEL_CACHE
from llmctl.serving.neuronx.settings import DEFAULT_CACHE_ROOT
from llmctl.serving.ray_vllm.neuron_cache import DEFAULT_ROOT, GPU_ROOT
from llmctl.serving.torchserve_neuronx import start as torchserve_start
from llmctl.serving.torchserve_neuronx.config import MODEL_STORE
from llmctl.serving.triton_vllm import queue_metrics
from llmctl.serving.triton_vllm import start as triton_start

Obj = dict[str, Any]
#: the containers that run a runtime, by the kind of object their pod is in
SERVING = {"RayService": ("ray-head", "ray-worker"), "Deployment": ("triton", "torchserve")}
#: the places llmctl's own serving code writes in every serving pod (caches, the wheel configmap mode joins
#: from its parts and the lock it takes out of it), and in a runtime's (the drain marker, Triton's repository and queue gauges,
#: TorchServe's work folder and model store)
LLMCTL_WRITES = [
    DEFAULT_MODEL_CACHE,
    DEFAULT_CACHE_ROOT,
    DEFAULT_ROOT,
    GPU_ROOT,
    CONFIGMAP_LOCK,
    ASSEMBLED_DIR,
]
RUNTIME_WRITES = {
    "ray-head": [DRAIN_FILE],
    "ray-worker": [DRAIN_FILE],
    "triton": [triton_start.DEFAULT_REPOSITORY, queue_metrics.DEFAULT_DIRECTORY],
    "torchserve": [torchserve_start.DEFAULT_WORKDIR, MODEL_STORE],
}


def serving_containers(objects: list[Obj]) -> list[tuple[Obj, Obj]]:
    """(pod spec, container) of every container that runs a runtime."""
    found = []
    for obj in objects:
        for template in pod_templates(obj):
            found += [
                (template.spec, c)
                for c in template.spec["containers"]
                if c["name"] in SERVING.get(obj["kind"], ())
            ]
    return found


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@pytest.mark.parametrize("name", CATALOG)
@pytest.mark.parametrize("baked", [False, True], ids=["base-image", "built-image"])
def test_serving_containers_write_only_to_their_volumes(name: str, baked: bool) -> None:
    """Fails on the old code (no readOnlyRootFilesystem, the install into the image's Python or a venv
    under /opt/llmctl). Every catalog blueprint's runtime containers: Ray, Triton, TorchServe."""
    config = config_for(name, image="registry.example/llmctl:1") if baked else config_for(name)
    objects = build_manifests(config, hf_token=None)
    found = serving_containers(objects)
    assert found
    for spec, container in found:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, container["name"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        writable_paths = [path for path, volume in mounts.items() if "emptyDir" in volumes[volume]]
        for folder in writable.WRITABLE.values():
            # on the node's disk (the model cache under /tmp can be tens of GB), not in memory
            assert volumes[mounts[folder]]["emptyDir"] == {}, folder
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["HOME"] == writable.HOME_DIR and env["TMPDIR"] == env["TEMP"] == "/tmp"
        assert _under(env["PYTHONUSERBASE"], writable.HOME_DIR)
        for path in [*LLMCTL_WRITES, *RUNTIME_WRITES[container["name"]]]:
            assert any(_under(path, folder) for folder in writable_paths), (container["name"], path)
        # the install: after KubeRay's `bash -lc --` (the Ray containers' args) or in `bash -c` (a start
        # module's command)
        script = " ".join([*container.get("command", []), *container.get("args", [])])
        if not baked:
            # the user site (or on an externally managed Python the venv, on its volume) before any pip
            assert script.index(user_site_step()) < script.index("pip install")
            assert volumes[mounts[VENV_DIR]] == {"name": writable.VENV_VOLUME, "emptyDir": {}}
            # the fetched wheel stays read-only; what is written goes elsewhere
            assert {"mountPath": APP_DIR, "name": "llmctl-app", "readOnly": True} in container["volumeMounts"]
        else:  # a built image installs nothing at start, and keeps its own venv (no volume over it)
            assert "pip install" not in script and VENV_DIR not in mounts


def _wheel(folder: Path) -> Path:
    """A one-module wheel (PEP 427), built here: what the pod installs stands in for the lock and the app."""
    path = folder / "llmctl_probe-1.0-py3-none-any.whl"
    info = "llmctl_probe-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("llmctl_probe/__init__.py", "VALUE = 'from the user site'\n")
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: llmctl-probe\nVersion: 1.0\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


def _image_python(tmp_path: Path) -> Path:
    """A bin folder whose `python3` is a real interpreter outside any venv (as the Ray images' conda
    Python and the Neuron DLCs' /opt/conda are), with pip."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    probe = subprocess.run(
        [
            str(base),
            "-c",
            "import sys, site, pip; print(sys.prefix == sys.base_prefix, site.ENABLE_USER_SITE)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.stdout.split() == ["True", "True"], (base, probe.stdout, probe.stderr)
    bindir = tmp_path / "image-bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(base)
    return bindir


def _bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_pip_install_user_is_seen_by_every_process_ahead_of_site_packages(tmp_path: Path) -> None:
    """The pod's own install steps (`user_site_step`: PIP_USER, pip's `--user`; `pip_install`) on a real
    interpreter:
    the wheel lands under PYTHONUSERBASE, not in the interpreter's site-packages, and a process started
    with that variable (Ray's `ray start`), and a process it starts in turn (a Ray worker), import it
    from the user site, which sys.path puts ahead of site-packages."""
    bindir = _image_python(tmp_path)
    user_base = tmp_path / "home" / ".local"
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PYTHONUSERBASE": str(user_base),
        "TMPDIR": str(tmp_path),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    wheel = _wheel(tmp_path)
    install = f"{user_site_step()} && {pip_install(['--no-index', '--no-deps', str(wheel)])}"
    done = _bash(install, env)
    assert done.returncode == 0, done.stderr
    assert list(user_base.glob("lib/python3.*/site-packages/llmctl_probe/__init__.py"))
    child = (
        "import site, subprocess, sys, llmctl_probe\n"
        "user = site.getusersitepackages()\n"
        "assert llmctl_probe.__file__.startswith(user), llmctl_probe.__file__\n"
        "others = [p for p in sys.path if p.endswith('site-packages') and p != user]\n"
        "assert others and all(sys.path.index(user) < sys.path.index(p) for p in others), sys.path\n"
        "worker = subprocess.run([sys.executable, '-c', 'import llmctl_probe; print(llmctl_probe.VALUE)'],"
        " capture_output=True, text=True)\n"
        "print(worker.stdout.strip(), worker.returncode)\n"
    )
    ran = subprocess.run(["python3", "-c", child], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split("\n")[0] == "from the user site 0"
    # the image's own Python is untouched: without the variable (and another home, whose ~/.local would
    # be the default user base) the module is not there
    bare = {k: v for k, v in env.items() if k != "PYTHONUSERBASE"} | {"HOME": str(tmp_path / "other")}
    missing = subprocess.run(
        ["python3", "-c", "import llmctl_probe"], env=bare, capture_output=True, timeout=60
    )
    assert missing.returncode != 0


def test_the_install_refuses_to_run_without_a_user_site(tmp_path: Path) -> None:
    """Without PYTHONUSERBASE, `pip --user` would write to ~/.local: the step stops before pip runs."""
    env = {"PATH": f"{_image_python(tmp_path)}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = _bash(f"{user_site_step()} && echo installed", env)
    assert done.returncode != 0 and "installed" not in done.stdout
    assert "PYTHONUSERBASE is not set" in done.stderr


def test_on_an_externally_managed_python_the_install_goes_to_the_venv_on_its_volume(tmp_path: Path) -> None:
    """Debian's python3 is externally managed (PEP 668): pip refuses `--user` there too, so the step makes
    the venv at VENV_DIR (a volume in the pod; here under tmp) and leaves PIP_USER unset."""
    debian = Path("/usr/bin/python3")
    stdlib = subprocess.run(
        [str(debian), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert (Path(stdlib) / "EXTERNALLY-MANAGED").is_file()
    venv = tmp_path / "venv"
    step = user_site_step().replace(VENV_DIR, str(venv))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONUSERBASE": str(tmp_path / "user")}
    done = _bash(f'{step} && echo "pip_user=${{PIP_USER:-}}" && command -v python3', env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pip_user=", str(venv / "bin" / "python3")]
    assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()


def test_in_a_venv_without_the_system_site_the_install_goes_under_the_user_base_on_pythonpath(
    tmp_path: Path,
) -> None:
    """AWS's Ray LLM DLC runs Python from the venv /opt/venv (no system site): pip refuses `--user` there
    and Python reads no user site, so the step installs with `--prefix $PYTHONUSERBASE` and exports its
    site folders on PYTHONPATH: `ray start` and a worker it starts import the app, the image's venv
    stays untouched, and PIP_USER stays unset."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    image_venv = tmp_path / "opt-venv"
    subprocess.run([str(base), "-m", "venv", str(image_venv)], check=True, capture_output=True, timeout=120)
    user_base = tmp_path / "home" / ".local"
    env = {
        "PATH": f"{image_venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PYTHONUSERBASE": str(user_base),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    wheel = _wheel(tmp_path)
    child = (
        "import subprocess, sys, llmctl_probe; print(llmctl_probe.__file__); "
        "print(subprocess.run([sys.executable, '-c', 'import llmctl_probe; print(llmctl_probe.VALUE)'],"
        " capture_output=True, text=True).stdout.strip())"
    )
    script = (
        f"{user_site_step()} && {pip_install(['--no-index', '--no-deps', str(wheel)])}"
        f' && echo "pip_user=${{PIP_USER:-}}" && python3 -c "{child}"'
    )
    done = _bash(script, env)
    assert done.returncode == 0, done.stderr
    pip_user, where, value = done.stdout.split("\n")[:3]
    assert pip_user == "pip_user=" and value == "from the user site"
    assert where.startswith(str(user_base)) and "site-packages/llmctl_probe" in where
    assert not list(image_venv.glob("lib/python3.*/site-packages/llmctl_probe"))
    # the Ray images' interpreter (outside a venv) still takes the user-site branch
    assert (
        "PIP_USER=1"
        in _bash(
            f'{user_site_step()} && echo "PIP_USER=$PIP_USER"',
            {**env, "PATH": f"{_image_python(tmp_path)}:/usr/bin:/bin"},
        ).stdout
    )
