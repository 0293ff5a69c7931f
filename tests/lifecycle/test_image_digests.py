"""Image digests pinned per workload stack at its first `up` (infra/workload/prepare/digests.py), against a real
registry server (registry_support.py: Debian's distribution registry on 127.0.0.1).

The images keep their real names (`rayproject/ray:2.58.0-py312-cpu`, `nvcr.io/nvidia/tritonserver:...`):
the registry client's requests for any registry host are sent to the local server (an httpx transport
that rewrites the URL's scheme, host and port, the network boundary), which holds an image under each
real repository and tag. Every registry answer (the index, its Docker-Content-Digest) is the server's own.

Cases: every catalog blueprint's pods name their images by digest after a first pin; a moved tag is
detected (`doctor`), refused by the next pin or `up` (nothing recorded changes, the flag is named) and
accepted with `--accept-moved-tags`; `render` uses the recorded digest and says when there is none; an
`up --target kubeconfig` through the stand-in engine applies pods whose images are named by digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from registry_support import _free_port, _index, registry
from standin_support import StandinEngine, kube_objects
from typer.testing import CliRunner

from llmctl.blueprints.catalog import catalog_names, load_blueprint
from llmctl.blueprints.versions import versions
from llmctl.cli.app import app
from llmctl.errors import PrerequisiteError
from llmctl.infra.aws.image_checks import check_stack_pins, parse_image
from llmctl.infra.lifecycle.order_invariants import check_images, produced_images
from llmctl.infra.targets.doctor import run_doctor
from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.pins.image_pins import tagged_images
from llmctl.infra.workload.prepare.digests import pin_images, stack_flags
from llmctl.infra.workload.scheduling.pods import pod_templates
from llmctl.state import load_pins, pins_path

__all__ = ["registry"]


class ToLocalRegistry(httpx.BaseTransport):
    """Sends every request, whatever registry host it names, to the local registry server."""

    def __init__(self, host: str) -> None:
        self.host, _, port = host.partition(":")
        self.port = int(port)
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host=self.host, port=self.port)
        request.headers["host"] = f"{self.host}:{self.port}"
        return self.inner.handle_request(request)


@pytest.fixture
def registry_route(registry: str, monkeypatch: pytest.MonkeyPatch) -> Callable[[], httpx.Client]:
    """The registry client `up`, `images pin` and `doctor` make, routed to the local registry."""

    def client() -> httpx.Client:
        return httpx.Client(transport=ToLocalRegistry(registry), trust_env=False, timeout=5)

    monkeypatch.setattr("llmctl.infra.workload.prepare.digests.registry_client", client)
    monkeypatch.setattr("llmctl.infra.aws.image_checks.registry_client", client)
    return client


def push(registry: str, image: str, arches: tuple[str, ...] = ("amd64",)) -> str:
    """An image index under the image's own repository and tag in the local registry; its digest."""
    ref = parse_image(image)
    return _index(registry, ref.repository, ref.tag, list(arches))


def eks_config(name: str, stack: str = "dev") -> WorkloadConfig:
    bp = load_blueprint(name)
    return WorkloadConfig(
        blueprint=bp, stack=stack, platform=PlatformFacts.for_blueprint(bp, stack="dev", region="us-west-2")
    )


def container_images(manifests: list[dict]) -> list[str]:
    return [
        c["image"]
        for m in manifests
        for t in pod_templates(m)
        for c in [*t.spec.get("initContainers", []), *t.spec["containers"]]
    ]


def test_every_blueprint_names_each_image_by_digest_after_a_first_pin(
    registry: str, registry_route: Callable[[], httpx.Client], state: Path
) -> None:
    configs = [eks_config(name) for name in catalog_names()]
    tagged = {c.blueprint.name: tagged_images(build_manifests(c, hf_token=None)) for c in configs}
    assert all(tagged.values())  # every blueprint names its images by tag before
    pushed = {image: push(registry, image) for image in sorted({i for t in tagged.values() for i in t})}
    assert len(pushed) >= 6  # the Ray, Neuron, Triton bases, the AWS CLI, the UIs
    for config in configs:
        name = config.blueprint.name
        report = pin_images(config)
        assert report.images and report.new == sorted(report.images) and not report.unpinned, name
        recorded = load_pins("dev", name).images
        assert recorded == {image: pushed[image] for image in report.images}, name
        with_pins = config.model_copy(update={"image_pins": recorded})
        pinned = build_manifests(with_pins, hf_token=None)
        assert check_images(pinned, produced_images(with_pins)) == [], name  # an earlier step made each
        images = container_images(pinned)
        assert images and all(
            image == f"{image.split('@')[0]}@{pushed[image.split('@')[0]]}" for image in images
        )
        assert tagged_images(pinned) == [], name


