"""Properties of the serving code's delivery (`infra/workload/delivery/serving_code.py`), for any config.

The rules, from the module's docstring: the app is never installed from a package index (only the
local wheel, `--no-index --no-deps`); the runtime's lock is installed hash-checked, and in wheel mode
with no index at all (from the wheelhouse the init container copied); an image needs no pod pieces;
the wheel and ConfigMap modes mount the app read-only into every serving container from one volume
(an emptyDir filled by one fetch init container, or one projected volume of the ConfigMaps holding the
wheel's parts, named after its digest); names and keys are content-addressed (new code, new name); a
named image always wins; and each part's ConfigMap is under what the API server accepts (the decoded
binaryData it counts), the parts giving back the wheel. So for every catalog blueprint, on EKS and on
an existing cluster, for every delivery, any digest and any wheel size up to the cap:
"""

from __future__ import annotations

import base64
import functools
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_delivery_rules import DIGEST, _off_eks
from workload_helpers import config_for

from llmctl import DISTRIBUTION
from llmctl.blueprints.catalog import catalog_names
from llmctl.infra.workload.config import WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    APP_VOLUME,
    FETCH_CONTAINER,
    app_objects,
    configmap_delivery,
    configmap_name,
    delivery_of,
    install_script,
    wheel_key,
    with_app,
)
from llmctl.infra.workload.delivery.wheel_parts import (
    ASSEMBLED_DIR,
    CONFIGMAP_LIMIT,
    MAX_PARTS,
    PART_BYTES,
    parts_volume,
)

NAMES = catalog_names()
digest_st = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
#: wheel sizes around the parts' edges: a byte, one full part, one byte over, three parts, the cap
SIZES = (1, PART_BYTES, PART_BYTES + 1, 2 * PART_BYTES + 7, MAX_PARTS * PART_BYTES)
_FOLDER = tempfile.TemporaryDirectory()  # the wheels `up` would have built, one per size


@functools.cache
def _wheel(size: int) -> Path:
    path = Path(_FOLDER.name) / f"app_{size}-1-py3-none-any.whl"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    return path


def _config(name: str, target: str, mode: str, digest: str, size: int = 1) -> WorkloadConfig:
    config = config_for(name)
    if target == "kubeconfig":
        config = _off_eks(config)
    if mode == "image":
        return config.model_copy(update={"image": "registry.example/app:1"})
    if mode == "configmap":
        return config.model_copy(update={"delivery": configmap_delivery(config, _wheel(size), digest)})
    return config  # the plan: the wheel on EKS, the ConfigMap elsewhere


config_st = st.builds(
    _config,
    st.sampled_from(NAMES),
    st.sampled_from(("eks", "kubeconfig")),
    st.sampled_from(("plan", "image", "configmap")),
    digest_st,
    st.sampled_from(SIZES),
)


