"""Issue 53, finding 5: on an existing cluster (`--target kubeconfig`, configmap delivery) the pods install
what the runtime's lock leaves out (ray-cpu's CPU torch) pinned by sha256, as on EKS.

They used to run `pip install --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0`:
torch and whatever it pulls resolved from the index, unpinned. Now the first `up` downloads those wheels
on the user's machine and records each file's sha256 in the stack's state (the EKS path's record,
`outside_wheels.pinned_requirements`); the pods install exactly those files from the index with
`--require-hashes --no-deps`, then the lock. A local index directory stands in for PyTorch's CPU index
(`make_wheel`, as tests/lifecycle/test_outside_wheels.py does); the pod's script runs as the image runs
it (`run_as_image`), with the index options pointed at that directory. The attack: the index serves
other bytes under the recorded name, and the pod refuses them.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from lifecycle_support import make_wheel
from pod_install import run_as_image

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.config import Delivery, PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery import outside_wheels
from llmctl.infra.workload.delivery.outside_wheels import pinned_requirements, requirements_text
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    CONFIGMAP_LOCK,
    CONFIGMAP_OUTSIDE,
    VENV_DIR,
    app_objects,
    install_script,
)
from llmctl.infra.workload.delivery.wheel_parts import ASSEMBLED_DIR
from llmctl.serving import lockfiles
from llmctl.serving.lockfiles import locks, parse_lock
from llmctl.state import load_pins

REAL_DOWNLOAD = outside_wheels.download  # conftest's `cpu_index` replaces it for the other tests
SPEC = locks().locks["ray-cpu"]
INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"  # serving/locks/ray-cpu.outside.txt


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cpu_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    monkeypatch.setattr(outside_wheels, "download", REAL_DOWNLOAD)
    folder = tmp_path / "cpu-index"
    filelock = parse_lock(SPEC.path.read_text())["filelock"][0]
    make_wheel(folder, "torch", "2.13.0+cpu", ("sympy-fake>=1", "filelock"))
    make_wheel(folder, "sympy-fake", "1.0")
    make_wheel(folder, "filelock", filelock)  # in the lock: not pinned again
    return folder, ["--no-index", "--find-links", str(folder), "torch==2.13.0"]


def _existing(stack: str = "dev") -> WorkloadConfig:
    """tiny-cpu on an existing cluster (`--target kubeconfig`: no bucket, no registry)."""
    bp = load_blueprint("tiny-cpu")
    facts = PlatformFacts.for_blueprint(bp).model_copy(update={"target": "kubeconfig", "cache_bucket": None})
    return WorkloadConfig(blueprint=bp, stack=stack, platform=facts)


def test_the_first_up_records_the_sha256_and_a_later_up_needs_no_index(
    cpu_index: tuple[Path, list[str]], tmp_path: Path
) -> None:
    folder, args = cpu_index
    notes: list[str] = []
    text = pinned_requirements(_existing(), SPEC, notes.append, args=args)
    wanted = {p.name: sha(p) for p in folder.glob("*.whl") if not p.name.startswith("filelock")}
    assert load_pins("dev", "tiny-cpu").wheels == wanted
    assert text == requirements_text(SPEC, wanted) and "pinned what the ray-cpu lock leaves out" in notes[-1]
    shutil.move(folder, tmp_path / "gone")  # the record alone: nothing downloaded again
    assert pinned_requirements(_existing(), SPEC, notes.append, args=args) == text
    # `preview` fetches nothing: no record, no requirements (and the pods would refuse)
    assert pinned_requirements(_existing("other"), SPEC, notes.append, fetch=False, args=args) is None


def _run(script: str, where: Path, check: str) -> subprocess.CompletedProcess[str]:
    where.mkdir()
    return run_as_image(script, Path("/usr/bin/python3"), where, check)


def _pod_script(requirements: str | None, tmp_path: Path, index: Path, lock_wheels: Path) -> str:
    """The serving container's install steps up to the lock, with the pod's paths under tmp_path and the
    indexes pointed at local folders (the CPU index's stand-in; the lock's wheels for PyPI)."""
    config = _existing()
    delivery = Delivery(
        mode="configmap",
        image=config.blueprint.image.base,
        wheel_path=str(tmp_path / "llmctl-0-py3-none-any.whl"),
        wheel_digest="ab" * 32,
        outside_requirements=requirements,
        reason="r",
    )
    delivered = config.model_copy(update={"delivery": delivery})
    mount = tmp_path / "mount"  # the ConfigMaps' parts as the pod's projected volume shows them
    mount.mkdir(exist_ok=True)
    for part in app_objects(delivered):
        for key, value in part["binaryData"].items():
            (mount / key).write_bytes(base64.b64decode(value))
    script = install_script(delivered, delivery.image)
    steps = script.split(" && ")[:-1]  # without the llmctl wheel's own install
    # every package install is pinned by hash: the lock's and what it leaves out (was: torch unpinned)
    assert all("--require-hashes" in s for s in steps if "pip install" in s)
    script = " && ".join(steps).replace(INDEX, f"--no-index --find-links {index}")
    script = script.replace(
        "--require-hashes -r", f"--no-index --find-links {lock_wheels} --require-hashes -r"
    )
    for path in (CONFIGMAP_LOCK, CONFIGMAP_OUTSIDE):
        script = script.replace(path, str(tmp_path / "pod" / Path(path).name))
    script = script.replace(APP_DIR, str(mount)).replace(ASSEMBLED_DIR, str(tmp_path / "joined"))
    return script.replace(VENV_DIR, str(tmp_path / "venv"))


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A one-package lock standing in for ray-cpu's, its wheel, and the app wheel carrying the lock."""
    locked = make_wheel(tmp_path / "lock-wheels", "fake-locked", "1.0")
    lock_dir = tmp_path / "locks"
    shutil.copytree(lockfiles.LOCKS_DIR, lock_dir)
    lock = f"fake-locked==1.0 \\\n    --hash=sha256:{sha(locked)}\n"
    (lock_dir / "ray-cpu.txt").write_text(lock)
    monkeypatch.setattr(lockfiles, "LOCKS_DIR", lock_dir)
    with zipfile.ZipFile(tmp_path / "llmctl-0-py3-none-any.whl", "w") as app:
        app.writestr("llmctl/serving/locks/ray-cpu.txt", lock)
    return tmp_path / "lock-wheels"


