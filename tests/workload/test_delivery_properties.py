"""Properties of the serving code's delivery (`infra/workload/delivery/serving_code.py`), for any config.

The rules, from the module's docstring: the app is never installed from a package index (only the
local wheel, `--no-index --no-deps`); the runtime's lock is installed hash-checked, and in wheel mode
with no index at all (from the wheelhouse the init container copied); an image needs no pod pieces;
the wheel and ConfigMap modes mount the app read-only into every serving container from one volume
(an emptyDir filled by one fetch init container, or the ConfigMap named after the wheel's digest);
names and keys are content-addressed (new code, new name); a named image always wins; and the
ConfigMap's size is what the API server counts: the lock's bytes plus the decoded wheel. So for
every catalog blueprint, on EKS and on an existing cluster, for every delivery and any digest:
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
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
    configmap_delivery,
    configmap_name,
    configmap_size,
    delivery_of,
    install_script,
    wheel_key,
    with_app,
)

NAMES = catalog_names()
digest_st = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


def _config(name: str, target: str, mode: str, digest: str) -> WorkloadConfig:
    config = config_for(name)
    if target == "kubeconfig":
        config = _off_eks(config)
    if mode == "image":
        return config.model_copy(update={"image": "registry.example/app:1"})
    if mode == "configmap":
        return config.model_copy(update={"delivery": configmap_delivery(config, Path("app.whl"), digest)})
    return config  # the plan: the wheel on EKS, the ConfigMap elsewhere


config_st = st.builds(
    _config,
    st.sampled_from(NAMES),
    st.sampled_from(("eks", "kubeconfig")),
    st.sampled_from(("plan", "image", "configmap")),
    digest_st,
)


@given(config_st)
def test_the_app_never_comes_from_an_index_and_every_lock_is_hash_checked(config: WorkloadConfig) -> None:
    delivery = delivery_of(config)
    if delivery.mode == "image":
        return
    steps = install_script(config, delivery.image).split(" && ")
    installs = [s for s in steps if " pip install " in s]
    app = installs[-1]
    assert "--no-index" in app and "--no-deps" in app and f"{APP_DIR}/" in app
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
        assert volume["configMap"] == {"name": configmap_name(delivery.wheel_digest)} and inits == []
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


@given(st.sampled_from(NAMES), st.binary(max_size=2048))
def test_the_configmap_size_is_the_decoded_wheel(name: str, wheel: bytes) -> None:
    """The wheel alone: the pods take the runtime's lock out of it (delivery.lock_from_wheel_step)."""
    import tempfile

    config = _off_eks(config_for(name))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "app.whl"
        path.write_bytes(wheel)
        assert configmap_size(config, path, DIGEST) == len(wheel)


@given(st.sampled_from(NAMES), st.sampled_from(("eks", "kubeconfig")))
def test_a_named_image_wins_over_the_plan_on_any_target(name: str, target: str) -> None:
    delivery = delivery_of(_config(name, target, "image", DIGEST))
    assert (delivery.mode, delivery.image, delivery.decided) == ("image", "registry.example/app:1", True)
