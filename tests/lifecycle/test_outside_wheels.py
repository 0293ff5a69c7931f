"""What a runtime lock leaves out (ray-cpu's CPU torch, served only by PyTorch's CPU index), fetched
once by the user's machine at the first `up` and installed by the pods with no index
(infra/workload/delivery/outside_wheels.py).

A local index directory stands in for the CPU index: small wheels made here (`make_wheel`) named
`torch 2.13.0+cpu` (needing a `sympy-fake` and the lock's `filelock`), served to the real `pip download`
as `--find-links`. The bucket is moto's; the pod start runs the serving container's exact install script
with every index pointed at a closed port.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import boto3
import pytest
from lifecycle_support import make_wheel
from pod_install import run_as_image

from llmctl.blueprints.catalog import load_blueprint
from llmctl.errors import LlmctlError
from llmctl.infra.workload.config import Delivery, PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery import outside_wheels
from llmctl.infra.workload.delivery.outside_wheels import deliver_outside, outside_key, requirements_text
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    OUTSIDE_DIR,
    VENV_DIR,
    WHEELHOUSE_DIR,
    fetch_container,
    install_script,
)
from llmctl.serving import lockfiles
from llmctl.serving.lockfiles import locks, parse_lock
from llmctl.state import load_pins

REAL_DOWNLOAD = outside_wheels.download  # conftest's `cpu_index` replaces it for the other tests
SPEC = locks().locks["ray-cpu"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def cpu_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """The stand-in index folder and the pip arguments naming it (as the outside file names its index)."""
    monkeypatch.setattr(outside_wheels, "download", REAL_DOWNLOAD)
    folder = tmp_path / "cpu-index"
    filelock = parse_lock(SPEC.path.read_text())["filelock"][0]
    make_wheel(folder, "torch", "2.13.0+cpu", ("sympy-fake>=1", "filelock"))
    make_wheel(folder, "sympy-fake", "1.0")
    make_wheel(folder, "filelock", filelock)  # in the lock: the lock's wheelhouse has it
    return folder, ["--no-index", "--find-links", str(folder), "torch==2.13.0"]


def config(region: str) -> WorkloadConfig:
    bp = load_blueprint("tiny-cpu")
    return WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp, stack="dev", region=region))


def test_the_first_up_downloads_records_and_uploads_once_and_a_later_up_reuses_it(
    aws: str, cpu_index: tuple[Path, list[str]], tmp_path: Path
) -> None:
    folder, args = cpu_index
    s3 = boto3.client("s3", region_name=aws)
    s3.create_bucket(Bucket="cache", CreateBucketConfiguration={"LocationConstraint": aws})
    notes: list[str] = []
    uri = deliver_outside(config(aws), SPEC, "cache", notes.append, args=args)

    wanted = {p.name: sha(p) for p in folder.glob("*.whl") if not p.name.startswith("filelock")}
    assert load_pins("dev", "tiny-cpu").wheels == wanted  # the sha256 of each file, in the stack's state
    prefix = outside_key(SPEC, wanted)
    assert uri == f"s3://cache/{prefix}/" and notes[-1].startswith(f"    uploaded s3://cache/{prefix}/")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket="cache")["Contents"]}
    assert keys == {f"{prefix}/{name}" for name in [*wanted, "requirements.txt"]}
    body = s3.get_object(Bucket="cache", Key=f"{prefix}/requirements.txt")["Body"].read().decode()
    torch = "torch-2.13.0+cpu-py3-none-any.whl"
    assert f"torch==2.13.0+cpu \\\n    --hash=sha256:{wanted[torch]}" in body and body == requirements_text(
        SPEC, wanted
    )

    shutil.move(folder, tmp_path / "gone")  # a later `up` needs no index: the record names the prefix
    assert deliver_outside(config(aws), SPEC, "cache", notes.append, args=args) == uri
    assert notes[-1].startswith(f"    reusing s3://cache/{prefix}/")

    # a new bucket and an index that serves other bytes under the recorded names: refused
    shutil.move(tmp_path / "gone", folder)
    s3.delete_object(Bucket="cache", Key=f"{prefix}/requirements.txt")
    make_wheel(tmp_path / "rebuilt", "torch", "2.13.0+cpu", ("sympy-fake>=1", "filelock", "extra-dep-fake"))
    shutil.copyfile(tmp_path / "rebuilt" / torch, folder / torch)
    make_wheel(folder, "extra-dep-fake", "1.0")
    with pytest.raises(LlmctlError) as refused:
        deliver_outside(config(aws), SPEC, "cache", notes.append, args=args)
    assert "the index now serves other files" in refused.value.message and torch in refused.value.message
    assert load_pins("dev", "tiny-cpu").wheels == wanted


def test_a_pod_installs_what_the_lock_leaves_out_from_the_bucket_with_no_index(
    aws: str, cpu_index: tuple[Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, args = cpu_index
    # a one-package lock stands in for ray-cpu's (hundreds of MB of wheels), with the same outside file
    locked = make_wheel(tmp_path / "lock-wheels", "fake-locked", "1.0")
    lock_dir = tmp_path / "locks"
    shutil.copytree(lockfiles.LOCKS_DIR, lock_dir)
    (lock_dir / "ray-cpu.txt").write_text(f"fake-locked==1.0 \\\n    --hash=sha256:{sha(locked)}\n")
    monkeypatch.setattr(lockfiles, "LOCKS_DIR", lock_dir)

    s3 = boto3.client("s3", region_name=aws)
    s3.create_bucket(Bucket="cache", CreateBucketConfiguration={"LocationConstraint": aws})
    uri = deliver_outside(config(aws), SPEC, "cache", lambda _t: None, args=args)
    assert uri is not None
    base = config(aws).blueprint.image.base
    wheel_uri = "s3://cache/llmctl/wheels/abc/llmctl_eks-0-py3-none-any.whl"
    delivered = config(aws).model_copy(
        update={
            "delivery": Delivery(mode="wheel", image=base, wheel_uri=wheel_uri, outside_uri=uri, reason="r")
        }
    )
    fetch = fetch_container(delivered)["command"][2]
    assert fetch.endswith(f"aws s3 cp --only-show-errors --recursive {uri} {OUTSIDE_DIR}/")

    # the pod's folders as the init container leaves them: the lock's wheelhouse, and the prefix above
    app = tmp_path / "app"
    house = Path(str(app) + WHEELHOUSE_DIR.removeprefix(APP_DIR))
    house.mkdir(parents=True)
    shutil.copyfile(locked, house / locked.name)
    (house / "requirements.txt").write_text((lock_dir / "ray-cpu.txt").read_text())
    outside = Path(str(app) + OUTSIDE_DIR.removeprefix(APP_DIR))
    outside.mkdir()
    prefix = uri.removeprefix("s3://cache/")
    for item in s3.list_objects_v2(Bucket="cache", Prefix=prefix)["Contents"]:
        s3.download_file("cache", item["Key"], str(outside / item["Key"].rsplit("/", 1)[-1]))
    steps = install_script(delivered, base).split(" && ")
    assert not [step for step in steps if "pip install" in step and "--no-index" not in step]
    script = " && ".join(steps[:-1])  # without the llmctl wheel's own install (no index either)
    script = script.replace(APP_DIR, str(app)).replace(VENV_DIR, str(tmp_path / "venv"))

    # the image's interpreter: Debian's, externally managed (as the images' system Pythons): the
    # script installs into a venv that sees it
    check = "python3 -c 'import torch, sympy_fake, fake_locked; print(torch.VERSION, sympy_fake.VERSION)'"
    done = run_as_image(script, Path("/usr/bin/python3"), tmp_path, check)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2.13.0+cpu", "1.0"]
