"""The delivery decisions one at a time, without rendering manifests: which delivery a config gets
(the override, the blueprint's image, the ConfigMap off EKS, the wheel in the cache bucket), the names
and keys derived from the wheel's digest, the install steps of each mode and the pod pieces each
mode adds. Fast, so `make mutation` runs it first for the delivery module."""

from __future__ import annotations

from pathlib import Path

import pytest
from workload_helpers import config_for

from llmctl import DISTRIBUTION, __version__
from llmctl.errors import LlmctlError
from llmctl.infra.workload.config import Delivery, WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    APP_VOLUME,
    CONFIGMAP_LOCK,
    CONFIGMAP_OUTSIDE,
    FETCH_CONTAINER,
    LOCK_FILE,
    OUTSIDE_DIR,
    WHEELHOUSE_DIR,
    app_objects,
    configmap_delivery,
    configmap_name,
    delivery_of,
    fetch_container,
    fixed_image,
    image_tag,
    install_script,
    lock_from_wheel_step,
    needs_bucket_access,
    outside_from_index_steps,
    outside_lock_args,
    pip_install,
    planned_delivery,
    runtime_lock,
    verify_step,
    wheel_file,
    wheel_key,
    wheelhouse_uri,
    with_app,
)
from llmctl.infra.workload.delivery.wheel_parts import ASSEMBLED_DIR, join_step
from llmctl.infra.workload.delivery.wheelhouse import lock_digest, wheelhouse_key

DIGEST = "0123456789abcdef" * 4


def _off_eks(config: WorkloadConfig) -> WorkloadConfig:
    facts = config.platform.model_copy(update={"target": "kubeconfig", "cache_bucket": None})
    return config.model_copy(update={"platform": facts})


def test_names_and_keys_derived_from_the_version_and_digest() -> None:
    assert wheel_file() == f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl"
    assert "-" not in wheel_file().split("-", 1)[0]
    assert image_tag(DIGEST) == f"{__version__.replace('+', '_')}-0123456789ab"
    assert wheel_key(DIGEST) == f"llmctl/wheels/{DIGEST}/{wheel_file()}"
    assert wheel_key(DIGEST, "x.whl") == f"llmctl/wheels/{DIGEST}/x.whl"
    assert configmap_name(DIGEST) == "llmctl-app-0123456789ab"
    assert configmap_name(None) == "llmctl-app-planned"


def test_the_override_wins_over_the_blueprint_image_and_either_is_decided() -> None:
    config = config_for("tiny-cpu")
    assert config.blueprint.image.serving_image is None and fixed_image(config) is None
    baked = config.model_copy(
        update={
            "blueprint": config.blueprint.model_copy(
                update={"image": config.blueprint.image.model_copy(update={"serving_image": "bp/img:1"})}
            )
        }
    )
    from_blueprint = fixed_image(baked)
    assert from_blueprint is not None
    assert (from_blueprint.mode, from_blueprint.image, from_blueprint.decided) == ("image", "bp/img:1", True)
    assert from_blueprint.reason == "the blueprint's image.serving_image"
    override = fixed_image(baked.model_copy(update={"image": "my/img:2"}))
    assert override is not None
    assert (override.image, override.reason, override.decided) == ("my/img:2", "the --image override", True)
    # the plan takes the named image on any target
    assert planned_delivery(_off_eks(baked)).image == "bp/img:1"