def test_a_moved_tag_is_detected_refused_and_accepted_with_the_flag(
    aws: str, registry: str, registry_route: Callable[[], httpx.Client], state: Path
) -> None:
    config = eks_config("tiny-cpu")
    images = tagged_images(build_manifests(config, hf_token=None))
    first = {image: push(registry, image) for image in images}
    assert pin_images(config).images == first
    base = config.blueprint.image.base
    assert all(c.ok is True for c in check_stack_pins("dev", "tiny-cpu"))

    moved = push(registry, base, ("amd64", "arm64"))  # the same tag pushed again: another image
    assert moved != first[base]
    [doctor] = [c for c in check_stack_pins("dev", "tiny-cpu") if c.ok is not True]
    assert doctor.ok is False and doctor.name == f"image {base} (stack dev)"
    assert doctor.detail == f"the tag moved: stack dev records {first[base]}, the registry now says {moved}"
    assert doctor.fix and "llmctl images pin -b tiny-cpu --stack dev --accept-moved-tags" in doctor.fix
    report = run_doctor("tiny-cpu", region=aws, stack="dev")  # `llmctl doctor` (moto's account)
    assert not report.ok and doctor in report.checks

    with pytest.raises(PrerequisiteError) as refused:
        pin_images(config)
    assert refused.value.message == (
        f"1 image tag(s) of stack dev now name another image: {base}: pinned {first[base]}, "
        f"the registry now says {moved}"
    )
    assert "--accept-moved-tags" in (refused.value.hint or "")
    # no `up` recorded on this machine: the hint writes the command out
    assert "`llmctl up -b tiny-cpu --stack dev --accept-moved-tags`" in (refused.value.hint or "")
    assert load_pins("dev", "tiny-cpu").images == first  # nothing recorded changed

    lines: list[str] = []
    report = pin_images(config, accept_moved=True, note=lines.append)
    assert report.moved == [(base, first[base], moved)]
    assert load_pins("dev", "tiny-cpu").images == {**first, base: moved}
    assert f"    moved {base} from {first[base]} to {moved} (--accept-moved-tags)" in lines
    assert all(c.ok is True for c in check_stack_pins("dev", "tiny-cpu"))