def _parts(delivery_size: int) -> int:
    return -(-delivery_size // PART_BYTES)


@given(config_st)
def test_the_app_never_comes_from_an_index_and_every_lock_is_hash_checked(config: WorkloadConfig) -> None:
    delivery = delivery_of(config)
    if delivery.mode == "image":
        return
    steps = install_script(config, delivery.image).split(" && ")
    installs = [s for s in steps if " pip install " in s]
    app = installs[-1]
    # the fetched wheel (wheel mode), or the one joined from the ConfigMaps' parts on the container's /tmp
    folder = ASSEMBLED_DIR if delivery.mode == "configmap" else APP_DIR
    assert "--no-index" in app and "--no-deps" in app and app.split()[-1].startswith(f"{folder}/")
    if delivery.mode == "configmap":
        [join] = [s for s in steps if f"{APP_DIR}/part-" in s]
        size = Path(delivery.wheel_path).stat().st_size if delivery.wheel_path else 0
        parts = [f"{APP_DIR}/part-{i}" for i in range(1, max(1, _parts(size)) + 1)]
        assert join.endswith(" ".join(parts)) and steps.index(join) < steps.index(app)
    locks = [s for s in installs if " -r " in s]
    assert locks and all("--require-hashes" in s for s in locks)
    if delivery.mode == "wheel":
        assert all("--no-index" in s for s in locks)
    for step in installs:
        words = step.split()
        assert DISTRIBUTION not in words and "llmctl" not in words


@given(config_st)
def test_every_serving_container_gets_the_app_read_only_from_one_volume(config: WorkloadConfig) -> None:
    pod = {
        "containers": [{"name": "a"}, {"name": "b", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}],
        "volumes": [{"name": "x", "emptyDir": {}}],
    }
    spec = with_app(config, pod)
    delivery = delivery_of(config)
    if delivery.mode == "image":
        assert spec == pod
        return
    for container in spec["containers"]:
        mounts = [m for m in container["volumeMounts"] if m["name"] == APP_VOLUME]
        assert mounts == [{"name": APP_VOLUME, "mountPath": APP_DIR, "readOnly": True}]
    assert {"name": "x", "mountPath": "/x"} in spec["containers"][1]["volumeMounts"]
    [volume] = [v for v in spec["volumes"] if v["name"] == APP_VOLUME]
    inits = [c["name"] for c in spec.get("initContainers", [])]
    if delivery.mode == "configmap":
        size = Path(delivery.wheel_path).stat().st_size if delivery.wheel_path else 0
        names = [f"{configmap_name(delivery.wheel_digest)}-{i}" for i in range(1, max(1, _parts(size)) + 1)]
        assert volume == parts_volume(APP_VOLUME, names) and inits == []
        assert [source["configMap"]["name"] for source in volume["projected"]["sources"]] == names
    else:
        assert volume == {"name": APP_VOLUME, "emptyDir": {}} and inits == [FETCH_CONTAINER]


@given(digest_st, st.integers(0, 63))
def test_names_and_keys_follow_the_content(digest: str, changed_at: int) -> None:
    """Two wheels whose digests differ anywhere differ in key; in ConfigMap name as soon as they
    differ in the 12 hex digits the name keeps (new code, new name, new pods)."""
    other = digest[:changed_at] + ("0" if digest[changed_at] != "0" else "1") + digest[changed_at + 1 :]
    assert (configmap_name(digest) == configmap_name(other)) is (changed_at >= 12)
    assert wheel_key(digest) != wheel_key(other) and wheel_key(digest) == wheel_key(digest)
    assert len(configmap_name(digest)) <= 63


@settings(max_examples=30, deadline=None)  # up to 3.5 MiB of wheel each
@given(st.sampled_from(NAMES), st.integers(0, MAX_PARTS * PART_BYTES), digest_st)
def test_each_part_is_under_the_api_servers_limit_and_the_parts_give_back_the_wheel(
    name: str, size: int, digest: str
) -> None:
    """ValidateConfigMap counts every data value and every decoded binaryData value per ConfigMap: each
    part holds at most PART_BYTES of the wheel alone (the pods take the runtime's lock out of it), and
    their keys differ, so the projected volume shows every part (the kubelet merges the sources' keys)."""
    config = _off_eks(config_for(name))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "app.whl"
        path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
        parts = app_objects(config.model_copy(update={"delivery": configmap_delivery(config, path, digest)}))
        wheel = path.read_bytes()
    assert len(parts) == max(1, _parts(size)) <= MAX_PARTS
    assert [p["metadata"]["name"] for p in parts] == [
        f"{configmap_name(digest)}-{i}" for i in range(1, len(parts) + 1)
    ]
    counted = [sum(len(base64.b64decode(v)) for v in p["binaryData"].values()) for p in parts]
    assert all("data" not in p for p in parts) and max(counted) <= PART_BYTES < CONFIGMAP_LIMIT
    keys = [key for p in parts for key in p["binaryData"]]
    assert len(set(keys)) == len(keys)
    assert b"".join(base64.b64decode(p["binaryData"][f"part-{i}"]) for i, p in enumerate(parts, 1)) == wheel


@given(st.sampled_from(NAMES), st.sampled_from(("eks", "kubeconfig")))
def test_a_named_image_wins_over_the_plan_on_any_target(name: str, target: str) -> None:
    delivery = delivery_of(_config(name, target, "image", DIGEST))
    assert (delivery.mode, delivery.image, delivery.decided) == ("image", "registry.example/app:1", True)