def test_the_plan_off_eks_is_the_configmap_and_on_eks_the_wheel_in_the_cache_bucket() -> None:
    config = config_for("tiny-cpu")
    off = planned_delivery(_off_eks(config))
    assert (off.mode, off.image, off.decided, off.wheel_path, off.wheel_digest) == (
        "configmap",
        config.blueprint.image.base,
        False,
        None,
        None,
    )
    assert off.reason.endswith("from the ConfigMaps llmctl-app-planned-*")
    named = config.model_copy(update={"platform": config.platform.model_copy(update={"cache_bucket": "b-1"})})
    wheel = planned_delivery(named)
    assert (wheel.mode, wheel.image, wheel.decided) == ("wheel", config.blueprint.image.base, False)
    assert wheel.wheel_uri == f"s3://b-1/llmctl/wheels/planned/{wheel_file()}"
    unnamed = config.model_copy(
        update={"platform": config.platform.model_copy(update={"cache_bucket": None})}
    )
    bucket = f"llmctl-{config.stack}-{config.platform.region}-cache"
    assert planned_delivery(unnamed).wheel_uri == f"s3://{bucket}/llmctl/wheels/planned/{wheel_file()}"
    assert needs_bucket_access(named) and not needs_bucket_access(_off_eks(config))


def test_what_up_decided_replaces_the_plan(tmp_path: Path) -> None:
    config = _off_eks(config_for("tiny-cpu"))
    wheel = tmp_path / wheel_file()
    wheel.write_bytes(b"wheel")
    decided = configmap_delivery(config, wheel, DIGEST)
    assert (decided.wheel_path, decided.wheel_digest, decided.decided) == (str(wheel), DIGEST, True)
    assert decided.reason.endswith("from the ConfigMaps llmctl-app-0123456789ab-*")
    with_delivery = config.model_copy(update={"delivery": decided})
    assert delivery_of(with_delivery) is decided
    assert delivery_of(config) == planned_delivery(config)
    image = config.model_copy(update={"delivery": Delivery(mode="image", image="x@sha256:1", reason="r")})
    assert not needs_bucket_access(image)


def test_outside_lock_arguments_skip_comments_and_blank_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.serving import lockfiles

    config = config_for("tiny-cpu")
    spec = runtime_lock(config, config.blueprint.image.base)
    lock = spec.path.read_text(encoding="utf-8")
    monkeypatch.setattr(lockfiles, "LOCKS_DIR", tmp_path)
    (tmp_path / spec.path.name).write_text(lock, encoding="utf-8")  # the lock its digest is read from
    (tmp_path / f"{spec.name}.outside.txt").write_text(
        "# a comment\n\n--extra-index-url https://example/whl  # the index\ntorch==2.0 # pinned\n  \n"
    )
    with_outside = spec.model_copy(update={"outside_lock": {"torch": "a CPU build"}})
    assert outside_lock_args(with_outside) == ["--extra-index-url", "https://example/whl", "torch==2.0"]
    assert outside_lock_args(with_outside.model_copy(update={"outside_lock": {}})) == []
    # off EKS (no bucket) the install runs them from their index before the lock, each file pinned by the
    # sha256 the first `up` recorded (issue 53, finding 5); on EKS no step names an index: they come
    # from the cache bucket with the lock
    monkeypatch.setattr(
        "llmctl.infra.workload.delivery.serving_code.runtime_lock", lambda _config, _image: with_outside
    )
    off = _off_eks(config)
    recorded = f"torch==2.0 \\\n    --hash=sha256:{DIGEST}\n"
    pinned = off.model_copy(
        update={"delivery": delivery_of(off).model_copy(update={"outside_requirements": recorded})}
    )
    steps = install_script(pinned, config.blueprint.image.base).split(" && ")
    assert steps[-3] == pip_install(
        ["--require-hashes", "--no-deps", "--extra-index-url", "https://example/whl", "-r", CONFIGMAP_OUTSIDE]
    )
    assert CONFIGMAP_OUTSIDE in steps[-4] and DIGEST in steps[-4]  # the recorded requirements, written
    assert steps[-2].endswith(f"-r {CONFIGMAP_LOCK}")
    # nothing recorded (a render): the pod refuses to start rather than install torch unpinned
    unpinned = install_script(off, config.blueprint.image.base)
    assert "torch==2.0" not in unpinned and "no recorded sha256" in unpinned
    on_eks = install_script(config, config.blueprint.image.base)
    assert "example/whl" not in on_eks and f"-r {OUTSIDE_DIR}/requirements.txt" in on_eks
    assert (
        on_eks.split(" && ")[-3].startswith("python3 -c ") and "hashlib" in on_eks
    )  # the sha256 check first