def test_an_unreadable_registry_keeps_the_recorded_digest_and_never_pins_a_guess(
    registry: str, registry_route: Callable[[], httpx.Client], state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = eks_config("llama2-7b-cpu")
    images = tagged_images(build_manifests(config, hf_token=None))
    digests = {image: push(registry, image) for image in images}
    assert pin_images(config).images == digests
    closed = f"127.0.0.1:{_free_port()}"  # the registry no longer answers
    monkeypatch.setattr(
        "llmctl.infra.workload.prepare.digests.registry_client",
        lambda: httpx.Client(transport=ToLocalRegistry(closed), trust_env=False, timeout=5),
    )
    kept = pin_images(config)
    assert kept.images == digests and [image for image, _ in kept.kept] == images and not kept.new
    assert all(why.startswith("cannot read ") for _, why in kept.kept)
    assert load_pins("dev", "llama2-7b-cpu").images == digests
    fresh = pin_images(eks_config("llama2-7b-cpu", stack="dev.pr-1"))  # never pinned: stays a tag
    assert fresh.images == {} and [image for image, _ in fresh.unpinned] == images
    assert load_pins("dev.pr-1", "llama2-7b-cpu").images == {}
    assert all(line.startswith("not pinned: ") for line in fresh.notes())


def test_render_uses_the_recorded_digest_and_says_when_there_is_none(
    registry: str, registry_route: Callable[[], httpx.Client], state: Path
) -> None:
    runner = CliRunner()
    before = runner.invoke(app, ["render", "-b", "tiny-cpu", "--stack", "dev"])
    assert before.exit_code == 0, before.output
    assert "note: stack dev recorded no digest for " in before.stderr
    assert "@sha256:" not in before.stdout

    digests = {
        image: push(registry, image)
        for image in tagged_images(build_manifests(eks_config("tiny-cpu"), hf_token=None))
    }
    pinned = runner.invoke(app, ["images", "pin", "-b", "tiny-cpu", "--stack", "dev", "--json"])
    assert pinned.exit_code == 0, pinned.output
    assert json.loads(pinned.stdout)["images"] == digests

    after = runner.invoke(app, ["render", "-b", "tiny-cpu", "--stack", "dev"])
    assert after.exit_code == 0 and "recorded no digest" not in after.stderr
    objects = [o for o in yaml.safe_load_all(after.stdout) if o]
    assert sorted(set(container_images(objects))) == sorted(f"{i}@{d}" for i, d in digests.items())
    report = json.loads(runner.invoke(app, ["render", "-b", "tiny-cpu", "--json"]).stdout)
    assert report["unpinned_images"] == []


def test_up_on_an_existing_cluster_applies_pods_named_by_digest(
    engine: StandinEngine, registry: str, registry_route: Callable[[], httpx.Client], tmp_path: Path
) -> None:
    from test_existing_cluster import BP, POOLS, WL, complete_cluster, lifecycle

    kubeconfig, pools = tmp_path / "k3s.yaml", tmp_path / "pools.yaml"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster: {server: 'https://127.0.0.1:6443'}\n"
    )
    pools.write_text(yaml.safe_dump(POOLS))
    complete_cluster(engine)
    base = load_blueprint(BP).image.base
    first = push(registry, base)
    push(registry, versions().images["python_slim"].image)  # its UI
    lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    objects = kube_objects(engine.resources(WL, "dev"))
    images = set(container_images(objects))
    assert f"{base}@{first}" in images and all("@sha256:" in image for image in images)

    assert engine.outputs(WL, "dev")["llmctl_pins"]["images"][base] == first  # in the backend too
    pins_path("dev", BP).unlink()  # another machine: only the backend has the stack's pins
    moved = push(registry, base, ("amd64", "arm64"))
    ops = [op for op in engine.ops() if op[0] in ("up", "preview", "destroy")]
    with pytest.raises(PrerequisiteError) as refused:
        lifecycle().up(BP, region="us-west-2", target="kubeconfig", kubeconfig=kubeconfig, pools=pools)
    assert f"the registry now says {moved}" in refused.value.message
    assert "--accept-moved-tags" in (refused.value.hint or "")
    assert [op for op in engine.ops() if op[0] in ("up", "preview", "destroy")] == ops
    assert load_pins("dev", BP).images[base] == first  # refused before any change (the flag: above)


def test_the_flag_is_refused_where_nothing_is_pinned() -> None:
    result = CliRunner().invoke(app, ["up", "-b", "tiny-cpu", "--target", "local", "--accept-moved-tags"])
    assert result.exit_code == 2
    assert "--accept-moved-tags does not apply to --target local" in result.output


def test_the_flags_of_a_stack_name_its_environment_and_workload() -> None:
    assert stack_flags("dev") == "--stack dev"
    assert stack_flags("ci.pr-42") == "--stack ci --workload pr-42"


def test_a_client_given_is_left_open_and_one_made_is_closed(
    registry: str, registry_route: Callable[[], httpx.Client], state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = eks_config("tiny-cpu")
    for image in tagged_images(build_manifests(config, hf_token=None)):
        push(registry, image)
    given = registry_route()
    pin_images(config, client=given)
    assert not given.is_closed  # the caller's, to close
    made: list[httpx.Client] = []
    monkeypatch.setattr(
        "llmctl.infra.workload.prepare.digests.registry_client",
        lambda: made.append(registry_route()) or made[-1],
    )
    pin_images(config)
    assert [client.is_closed for client in made] == [True]
