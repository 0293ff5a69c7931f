"""A runtime lock's wheelhouse, and a pod start on this machine that installs from it with no index.

The wheelhouse is downloaded for real (`pip download` from the package index, for the image's
Python); the pod start runs the exact shell the serving container runs (`delivery.install_script`),
with the pod's folders moved under a temporary directory and every index pointed at a closed port:
- on Python 3.10 (the Neuron DLC's version; the DLC's conda interpreter is not externally managed),
  into that interpreter, with the llmctl wheel;
- on Debian's own Python, which is externally managed (PEP 668): into a venv made with
  --system-site-packages that still sees the interpreter's packages.
The upload goes to a local moto server: content-addressed, written once.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from pod_install import run_as_image

from llmctl.blueprints.catalog import load_blueprint
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    VENV_DIR,
    install_script,
    planned_delivery,
    wheel_file,
)
from llmctl.infra.workload.delivery.wheelhouse import (
    LOCK_FILE,
    build_wheelhouse,
    pip_platforms,
    upload_wheelhouse,
    wheelhouse_key,
)
from llmctl.serving.lockfiles import locks, parse_lock

#: the smallest lock (pydantic, PyYAML, boto3 and their dependencies), on the Python 3.10 DLC
SPEC = locks().locks["torchserve-neuronx"]
BLUEPRINT = "llama2-torchserve-inf2"
PY310 = Path("/root/.pyenv/versions/3.10.13/bin/python3.10")
DEBIAN_PYTHON = Path("/usr/bin/python3")


@pytest.fixture(scope="module")
def house310(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheelhouse(SPEC, tmp_path_factory.mktemp("house310"))


@pytest.fixture(scope="module")
def app_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This llmctl's wheel, as `up` builds it."""
    from llmctl.infra.workload.prepare.delivery import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_pip_gets_every_manylinux_tag_down_to_2_17() -> None:
    assert pip_platforms("x86_64-manylinux_2_20") == [
        "manylinux_2_20_x86_64",
        "manylinux_2_19_x86_64",
        "manylinux_2_18_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
    ]
    assert len(pip_platforms("x86_64-manylinux_2_35")) == 35 - 17 + 2


def test_the_wheelhouse_holds_exactly_the_locked_wheels_with_their_hashes(house310: Path) -> None:
    pinned = parse_lock(SPEC.path.read_text())
    wheels = sorted(house310.glob("*.whl"))
    assert {w.name.split("-")[0].lower().replace("_", "-") for w in wheels} == set(pinned)
    for wheel in wheels:
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        name = wheel.name.split("-")[0].lower().replace("_", "-")
        assert digest in pinned[name][1] and wheel.name.split("-")[1] == pinned[name][0]
        tags = wheel.name.removesuffix(".whl").split("-")[-3:]
        assert tags[0] in ("py3", "cp310", "py2.py3") or tags[0].startswith("cp3"), wheel.name
    assert (house310 / LOCK_FILE).read_text() == SPEC.path.read_text()


def test_the_wheelhouse_is_uploaded_once_at_its_content_address(
    house310: Path, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST")).read()
    for key, value in {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="cache")
    prefix, uploaded = upload_wheelhouse("us-east-1", "cache", SPEC, build=house310)
    assert uploaded and prefix == wheelhouse_key(SPEC)
    assert prefix == "llmctl/wheelhouse/" + hashlib.sha256(SPEC.path.read_bytes()).hexdigest()
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="cache")["Contents"]}
    assert keys == {f"{prefix}/{p.name}" for p in house310.iterdir()}
    again = upload_wheelhouse("us-east-1", "cache", SPEC, build=house310 / "unused")
    assert again == (prefix, False) and not (house310 / "unused").exists()  # nothing downloaded again