def test_pip_install_quotes_each_argument() -> None:
    assert pip_install(["a b", "c"]) == "python3 -m pip install --no-cache-dir -q 'a b' c"


def test_install_steps_of_each_mode_and_the_refusal_of_a_package_outside_the_lock(tmp_path: Path) -> None:
    config = config_for("tiny-cpu")
    image = config.blueprint.image.base
    wheel_steps = install_script(config, image).split(" && ")
    app = f"{APP_DIR}/{wheel_file()}"
    assert wheel_steps[-2:] == [
        pip_install(
            [
                "--no-index",
                "--find-links",
                WHEELHOUSE_DIR,
                # ray-cpu's CPU torch, from the cache bucket too (outside_wheels.py), in the same run
                "--find-links",
                OUTSIDE_DIR,
                "--require-hashes",
                "-r",
                f"{OUTSIDE_DIR}/requirements.txt",
                "-r",
                f"{WHEELHOUSE_DIR}/requirements.txt",
            ]
        ),
        pip_install(["--no-index", "--no-deps", app]),
    ]
    off = _off_eks(config)
    configmap_steps = install_script(off, image).split(" && ")
    spec = runtime_lock(off, image)
    joined = f"{ASSEMBLED_DIR}/{wheel_file()}"  # the ConfigMaps' parts, joined on the container's /tmp
    assert configmap_steps[-5:] == [
        join_step(APP_DIR, 1, joined),  # a plan: one (empty) part, and no sha256 to check yet
        lock_from_wheel_step(joined, spec),
        # ray-cpu's CPU torch: nothing recorded in a plan, so the pod refuses (see above)
        *outside_from_index_steps(None, outside_lock_args(spec)),
        pip_install(["--require-hashes", "-r", CONFIGMAP_LOCK]),
        pip_install(["--no-index", "--no-deps", joined]),
    ]
    wheel = tmp_path / "named_by_up-1-py3-none-any.whl"
    wheel.write_bytes(b"w" * (900 * 1024 + 1))  # one byte over a part: two ConfigMaps
    delivered = configmap_delivery(off, wheel, DIGEST).model_copy(update={"wheel_sha256": "ef" * 32})
    decided_steps = install_script(off.model_copy(update={"delivery": delivered}), image).split(" && ")
    joined = f"{ASSEMBLED_DIR}/{wheel.name}"
    at = decided_steps.index(join_step(APP_DIR, 2, joined))
    # joined, then the whole wheel's sha256 checked before anything reads it
    assert decided_steps[at + 1 : at + 3] == [
        verify_step({joined: "ef" * 32}),
        lock_from_wheel_step(joined, spec),
    ]
    assert f"{APP_DIR}/part-1 {APP_DIR}/part-2" in decided_steps[at]
    assert decided_steps[-1] == pip_install(["--no-index", "--no-deps", joined])
    assert install_script(config, image, []) == install_script(config, image)
    with pytest.raises(LlmctlError) as error:
        install_script(config, image, ["gradio", "x"])
    assert (
        error.value.message
        == f"the {config.blueprint.runtime} pods would install gradio x outside their lock"
    )


