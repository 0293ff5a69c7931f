"""The wheel in ConfigMap parts (`infra/workload/delivery/wheel_parts.py`), on an existing cluster.

The wheel outgrew the 1 MiB one ConfigMap holds (1029 KiB: every runtime's lock rides in it), and `up`
refused every existing cluster without an image. Now it goes in parts of at most 900 KiB, one ConfigMap
each, combined in the pod by one projected volume; the serving container joins them and checks the
whole wheel's sha256 before it installs. The pod's own steps run here for real on the parts the code
rendered, written to a folder the way the kubelet writes a projected volume (every source's binaryData
keys as files of one directory: kubernetes/kubernetes pkg/volume/projected/projected.go `collectData`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from pod_install import run_as_image
from test_workload_builders import SCHEMA
from test_workload_delivery import on_existing_cluster, serving_specs
from workload_helpers import config_for

from llmctl.errors import LlmctlError
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    APP_VOLUME,
    CONFIGMAP_LOCK,
    app_objects,
    configmap_delivery,
    install_script,
    runtime_lock,
    wheel_file,
)
from llmctl.infra.workload.delivery.wheel_parts import (
    ASSEMBLED_DIR,
    CONFIGMAP_LIMIT,
    MAX_PARTS,
    PART_BYTES,
    part_count,
)
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.prepare import delivery as deploy_delivery
from llmctl.infra.workload.schedulability import pod_templates

BP = "llama2-inf2"  # ray-neuronx: its lock leaves nothing out, so `decide` downloads nothing


def _delivered(config: WorkloadConfig, wheel: Path, digest: str = "ab" * 32) -> WorkloadConfig:
    """The config as `up` leaves it for `wheel`: the ConfigMap delivery with the file's sha256."""
    delivery = configmap_delivery(config, wheel, digest).model_copy(
        update={"wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    )
    return config.model_copy(update={"delivery": delivery})


def _mount(parts: list[dict[str, Any]], folder: Path) -> Path:
    """The projected volume of the part ConfigMaps, as the kubelet writes it: every key a file."""
    folder.mkdir(parents=True)
    for part in parts:
        for key, value in part["binaryData"].items():
            (folder / key).write_bytes(base64.b64decode(value))
    return folder


def _pod_steps(config: WorkloadConfig, mount: Path, tmp: Path) -> str:
    """The serving container's steps from the join to the lock taken out of the wheel, on `tmp`'s paths."""
    steps = install_script(config, config.blueprint.image.base, user_site=True).split(" && ")
    first = next(i for i, step in enumerate(steps) if f"{APP_DIR}/part-1" in step)
    last = next(i for i, step in enumerate(steps) if CONFIGMAP_LOCK in step)
    script = " && ".join(steps[first : last + 1])
    script = script.replace(APP_DIR, str(mount)).replace(ASSEMBLED_DIR, str(tmp / "joined"))
    return script.replace(CONFIGMAP_LOCK, str(tmp / "lock" / "requirements.txt"))


def _run(script: str, where: Path) -> Any:
    """The steps as the image runs them (python3 first on PATH, no package index)."""
    where.mkdir()
    return run_as_image(script, Path(sys.executable), where, "true")


def _three_part_wheel(folder: Path, config: WorkloadConfig) -> Path:
    """A real zip wheel of three parts: the runtime's lock as package data, and 2 MiB that do not compress."""
    spec = runtime_lock(config, config.blueprint.image.base)
    wheel = folder / wheel_file()
    with zipfile.ZipFile(wheel, "w") as built:
        built.write(spec.path, f"llmctl/serving/locks/{spec.name}.txt")
        built.writestr("llmctl/blob.bin", os.urandom(2 * 1024 * 1024), zipfile.ZIP_STORED)
    return wheel


@pytest.mark.parametrize("which", ["real", "three-parts"])
def test_the_pod_joins_the_parts_up_rendered_and_refuses_a_changed_part(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = on_existing_cluster(config_for(BP))
    if which == "real":  # this llmctl's wheel, as `up` builds, keeps and records it
        monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
        decided = config.model_copy(update={"delivery": deploy_delivery.decide(config)})
    else:
        decided = _delivered(config, _three_part_wheel(tmp_path, config))
    wheel = Path(str(decided.delivery and decided.delivery.wheel_path))
    parts = app_objects(decided)
    assert len(parts) == part_count(wheel.stat().st_size) <= MAX_PARTS
    if which == "three-parts":
        assert len(parts) == 3
    mount = _mount(parts, tmp_path / "mount")
    done = _run(_pod_steps(decided, mount, tmp_path), tmp_path / "ok")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "joined" / wheel.name).read_bytes() == wheel.read_bytes()
    spec = runtime_lock(config, config.blueprint.image.base)
    assert (tmp_path / "lock" / "requirements.txt").read_bytes() == spec.path.read_bytes()

    # a part changed after `up` recorded the wheel's sha256: the pod stops before it reads the wheel
    (tmp_path / "lock" / "requirements.txt").unlink()
    last = mount / f"part-{len(parts)}"
    data = bytearray(last.read_bytes())
    data[-1] ^= 1
    last.write_bytes(bytes(data))
    done = _run(_pod_steps(decided, mount, tmp_path), tmp_path / "bad")
    assert done.returncode != 0 and "the pod spec says" in done.stderr and "not installing it" in done.stderr
    assert not (tmp_path / "lock" / "requirements.txt").exists()


def test_a_wheel_over_one_configmap_goes_in_parts_and_over_the_cap_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: one byte over 1 MiB refused (every existing cluster, once the wheel grew past it)."""
    config = on_existing_cluster(config_for(BP))
    big = tmp_path / wheel_file()
    monkeypatch.setattr(deploy_delivery, "kept_wheel", lambda: (big, "ef" * 32))
    for size, parts in ((CONFIGMAP_LIMIT + 1, 2), (MAX_PARTS * PART_BYTES, MAX_PARTS)):
        big.write_bytes(b"x" * size)
        delivery = deploy_delivery.decide(config)
        assert (
            delivery.mode == "configmap" and delivery.wheel_sha256 == hashlib.sha256(b"x" * size).hexdigest()
        )
        assert len(app_objects(config.model_copy(update={"delivery": delivery}))) == parts
    big.write_bytes(b"x" * (MAX_PARTS * PART_BYTES + 1))  # one byte over the cap: refused, nothing changed
    with pytest.raises(LlmctlError) as error:
        deploy_delivery.decide(config)
    assert "\n" not in error.value.message
    assert error.value.message == (
        "the llmctl wheel is 3601 KiB, over the 3600 KiB llmctl delivers in ConfigMaps (4 parts of 900 KiB, "
        "each under the 1024 KiB the API server accepts)"
    )
    assert error.value.hint and "llmctl images build --push -b llama2-inf2" in error.value.hint


@pytest.mark.parametrize("name", ["llama2-inf2", "llama2-triton-vllm-gpu"])
def test_the_parts_and_the_pods_that_mount_them_validate_against_the_kubernetes_schema(
    name: str, tmp_path: Path
) -> None:
    """Each part ConfigMap, and each pod with the serving pods' projected volume (strict: a misspelt field
    is refused), for a RayService and a Deployment."""
    config = on_existing_cluster(config_for(name))
    wheel = tmp_path / wheel_file()
    wheel.write_bytes(os.urandom(2 * PART_BYTES + 1))
    manifests = build_manifests(_delivered(config, wheel), hf_token=None)
    parts = [
        m for m in manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"].startswith("llmctl-app-")
    ]
    assert [p["metadata"]["annotations"]["llmctl.dev/wheel-part"] for p in parts] == [
        "1 of 3",
        "2 of 3",
        "3 of 3",
    ]
    for part in parts:
        kubernetes_validate.validate(part, SCHEMA, strict=True)
    names = [{"configMap": {"name": p["metadata"]["name"]}} for p in parts]
    specs = serving_specs(manifests)
    assert specs
    for spec in specs:
        [volume] = [v for v in spec["volumes"] if v["name"] == APP_VOLUME]
        assert volume["projected"]["sources"] == names
    pods = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": template.spec}
        for obj in manifests
        for template in pod_templates(obj)
    ]
    assert len(pods) >= len(specs)
    for pod in pods:  # every pod as the API server takes it, the projected volume included
        kubernetes_validate.validate(pod, SCHEMA, strict=True)