def test_the_pod_installs_exactly_the_recorded_files_and_refuses_others(
    cpu_index: tuple[Path, list[str]], pod: Path, tmp_path: Path
) -> None:
    folder, args = cpu_index
    text = pinned_requirements(_existing(), SPEC, lambda _t: None, args=args)
    check = "python3 -c 'import torch, sympy_fake, fake_locked; print(torch.VERSION, sympy_fake.VERSION)'"
    done = _run(_pod_script(text, tmp_path, folder, pod), tmp_path / "ok", check)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2.13.0+cpu", "1.0"]

    # the index now serves other bytes under the recorded name: the pod installs nothing of it
    torch = "torch-2.13.0+cpu-py3-none-any.whl"
    make_wheel(tmp_path / "rebuilt", "torch", "2.13.0+cpu", ("sympy-fake>=1", "evil-fake"))
    shutil.copyfile(tmp_path / "rebuilt" / torch, folder / torch)
    shutil.rmtree(tmp_path / "venv")
    shutil.rmtree(tmp_path / "pod")
    done = _run(_pod_script(text, tmp_path, folder, pod), tmp_path / "bad", check)
    assert done.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in done.stderr and "torch" in done.stderr


def test_a_pod_rendered_without_a_record_refuses_to_start(pod: Path, tmp_path: Path) -> None:
    done = _run(_pod_script(None, tmp_path, tmp_path, pod), tmp_path / "x", "true")
    assert done.returncode == 1
    assert "no recorded sha256 for what this runtime's lock leaves out" in done.stderr