def test_each_mode_adds_its_pod_pieces(tmp_path: Path) -> None:
    spec = {
        "containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
        "volumes": [{"name": "v"}],
    }
    mount = {"name": APP_VOLUME, "mountPath": APP_DIR, "readOnly": True}
    config = config_for("tiny-cpu")
    image = config.model_copy(update={"delivery": Delivery(mode="image", image="x@sha256:1", reason="r")})
    assert with_app(image, spec) is spec
    off = _off_eks(config)
    mounted = with_app(off, spec)
    assert mounted["containers"][0]["volumeMounts"] == [{"name": "v", "mountPath": "/v"}, mount]
    # one projected volume combining the parts' ConfigMaps (one in a plan)
    assert mounted["volumes"] == [
        {"name": "v"},
        {"name": APP_VOLUME, "projected": {"sources": [{"configMap": {"name": "llmctl-app-planned-1"}}]}},
    ]
    assert "initContainers" not in mounted
    fetched = with_app(config, {"containers": [{"name": "c"}], "initContainers": [{"name": "first"}]})
    assert [c["name"] for c in fetched["initContainers"]] == ["first", FETCH_CONTAINER]
    assert fetched["containers"][0]["volumeMounts"] == [mount]
    assert fetched["volumes"] == [{"name": APP_VOLUME, "emptyDir": {}}]


def test_the_fetch_container_copies_the_wheel_and_the_wheelhouse_of_the_bucket() -> None:
    config = config_for("tiny-cpu")
    config = config.model_copy(
        update={"platform": config.platform.model_copy(update={"cache_bucket": "b-2"})}
    )
    lock = runtime_lock(config, config.blueprint.image.base)
    assert wheelhouse_uri(config) == f"s3://b-2/{wheelhouse_key(lock)}/"
    container = fetch_container(config)
    assert container["name"] == FETCH_CONTAINER
    assert container["command"][2] == (
        f"aws s3 cp --only-show-errors s3://b-2/llmctl/wheels/planned/{wheel_file()} {APP_DIR}/{wheel_file()} "
        f"&& aws s3 cp --only-show-errors --recursive {wheelhouse_uri(config)} {WHEELHOUSE_DIR}/ "
        # what ray-cpu's lock leaves out (its CPU torch): the prefix `up` records, planned offline
        f"&& aws s3 cp --only-show-errors --recursive s3://b-2/llmctl/wheelhouse/planned/ {OUTSIDE_DIR}/"
    )
    decided = config.model_copy(
        update={"delivery": planned_delivery(config).model_copy(update={"outside_uri": "s3://b-2/p/"})}
    )
    assert fetch_container(decided)["command"][2].endswith(f"--recursive s3://b-2/p/ {OUTSIDE_DIR}/")
    assert OUTSIDE_DIR not in fetch_container(config_for("llama2-inf2"))["command"][2]  # a lock with all
    assert container["env"] == [{"name": "AWS_REGION", "value": config.platform.region}]


def test_only_the_configmap_mode_has_an_app_object(tmp_path: Path) -> None:
    config = config_for("tiny-cpu")
    assert app_objects(config) == []
    off = _off_eks(config)
    [planned] = app_objects(off)
    assert planned["metadata"]["name"] == "llmctl-app-planned-1" and planned["binaryData"] == {"part-1": ""}
    assert planned["immutable"] is True
    assert planned["metadata"]["annotations"] == {
        "llmctl.dev/wheel-sha256": "planned",
        "llmctl.dev/wheel-part": "1 of 1",
    }


def test_the_wheel_mode_checks_the_lock_the_wheel_and_a_recorded_outside_prefix_by_their_sha256() -> None:
    config = config_for("tiny-cpu")  # ray-cpu: its CPU torch is outside the lock
    image = config.blueprint.image.base
    lock = {f"{WHEELHOUSE_DIR}/{LOCK_FILE}": lock_digest(runtime_lock(config, image))}
    # the plan: no wheel digest yet, the outside prefix still `planned` (no digest to check)
    assert f" && {verify_step(lock)} && " in install_script(config, image)
    app = f"{APP_DIR}/{wheel_file()}"
    outside = "fedcba9876543210" * 4
    decided = planned_delivery(config).model_copy(
        update={"wheel_sha256": DIGEST, "outside_uri": f"s3://b-2/llmctl/wheelhouse/{outside}/"}
    )
    script = install_script(config.model_copy(update={"delivery": decided}), image)
    assert f" && {verify_step({**lock, app: DIGEST, f'{OUTSIDE_DIR}/{LOCK_FILE}': outside})} && " in script
