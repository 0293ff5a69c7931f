"""Serving code delivery in the rendered objects: the distribution's own name, the wheel every pod of
every runtime fetches (EKS) or mounts from a ConfigMap (existing clusters) and installs, and no
`pip install` of the app by any name on a package index, on either target."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml
from workload_helpers import CATALOG, blueprint, config_for

from llmctl import DISTRIBUTION, __version__
from llmctl.blueprints.runtimes import runtime_names
from llmctl.blueprints.versions import versions
from llmctl.infra.plan.offline import run_offline
from llmctl.infra.workload.builders.cache import (
    MIRROR_JOB,
    MIRROR_PACKAGES_DIR,
    MIRROR_SCRIPT,
    MIRROR_SERVICE_ACCOUNT,
    mirror_lock,
)
from llmctl.infra.workload.config import Delivery, PlatformFacts, WorkloadConfig
from llmctl.infra.workload.delivery.serving_code import (
    APP_DIR,
    APP_VOLUME,
    CONFIGMAP_LOCK,
    FETCH_CONTAINER,
    LOCK_FILE,
    OUTSIDE_DIR,
    WHEELHOUSE_DIR,
    configmap_delivery,
    configmap_name,
    planned_delivery,
    runtime_lock,
    user_site_step,
    wheel_file,
)
from llmctl.infra.workload.delivery.wheel_parts import ASSEMBLED_DIR, MAX_PARTS, part_count, parts_volume
from llmctl.infra.workload.delivery.wheelhouse import lock_digest, wheelhouse_key
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.program import build_workload
from llmctl.infra.workload.render import render_yaml
from llmctl.serving.lockfiles import locks, parse_lock

ROOT = Path(__file__).resolve().parents[2]
# our app under any name it could have on an index: `llmctl`, the distribution, their spellings
APP_NAMES = {"llmctl", DISTRIBUTION, DISTRIBUTION.replace("-", "_")}
PINNED = re.compile(r"^[A-Za-z0-9_.\-]+(\[[A-Za-z0-9_,\-]+\])?==[A-Za-z0-9_.+\-]+$")
# pip options that take a value
VALUED = {"--extra-index-url", "--index-url", "-i", "-r", "-c", "--find-links", "-f"}


def pod_specs(obj: Any) -> list[dict[str, Any]]:
    """Every pod spec (a mapping with `containers`) inside an object."""
    found: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            found.append(obj)
        for value in obj.values():
            found.extend(pod_specs(value))
    elif isinstance(obj, list):
        for value in obj:
            found.extend(pod_specs(value))
    return found


def strings(obj: Any) -> list[str]:
    """Every string value inside an object (commands, args, scripts)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for value in obj.values() for s in strings(value)]
    if isinstance(obj, list):
        return [s for value in obj for s in strings(value)]
    return []


def pip_installs(manifests: list[dict[str, Any]]) -> list[list[str]]:
    """The arguments of every `pip install` in the manifests' strings, as a shell splits them (an
    admission policy's strings are CEL and messages, not shell: left out)."""
    installs = []
    shell = [m for m in manifests if m.get("kind") != "ValidatingAdmissionPolicy"]
    for text in strings(shell):
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        for i in range(len(words) - 1):
            if words[i].endswith("pip") and words[i + 1] == "install":
                args = []
                for word in words[i + 2 :]:
                    if word in ("&&", ";", "||", "|", "&"):
                        break
                    args.append(word)
                installs.append(args)
    return installs


def on_existing_cluster(config: WorkloadConfig) -> WorkloadConfig:
    """The same workload on `--target kubeconfig` (no bucket, no registry)."""
    facts = config.platform.model_copy(update={"target": "kubeconfig", "cache_bucket": None})
    return config.model_copy(update={"platform": facts})