def _pod(tmp: Path, house: Path, wheel: Path, *, user_site: bool = False) -> tuple[str, Path]:
    """The serving container's install script with the pod's folders under `tmp` (the init container's
    copies: the llmctl wheel and the wheelhouse into the app folder), for the wheel `up` uploaded (its
    sha256 in the pod spec, as `up` decides it)."""
    bp = load_blueprint(BLUEPRINT)
    config = WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))
    uploaded = planned_delivery(config).model_copy(
        update={"wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(), "decided": True}
    )
    script = install_script(
        config.model_copy(update={"delivery": uploaded}), bp.image.base, user_site=user_site
    )
    app = tmp / "app"
    shutil.copytree(house, app / "wheelhouse")
    shutil.copyfile(wheel, app / wheel_file())
    script = script.replace(APP_DIR, str(app)).replace(VENV_DIR, str(tmp / "venv"))
    return script, app


def _run(script: str, python: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run the script with `python` as the image's `python3` and no index reachable."""
    # the script, then what the interpreter first on PATH (the venv's, when one was made) imports
    check = "python3 -c 'import sys, pydantic, yaml, boto3, llmctl; print(sys.prefix, pydantic.VERSION, boto3.__version__)'"
    return run_as_image(script, python, tmp, check)


def test_a_pod_start_on_python_3_10_installs_the_lock_and_the_app_with_no_index(
    house310: Path, app_wheel: Path, tmp_path: Path
) -> None:
    assert PY310.is_file(), "this machine's pyenv Python 3.10 (the DLC's version) is missing"
    image = tmp_path / "image"  # the image's interpreter: a fresh Python 3.10 environment
    subprocess.run([str(PY310), "-m", "venv", str(image)], check=True, capture_output=True)
    script, _ = _pod(tmp_path, house310, app_wheel)
    done = _run(script, image / "bin" / "python3", tmp_path)
    assert done.returncode == 0, done.stderr
    prefix, pydantic, boto3_version = done.stdout.split()
    pinned = parse_lock(SPEC.path.read_text())
    assert Path(prefix) == image and not (tmp_path / "venv").exists()  # not externally managed: no venv
    assert pydantic == pinned["pydantic"][0] and boto3_version == pinned["boto3"][0]


def test_a_ray_pods_start_installs_into_the_user_site_and_leaves_the_image_alone(
    house310: Path, app_wheel: Path, tmp_path: Path
) -> None:
    """The Ray containers' install (`user_site=True`: their root filesystem is read-only,
    builders/writable.py) on Python 3.10 outside a venv, as the DLC's conda Python is: the lock and the
    app land under PYTHONUSERBASE, import from there, and the interpreter's own site-packages is as
    before."""
    site_packages = PY310.parent.parent / "lib" / "python3.10" / "site-packages"
    before = sorted(p.name for p in site_packages.iterdir())
    script, _ = _pod(tmp_path, house310, app_wheel, user_site=True)
    user_base = tmp_path / "volume" / ".local"
    check = (
        "python3 -c 'import sys, pydantic, boto3, llmctl; "
        "print(pydantic.__file__, llmctl.__file__, pydantic.VERSION, boto3.__version__)'"
    )
    done = run_as_image(f"export PYTHONUSERBASE={user_base} && {script}", PY310, tmp_path, check)
    assert done.returncode == 0, done.stderr
    pydantic_file, llmctl_file, pydantic, boto3_version = done.stdout.split()
    user_site = user_base / "lib" / "python3.10" / "site-packages"
    assert Path(pydantic_file).is_relative_to(user_site) and Path(llmctl_file).is_relative_to(user_site)
    pinned = parse_lock(SPEC.path.read_text())
    assert pydantic == pinned["pydantic"][0] and boto3_version == pinned["boto3"][0]
    assert sorted(p.name for p in site_packages.iterdir()) == before
    assert not (tmp_path / "venv").exists()


def test_a_pod_start_on_an_externally_managed_python_uses_a_venv_that_sees_the_image(
    app_wheel: Path, tmp_path: Path
) -> None:
    marker = Path(
        subprocess.run(
            [str(DEBIAN_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert (marker / "EXTERNALLY-MANAGED").is_file(), "Debian's python3 is externally managed (PEP 668)"
    refused = subprocess.run(
        [str(DEBIAN_PYTHON), "-m", "pip", "install", "--no-index", "pydantic"], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr
    version = subprocess.run(
        [str(DEBIAN_PYTHON), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    house = build_wheelhouse(SPEC, tmp_path / "house", python=version)  # the same lock, for this Python
    script, _ = _pod(tmp_path, house, app_wheel)
    done = _run(script, DEBIAN_PYTHON, tmp_path)
    assert done.returncode == 0, done.stderr
    prefix, pydantic, _ = done.stdout.split()
    assert Path(prefix) == tmp_path / "venv" and pydantic == parse_lock(SPEC.path.read_text())["pydantic"][0]
    config = (tmp_path / "venv" / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = true" in config
    # the image's own packages stay visible from the venv (Debian's pip lives in its dist-packages)
    sees = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "python3"), "-c", "import pip, sys; print(pip.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sees.stdout.startswith("/usr/lib/python3/dist-packages/")


@pytest.mark.parametrize("changed", ["lock", "wheel"])
def test_a_pod_refuses_a_lock_or_wheel_other_than_the_one_in_its_spec(
    house310: Path, app_wheel: Path, tmp_path: Path, changed: str
) -> None:
    """An object changed in the bucket after `up` (a comment added to the lock, which pip's hash check
    would let through; another wheel at the wheel's key) stops the pod before anything is installed."""
    script, app = _pod(tmp_path, house310, app_wheel)
    target = app / "wheelhouse" / LOCK_FILE if changed == "lock" else app / wheel_file()
    with target.open("ab") as handle:
        handle.write(b"\n# planted\n")
    image = tmp_path / "image"  # an interpreter without pip: nothing can be installed into this one's
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(image)], check=True, capture_output=True
    )
    done = _run(script, image / "bin" / "python3", tmp_path)
    assert done.returncode != 0
    assert f"{target} has sha256" in done.stderr and "not installing it" in done.stderr
    assert "boto3" not in done.stdout  # nothing ran after the check
