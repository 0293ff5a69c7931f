"""The image pin checks against a real registry server: the CNCF distribution registry (Debian's
`docker-registry` package, /usr/bin/docker-registry) started on 127.0.0.1 for this module, with test
images pushed over its HTTP API (blobs, manifests, an image index), as `docker push` or `oras` would.

Cases: the tag present for linux/amd64 (index and single manifest), the tag missing, the wrong
platform, the digest moved, no digest recorded, and an unreachable registry (never a pass).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from registry_support import _free_port, _index, _manifest, registry

from llmctl.infra.aws.image_checks import check_image, image_pins, parse_image, resolve

__all__ = ["registry"]  # the module's registry server (a fixture of registry_support.py)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5) as c:
        yield c


def test_image_references_split_as_docker_resolves_them() -> None:
    assert (
        parse_image("rayproject/ray:2.58.0-py312-cpu").text
        == "registry-1.docker.io/rayproject/ray:2.58.0-py312-cpu"
    )
    assert parse_image("python:3.11-slim").text == "registry-1.docker.io/library/python:3.11-slim"
    ref = parse_image(
        "public.ecr.aws/neuron/pytorch-inference-neuronx:2.7.0-neuronx-py310-sdk2.25.0-ubuntu22.04"
    )
    assert (ref.host, ref.repository) == ("public.ecr.aws", "neuron/pytorch-inference-neuronx")
    assert parse_image("127.0.0.1:5000/a/b:1").host == "127.0.0.1:5000"


def test_a_multi_platform_tag_is_found_with_the_index_digest(registry: str, client: httpx.Client) -> None:
    digest = _index(registry, "neuron/serving", "1.0", ["amd64", "arm64"])
    found = resolve(client, f"{registry}/neuron/serving:1.0")
    assert found.digest == digest and ("linux", "amd64") in found.platforms
    check = check_image(client, "serving", f"{registry}/neuron/serving:1.0", digest)
    assert check.ok is True and check.detail == f"linux/amd64, digest {digest} as recorded"


def test_a_single_manifest_is_read_through_its_config(registry: str, client: httpx.Client) -> None:
    digest, _ = _manifest(registry, "aws-cli/aws-cli", "amd64", b"cli", tag="2.36.15")
    check = check_image(client, "aws_cli", f"{registry}/aws-cli/aws-cli:2.36.15", digest)
    assert check.ok is True


def test_a_missing_tag_is_named_in_one_line_with_the_registry_answer(
    registry: str, client: httpx.Client
) -> None:
    _index(registry, "neuron/serving", "1.0", ["amd64"])
    check = check_image(client, "serving", f"{registry}/neuron/serving:9.9", None)
    assert check.ok is False
    assert check.detail == f"{registry} answers MANIFEST_UNKNOWN: manifest unknown for neuron/serving:9.9"
    assert check.fix == "pin a published tag in images.serving of blueprints/data/versions.yaml"
    unknown_repo = check_image(client, "serving", f"{registry}/nobody/here:1", None)  # distribution 2.8
    assert unknown_repo.ok is False and unknown_repo.detail.endswith(
        "MANIFEST_UNKNOWN: manifest unknown for nobody/here:1"
    )


def test_a_tag_without_linux_amd64_fails(registry: str, client: httpx.Client) -> None:
    _index(registry, "arm/only", "1", ["arm64"])
    check = check_image(client, "serving", f"{registry}/arm/only:1", None)
    assert check.ok is False and check.detail.endswith("has no linux/amd64 image (it serves linux/arm64)")
    _manifest(registry, "arm/single", "arm64", b"arm", tag="1")
    single = check_image(client, "serving", f"{registry}/arm/single:1", None)
    assert single.ok is False and "(it serves linux/arm64)" in single.detail


def test_a_moved_tag_is_caught_by_its_digest(registry: str, client: httpx.Client) -> None:
    recorded = _index(registry, "moving/image", "2.0", ["amd64"])
    assert check_image(client, "serving", f"{registry}/moving/image:2.0", recorded).ok is True
    moved = _index(registry, "moving/image", "2.0", ["amd64", "arm64"])  # the same tag pushed again
    check = check_image(client, "serving", f"{registry}/moving/image:2.0", recorded)
    assert moved != recorded and check.ok is False
    assert check.detail == f"the tag moved: versions.yaml records {recorded}, the registry now says {moved}"


def test_no_recorded_digest_and_an_unreachable_registry_are_never_a_pass(
    registry: str, client: httpx.Client
) -> None:
    digest = _index(registry, "neuron/serving", "1.0", ["amd64"])
    unrecorded = check_image(client, "serving", f"{registry}/neuron/serving:1.0", None)
    assert (
        unrecorded.ok is None
        and unrecorded.fix == f"record digest: {digest} under images.serving in blueprints/data/versions.yaml"
    )
    closed = f"127.0.0.1:{_free_port()}"
    down = check_image(client, "serving", f"{closed}/neuron/serving:1.0", digest)
    assert down.ok is None and down.detail.startswith(f"could not check: cannot read {closed}")


def test_a_blueprint_checks_its_base_image_the_init_image_and_its_ui() -> None:
    from llmctl.blueprints.catalog import load_blueprint

    keys = [key for key, _, _ in image_pins(load_blueprint("llama3-vllm-inf2"))]
    assert keys == ["neuron_vllm_inf2", "aws_cli", "open_webui"]
    keys = [key for key, _, _ in image_pins(load_blueprint("llama2-inf2"))]  # and the mirror Job's
    assert keys == ["neuron_transformers_neuronx", "aws_cli", "python_slim"]  # the UI's and the Job's, once


@pytest.fixture
def local_images(registry: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """tiny-cpu's pinned images (ray_cpu, aws_cli) pushed to the local registry under their own
    repository and tag, with their digests recorded, and versions.yaml pointing there."""
    from llmctl.blueprints import versions as versions_module

    real = versions_module.versions()
    moved = dict(real.images)
    digests = {}
    for key in ("ray_cpu", "aws_cli"):
        ref = parse_image(real.images[key].image)
        digests[key] = _index(registry, ref.repository, ref.tag, ["amd64"])
        image = f"{registry}/{ref.repository}:{ref.tag}"
        moved[key] = real.images[key].model_copy(update={"image": image, "digest": digests[key]})
    monkeypatch.setattr(versions_module, "versions", lambda: real.model_copy(update={"images": moved}))
    return digests


def test_doctor_passes_recorded_images_and_up_refuses_a_moved_tag(
    aws: str, registry: str, local_images: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmctl.blueprints import versions as versions_module
    from llmctl.blueprints.catalog import load_blueprint
    from llmctl.errors import PrerequisiteError
    from llmctl.infra.aws.preflight import preflight_pins
    from llmctl.infra.targets.doctor import run_doctor

    base = versions_module.versions().images["ray_cpu"].image
    bp = load_blueprint("tiny-cpu")
    monkeypatch.setattr(
        "llmctl.blueprints.catalog.load_blueprint",
        lambda ref: bp.model_copy(update={"image": bp.image.model_copy(update={"base": base})}),
    )
    report = run_doctor("tiny-cpu", region=aws)
    images = {c.name: c for c in report.checks if c.name.startswith("image ")}
    assert {n: c.ok for n, c in images.items()} == {
        f"image {base}": True,
        f"image {registry}/aws-cli/aws-cli:2.36.15": True,
    }
    ref = parse_image(base)
    moved = _index(registry, ref.repository, ref.tag, ["amd64", "arm64"])
    with pytest.raises(PrerequisiteError) as refused:
        preflight_pins("tiny-cpu", stack="dev", region=aws)
    assert (
        f"the tag moved: versions.yaml records {local_images['ray_cpu']}, the registry now says {moved}"
        in (refused.value.message)
    )