def serving_specs(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod specs of the serving objects."""
    serving = [
        m
        for m in manifests
        if m["kind"] in ("RayService", "Deployment")
        and m["metadata"]["labels"]["app.kubernetes.io/component"] == "serving"
    ]
    return [spec for m in serving for spec in pod_specs(m)]


def installed_from_an_index(args: list[str]) -> list[str]:
    """The requirement arguments of a pip install (options and their values dropped)."""
    names, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in VALUED:
            skip = True
        elif not arg.startswith("-"):
            names.append(arg)
    return names


def test_the_distribution_has_its_own_name_and_the_code_uses_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION and DISTRIBUTION != "llmctl"  # `llmctl` on PyPI is another project
    assert metadata.version(DISTRIBUTION) == __version__ != "0.0.0+unknown"
    assert project["scripts"]["llmctl"] == "llmctl.cli.app:main"  # the command keeps its name
    assert wheel_file() == f"llmctl_eks-{__version__}-py3-none-any.whl"
    for path in ("serving/common/deps.py", "infra/targets/needs.py", "serving/client/bench/plots.py"):
        assert "'llmctl[" not in (ROOT / path).read_text(), path


@pytest.mark.parametrize("name", CATALOG)
def test_every_pod_fetches_and_installs_the_delivered_wheel(name: str) -> None:
    config = config_for(name)
    delivery = planned_delivery(config)
    assert delivery.mode == "wheel" and delivery.wheel_uri is not None
    manifests = build_manifests(config, hf_token=None)
    specs = serving_specs(manifests)
    assert specs, name
    bucket = delivery.wheel_uri.removeprefix("s3://").split("/", 1)[0]
    house = f"s3://{bucket}/{wheelhouse_key(runtime_lock(config, delivery.image))}/"
    # what the lock leaves out (ray-cpu's CPU torch), from the prefix the first `up` records (planned here)
    outside = runtime_lock(config, delivery.image).outside_lock
    planned = f"s3://{bucket}/llmctl/wheelhouse/planned/"
    for spec in specs:
        [fetch] = [c for c in spec["initContainers"] if c["name"] == FETCH_CONTAINER]
        assert fetch["command"][:2] == ["/bin/sh", "-c"]
        copies = [shlex.split(step) for step in fetch["command"][2].split(" && ")]
        assert copies == [
            ["aws", "s3", "cp", "--only-show-errors", delivery.wheel_uri, f"{APP_DIR}/{wheel_file()}"],
            ["aws", "s3", "cp", "--only-show-errors", "--recursive", house, f"{WHEELHOUSE_DIR}/"],
            *(
                [["aws", "s3", "cp", "--only-show-errors", "--recursive", planned, f"{OUTSIDE_DIR}/"]]
                if outside
                else []
            ),
        ]
        assert fetch["image"].startswith("public.ecr.aws/aws-cli/aws-cli:2.")
        assert {"name": APP_VOLUME, "emptyDir": {}} in spec["volumes"]
        for container in spec["containers"]:
            if container["name"] == "autoscaler":
                continue
            assert {"name": APP_VOLUME, "mountPath": APP_DIR, "readOnly": True} in container["volumeMounts"]
            script = " ".join([*container.get("command", []), *container.get("args", [])])
            # into the user site, or a venv, on volumes (a read-only root: builders/writable.py)
            assert user_site_step() in script
            assert f"pip install --no-cache-dir -q --no-index --no-deps {APP_DIR}/{wheel_file()}" in script
            more = (f"--find-links {OUTSIDE_DIR} ", f"-r {OUTSIDE_DIR}/{LOCK_FILE} ") if outside else ("", "")
            lock = (
                f"--no-index --find-links {WHEELHOUSE_DIR} {more[0]}--require-hashes {more[1]}"
                f"-r {WHEELHOUSE_DIR}/{LOCK_FILE}"
            )
            assert f"pip install --no-cache-dir -q {lock}" in script
        # the ones with a Pod Identity: the Ray head's own, the workers' and other serving pods'
        assert spec["serviceAccountName"] in ("llmctl-serving", "llmctl-ray-head")


@pytest.mark.parametrize("name", CATALOG)
def test_every_pod_on_an_existing_cluster_mounts_and_installs_the_configmap_wheel(name: str) -> None:
    config = on_existing_cluster(config_for(name))
    delivery = planned_delivery(config)
    assert delivery.mode == "configmap" and delivery.wheel_path is None
    manifests = build_manifests(config, hf_token=None)
    [app] = [
        m for m in manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"].startswith("llmctl-app-")
    ]
    assert app["metadata"]["namespace"] == config.ns and app["immutable"] is True
    assert list(app["binaryData"]) == ["part-1"]  # a plan: one part (the wheel is not built yet)
    assert "data" not in app  # the wheel alone: the pods take the runtime's lock out of it
    specs = serving_specs(manifests)
    assert specs, name
    joined = f"{ASSEMBLED_DIR}/{wheel_file()}"
    for spec in specs:
        assert not [c for c in spec.get("initContainers", []) if c["name"] == FETCH_CONTAINER]
        assert parts_volume(APP_VOLUME, [app["metadata"]["name"]]) in spec["volumes"]
        for container in spec["containers"]:
            if container["name"] == "autoscaler":
                continue
            assert {"name": APP_VOLUME, "mountPath": APP_DIR, "readOnly": True} in container["volumeMounts"]
            script = " ".join([*container.get("command", []), *container.get("args", [])])
            assert user_site_step() in script  # on volumes: a read-only root
            # the wheel joined from the mounted parts on the container's /tmp, then installed
            assert f"{joined} {APP_DIR}/part-1" in script
            assert f"pip install --no-cache-dir -q --no-index --no-deps {joined}" in script
            # the lock taken out of the joined wheel, hash-checked, from the index: a wheelhouse does not fit
            member = f"llmctl/serving/locks/{runtime_lock(config, delivery.image).name}.txt"
            assert f"{joined} {member} {CONFIGMAP_LOCK}" in script
            assert f"pip install --no-cache-dir -q --require-hashes -r {CONFIGMAP_LOCK}" in script


@pytest.mark.parametrize("target", ["eks", "kubeconfig"])
@pytest.mark.parametrize("name", CATALOG)
def test_no_pip_install_of_the_app_by_an_index_name_in_any_rendered_manifest(name: str, target: str) -> None:
    config = config_for(name)
    if target == "kubeconfig":
        config = on_existing_cluster(config)
    registry = config.model_copy(
        update={"platform": config.platform.model_copy(update={"ecr_registry": "1.dkr.ecr.example"})}
    )
    manifests = build_manifests(registry, hf_token=None)
    rendered = list(yaml.safe_load_all(render_yaml(manifests, None).text))  # what `llmctl render` writes
    installs = pip_installs(rendered)
    assert installs, "the base image gets the app installed at start"
    for args in installs:
        for requirement in installed_from_an_index(args):
            if requirement.startswith("/"):  # the fetched wheel, or the one joined from the ConfigMaps
                folder = APP_DIR if target == "eks" else ASSEMBLED_DIR
                assert requirement == f"{folder}/{wheel_file()}" and "--no-deps" in args
                continue
            project = re.split(r"[\[=<>!~ ]", requirement, maxsplit=1)[0].lower()
            assert project not in APP_NAMES, f"{name}: pip install {requirement}"
            assert PINNED.match(requirement), f"{name}: unpinned pip install {requirement}"
    # a registry alone is no image: nothing references ECR unless `up`'s DescribeImages found it
    images = [
        c["image"]
        for spec in pod_specs(manifests)
        for c in spec["containers"] + spec.get("initContainers", [])
    ]
    assert not [image for image in images if "dkr.ecr" in image]


@pytest.mark.parametrize("target", ["eks", "kubeconfig"])
@pytest.mark.parametrize("runtime", runtime_names())
def test_every_runtime_installs_its_dockerfile_requirements_before_the_wheel(
    runtime: str, target: str
) -> None:
    name = next(n for n in CATALOG if blueprint(n).runtime == runtime)
    config = config_for(name) if target == "eks" else on_existing_cluster(config_for(name))
    installs = pip_installs(build_manifests(config, hf_token=None))
    folder = APP_DIR if target == "eks" else ASSEMBLED_DIR
    app = [i for i, args in enumerate(installs) if f"{folder}/{wheel_file()}" in args]
    assert app and all(i > 0 and "--no-deps" in installs[i] for i in app)
    lock = installs[app[0] - 1]
    assert "--require-hashes" in lock and lock[-2:][0] == "-r"  # the runtime's lock, as its image has
    assert lock[-1] == (f"{WHEELHOUSE_DIR}/{LOCK_FILE}" if target == "eks" else CONFIGMAP_LOCK)


#: commands other than `pip install` that would fetch packages from an index
OTHER_FETCHES = ("pip download", "pip wheel", "uv pip", "uv add", "easy_install", "pipx ", "conda install")


@pytest.mark.parametrize("found_image", [False, True], ids=["wheel", "image"])
@pytest.mark.parametrize("name", CATALOG)
def test_no_container_of_any_pod_on_eks_reaches_a_package_index(name: str, found_image: bool) -> None:
    """Every container (init containers too) of every pod of the rendered manifests, as `llmctl
    render` writes them, with the serving code as a wheel or as an image `up` found: every install is
    --no-index, and nothing else fetches packages. ray-cpu's CPU torch (outside its lock, served only by
    PyTorch's CPU index) too: the first `up` puts it in the cache bucket (outside_wheels.py)."""
    config = config_for(name)
    if found_image:
        image = "1.dkr.ecr.example/llmctl/dev/x@sha256:" + "ab" * 32
        config = config.model_copy(update={"delivery": Delivery(mode="image", image=image, reason="found")})
    rendered = list(yaml.safe_load_all(render_yaml(build_manifests(config, hf_token=None), None).text))
    containers = [
        container
        for spec in pod_specs(rendered)
        for container in [*spec.get("initContainers", []), *spec["containers"]]
    ]
    assert containers, name
    for container in containers:
        where = f"{name}: container {container['name']}"
        text = " ".join(strings([container.get("command", []), container.get("args", [])]))
        assert not [fetch for fetch in OTHER_FETCHES if fetch in text], f"{where}: {text}"
        for args in pip_installs([container]):
            assert "--no-index" in args, f"{where}: pip install {' '.join(args)}"
            assert not [a for a in args if "index-url" in a or a.startswith("http")], f"{where}: {args}"


def test_an_image_found_by_up_replaces_the_wheel_everywhere() -> None:
    config = config_for("tiny-cpu")
    image = "1.dkr.ecr.example/llmctl/dev/tiny-cpu@sha256:" + "ab" * 32
    found = config.model_copy(update={"delivery": Delivery(mode="image", image=image, reason="found")})
    manifests = build_manifests(found, hf_token=None)
    specs = [spec for m in manifests for spec in pod_specs(m) if m["kind"] == "RayService"]
    assert {c["image"] for spec in specs for c in spec["containers"]} == {image}
    assert not [spec for spec in specs if spec.get("initContainers")]
    assert not [args for args in pip_installs(manifests) if "gradio" not in " ".join(args)]


def test_wheel_delivery_gives_the_pods_bucket_access_even_without_caches() -> None:
    config = config_for("tiny-cpu")
    facts = config.platform.model_copy(update={"cache_bucket": "b-cache-1"})
    bare = config.model_copy(
        update={
            "platform": facts,
            "blueprint": config.blueprint.model_copy(
                update={"caches": config.blueprint.caches.model_copy(update={"model_mirror": False})}
            ),
        }
    )
    assert planned_delivery(bare).wheel_uri == f"s3://b-cache-1/llmctl/wheels/planned/{wheel_file()}"
    registered = run_offline(lambda: build_workload(bare))
    associations = [
        r for r in registered if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    ]
    # the Ray workers' and the Ray head's: both install the delivered wheel
    assert sorted(a.inputs["serviceAccount"] for a in associations) == ["llmctl-ray-head", "llmctl-serving"]
    policies = [r for r in registered if r.type == "aws:iam/rolePolicy:RolePolicy"]
    assert len(policies) == 2
    for policy in policies:
        statements = json.loads(policy.inputs["policy"])["Statement"]
        # read-only: the delivered code (the CLI alone writes it), nothing else of the bucket
        assert {a for s in statements for a in s["Action"]} == {"s3:ListBucket", "s3:GetObject"}
        assert [s["Resource"] for s in statements if s["Action"] == ["s3:GetObject"]] == [
            ["arn:aws:s3:::b-cache-1/llmctl/wheelhouse/*", "arn:aws:s3:::b-cache-1/llmctl/wheels/*"]
        ]
    # with an image, the pods need no bucket (and get no role) when no cache is on
    found = bare.model_copy(update={"delivery": Delivery(mode="image", image="x/y@sha256:1", reason="r")})
    registered = run_offline(lambda: build_workload(found))
    assert not [r for r in registered if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]


def test_an_existing_cluster_plans_the_configmap_delivery(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text(
        yaml.safe_dump(
            {"pools": [{"name": "cpu", "labels": {"pool": "cpu"}, "instance_types": ["m5.xlarge"]}]}
        )
    )
    bp = blueprint("tiny-cpu")
    facts = PlatformFacts.for_existing_cluster(pools)
    delivery = planned_delivery(WorkloadConfig(blueprint=bp, platform=facts))
    assert delivery.mode == "configmap" and delivery.image == bp.image.base and not delivery.decided
    assert "requirement" not in Delivery.model_fields  # no app requirement for any index to resolve


def test_the_configmap_carries_the_built_wheel_and_is_named_by_its_digest(tmp_path: Path) -> None:
    config = on_existing_cluster(config_for("tiny-cpu"))
    wheel = tmp_path / wheel_file()
    wheel.write_bytes(b"PK\x03\x04 not really a zip, but bytes")
    names = []
    for digest in ("ab" * 32, "cd" * 32):  # new code: a new ConfigMap name, so the pod template changes
        decided = config.model_copy(update={"delivery": configmap_delivery(config, wheel, digest)})
        manifests = build_manifests(decided, hf_token=None)
        [app] = [
            m
            for m in manifests
            if m["kind"] == "ConfigMap" and m["metadata"]["name"].startswith(configmap_name(digest))
        ]
        assert app["metadata"]["name"] == f"llmctl-app-{digest[:12]}-1"
        assert base64.b64decode(app["binaryData"]["part-1"]) == wheel.read_bytes()
        assert app["metadata"]["annotations"]["llmctl.dev/wheel-sha256"] == digest
        spec = serving_specs(manifests)[0]
        assert parts_volume(APP_VOLUME, [app["metadata"]["name"]]) in spec["volumes"]
        names.append(app["metadata"]["name"])
    assert names[0] != names[1]


def test_the_pod_takes_the_runtimes_lock_out_of_the_wheel_as_up_built_it(tmp_path: Path) -> None:
    """The configmap mode's extraction step, run as the pod runs it, on a real wheel of this llmctl."""
    import subprocess
    import zipfile

    from llmctl.infra.workload.delivery.serving_code import lock_from_wheel_step, runtime_lock

    config = on_existing_cluster(config_for("llama2-inf2"))
    spec = runtime_lock(config, config.blueprint.image.base)
    wheel = tmp_path / wheel_file()
    with zipfile.ZipFile(wheel, "w") as built:  # what `up` builds carries the package data
        built.write(spec.path, f"llmctl/serving/locks/{spec.name}.txt")
    target = tmp_path / "lock" / "requirements.txt"
    step = lock_from_wheel_step(str(wheel), spec).replace(CONFIGMAP_LOCK, str(target))
    subprocess.run(["sh", "-c", step.replace("python3 ", f"{sys.executable} ", 1)], check=True)
    assert target.read_bytes() == spec.path.read_bytes()


def test_up_on_an_existing_cluster_builds_and_keeps_the_real_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.infra.workload.prepare.delivery import content_digest, decide

    monkeypatch.setenv("LLMCTL_STATE_DIR", str(tmp_path / "state"))
    # ray-cpu's CPU torch is pinned at this first `up` (PyTorch's index is out of reach here: the real
    # download is tests/lifecycle/test_outside_wheels_existing_cluster.py's)
    torch = {"torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl": "ab" * 32}
    monkeypatch.setattr("llmctl.infra.workload.delivery.outside_wheels.download", lambda *_a, **_k: torch)
    delivery = decide(on_existing_cluster(config_for("tiny-cpu")))
    assert delivery.mode == "configmap" and delivery.decided and delivery.wheel_path
    assert f"torch==2.13.0+cpu \\\n    --hash=sha256:{'ab' * 32}" in str(delivery.outside_requirements)
    wheel = Path(delivery.wheel_path)
    assert wheel.name == wheel_file() and part_count(wheel.stat().st_size) <= MAX_PARTS
    assert delivery.wheel_digest == content_digest(wheel)
    assert delivery.wheel_sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()  # what the pods check
    assert wheel.parent == tmp_path / "state" / "wheels" / content_digest(wheel)


@pytest.mark.parametrize("target", ["eks", "kubeconfig"])
def test_with_recorded_digests_every_rendered_pod_names_its_image_by_digest(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """versions.yaml `digest:` (what `llmctl doctor` prints for a tag it checked) pins every container
    and init container of every catalog blueprint to `image@sha256:...`; none is recorded today."""
    from llmctl.blueprints import versions as versions_module

    real = versions_module.versions()
    assert not [key for key, image in real.images.items() if image.digest]  # no digest invented
    recorded = {
        key: image.model_copy(update={"digest": "sha256:" + hashlib.sha256(key.encode()).hexdigest()})
        for key, image in real.images.items()
    }
    monkeypatch.setattr(versions_module, "versions", lambda: real.model_copy(update={"images": recorded}))
    for name in CATALOG:
        config = config_for(name) if target == "eks" else on_existing_cluster(config_for(name))
        for spec in pod_specs(build_manifests(config, hf_token=None)):
            for container in [*spec["containers"], *spec.get("initContainers", [])]:
                image = container["image"]
                pinned = next(i for i in recorded.values() if image.split("@")[0] == i.image)
                assert image == f"{pinned.image}@{pinned.digest}", f"{name}: {image}"


@pytest.mark.parametrize("name", [n for n in CATALOG if blueprint(n).caches.model_mirror])
def test_the_mirror_job_installs_only_its_hash_pinned_lock_from_the_cache_bucket(name: str) -> None:
    """The Job that holds the HF token and writes the mirror installs nothing unpinned: only the
    model-mirror lock, from the wheelhouse `up` uploaded, after checking the lock's sha256 against the
    value in its own spec, with `--no-index --require-hashes`; its script installs nothing itself."""
    config = config_for(name)
    rendered = list(yaml.safe_load_all(render_yaml(build_manifests(config, hf_token=None), None).text))
    [job] = [d for d in rendered if d["kind"] == "Job" and d["metadata"]["name"] == MIRROR_JOB]
    [script] = [d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == MIRROR_SCRIPT]
    assert "pip" not in script["data"]["mirror.py"]  # it used to pip-install huggingface_hub and boto3
    spec = job["spec"]["template"]["spec"]
    [container] = spec["containers"]
    lock = f"{MIRROR_PACKAGES_DIR}/{LOCK_FILE}"
    assert pip_installs([container]) == [
        [
            "--no-cache-dir",
            "-q",
            "--no-index",
            "--find-links",
            MIRROR_PACKAGES_DIR,
            "--require-hashes",
            "-r",
            lock,
        ]
    ]
    command = container["command"][2]
    checked = f"{lock} {lock_digest(mirror_lock())}"  # the lock's sha256, from the spec, before pip runs
    assert checked in command and command.index(checked) < command.index("pip install")
    assert command.endswith("&& exec python3 /opt/llmctl/mirror/mirror.py")
    # the wheelhouse from the cache bucket, by the Job's own service account (which may only read it)
    [fetch] = spec["initContainers"]
    house = f"s3://{config.platform.cache_bucket}/{wheelhouse_key(mirror_lock())}/"
    assert shlex.split(fetch["command"][2]) == [
        "aws",
        "s3",
        "cp",
        "--only-show-errors",
        "--recursive",
        house,
        f"{MIRROR_PACKAGES_DIR}/",
    ]
    assert spec["serviceAccountName"] == MIRROR_SERVICE_ACCOUNT
    assert spec["securityContext"]["runAsNonRoot"] is True  # into a venv: it needs no root
    # every package the lock installs is pinned, with its hashes, for the Job's image
    pinned = parse_lock(mirror_lock().path.read_text())
    assert {"huggingface-hub", "boto3"} <= set(pinned) and all(hashes for _, hashes in pinned.values())
    assert container["image"].split("@")[0] == versions().images[locks().locks["model-mirror"].image].image
