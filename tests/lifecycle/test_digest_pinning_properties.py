"""Properties of digest pinning (`infra/workload/pins/image_pins.py`, `infra/workload/prepare/digests.py`) and of the
image references they read (`blueprints/image_refs.py`), for any input.

The rules, from the modules' docstrings:

- a reference follows the OCI distribution grammar and docker's normalization (distribution/reference,
  regexp.go and normalize.go at the commits image_refs.py names): any reference the grammar makes
  parses into the parts it was made of, Docker Hub's short names gain `docker.io` and `library/`,
  and its canonical text parses back to the same reference; anything else is refused in one line that
  names the image, by the parser, by a blueprint and by the registry lookup (never a traceback);
- an image the stack recorded is rendered `image@<recorded digest>` in every container, init
  containers too, and that is a valid reference whose digest is the recorded one; images the record
  does not hold, and images already named by digest, are left as they are; pinning twice is pinning
  once, and what stays a tag is exactly what the record lacks;
- each image tag is compared with the record: a new tag is pinned, a tag that names another digest
  now is moved (for any pair of digests, never accepted silently), an unreadable registry keeps the
  recorded digest and never pins a guess; `pin_images` refuses a moved tag unless accepted, and then
  nothing recorded changes; accepted, it records the new digest; and one blueprint's pins never
  change another's (against the real registry server of registry_support.py).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from registry_support import OCI_INDEX, registry
from test_image_digests import eks_config, push, registry_route

from llmctl.blueprints.catalog import catalog_names
from llmctl.blueprints.image_refs import DOCKER_HUB_DOMAIN, parse_reference
from llmctl.blueprints.schema import ImageSpec
from llmctl.errors import PrerequisiteError
from llmctl.infra.aws.image_checks import DOCKER_HUB, lookup, parse_image
from llmctl.infra.workload.manifests import build_manifests
from llmctl.infra.workload.pins.image_pins import pin_manifests, tagged_images
from llmctl.infra.workload.prepare.digests import compare, pin_images
from llmctl.infra.workload.scheduling.pods import pod_templates
from llmctl.state import load_pins, pins_path

__all__ = ["registry", "registry_route"]  # fixtures of registry_support.py and test_image_digests.py

# --- references, made by the grammar --------------------------------------------------------------
LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
alnum_st = st.text(alphabet=LOWER, min_size=1, max_size=5)
component_st = st.builds(
    lambda first, rest: first + "".join(sep + part for sep, part in rest),
    alnum_st,
    st.lists(st.tuples(st.sampled_from((".", "_", "__", "-", "--")), alnum_st), max_size=2),
)
path_st = st.lists(component_st, min_size=1, max_size=3).map("/".join)
label_st = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,6}[a-zA-Z0-9])?", fullmatch=True)
port_st = st.integers(1, 65535).map(lambda p: f":{p}")
#: a registry domain as distribution tells it from a namespace: a dot, a port, localhost, upper case
domain_st = st.one_of(
    st.builds(lambda a, b, port: f"{a}.{b}{port}", label_st, label_st, st.one_of(st.just(""), port_st)),
    st.builds(lambda a, port: a + port, label_st, port_st),
    st.sampled_from(("localhost", "localhost:5000", "[::1]:5000", "127.0.0.1:5000", "public.ecr.aws")),
    st.builds(lambda a: "R" + a, label_st),
)
tag_st = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", fullmatch=True)
hex_st = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
digest_st = hex_st.map(lambda h: f"sha256:{h}")
# (the text, the domain written or None, the path as written, tag, digest)
written_st = st.builds(
    lambda domain, path, tag, digest: (
        (f"{domain}/" if domain else "")
        + path
        + (f":{tag}" if tag else "")
        + (f"@{digest}" if digest else ""),
        domain,
        path,
        tag,
        digest,
    ),
    st.one_of(st.none(), domain_st, st.sampled_from(("docker.io", "index.docker.io"))),
    path_st,
    st.one_of(st.none(), tag_st),
    st.one_of(st.none(), digest_st),
)


@example(("docker.io/ubuntu:22.04", "docker.io", "ubuntu", "22.04", None))  # was repository `ubuntu`
@example(("index.docker.io/rayproject/ray:2.58", "index.docker.io", "rayproject/ray", "2.58", None))
@example(("Registry/app:1", "Registry", "app", "1", None))  # was Docker Hub's `registry/app`
@given(written_st)
def test_a_reference_parses_into_its_parts_as_docker_normalizes_it_and_round_trips(
    written: tuple[str, str | None, str, str | None, str | None],
) -> None:
    text, domain, path, tag, digest = written
    hub = domain in (None, "docker.io", "index.docker.io")
    ref = parse_reference(text)
    assert ref.domain == (DOCKER_HUB_DOMAIN if hub else domain)
    assert ref.path == (f"library/{path}" if hub and "/" not in path else path)
    assert (ref.tag, ref.digest) == (tag, digest)
    assert parse_reference(ref.text) == ref  # the canonical text round-trips
    image = parse_image(text)  # what the registry client asks for
    assert image.host == (DOCKER_HUB if hub else domain) and image.repository == ref.path
    assert image.tag == (digest or tag or "latest")


# --- references, made invalid -----------------------------------------------------------------------
def _spoil(kind: str, domain: str | None, path: str, tag: str | None) -> str:
    """A reference made invalid in one way (`kind`) from valid parts."""
    name = (f"{domain}/" if domain else "") + {
        "upper": path.upper(),
        "space": f"{path} x",
        "empty": f"{path}//x",
    }.get(kind, path)
    suffix = {
        "tag": ":.bad",
        "long-tag": ":" + "t" * 129,
        "short-digest": "@sha256:" + "a" * 63,
        "upper-digest": "@sha256:" + "A" * 64,
        "algorithm": "@md5:" + "a" * 32,
    }.get(kind, f":{tag}" if tag else "")
    return {"identifier": "a" * 64, "empty-name": ""}.get(kind, name + suffix)


spoil_st = st.sampled_from(
    ("upper", "space", "empty", "tag", "long-tag", "short-digest", "upper-digest", "algorithm", "identifier")
)


@example(None, "rayproject/ray", "2.58.0", "upper")  # `RAYPROJECT/RAY:2.58.0` passed the blueprint schema
@example(None, "rayproject/ray", "2.58.0", "space")  # so did `rayproject/ray x:2.58.0`
@example("public.ecr.aws", "neuron/x", "1", "upper-digest")  # and any text after `@sha256:`
@given(
    st.one_of(st.none(), domain_st),
    path_st.filter(lambda p: any(c.isalpha() for c in p)),
    st.one_of(st.none(), tag_st),
    st.one_of(spoil_st, st.just("empty-name")),
)
def test_an_invalid_reference_is_refused_in_one_line_naming_it_everywhere(
    domain: str | None, path: str, tag: str | None, kind: str
) -> None:
    bad = _spoil(kind, domain, path, tag)
    with pytest.raises(ValueError) as refused:
        parse_reference(bad)
    message = str(refused.value)
    assert repr(bad) in message and "\n" not in message
    with pytest.raises(ValidationError, match=re.escape(repr(bad))):
        ImageSpec(base=bad)  # a blueprint's image is refused when it is loaded
    found, why = lookup(httpx.Client(transport=httpx.MockTransport(_never)), bad)
    assert found is None and why == message  # the registry is never asked, and no traceback


def _never(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"an invalid reference reached the registry: {request.url}")


# --- rendering the record into the manifests ---------------------------------------------------------
NAMES = catalog_names()


@functools.cache
def _manifests(name: str) -> list[dict[str, Any]]:
    return build_manifests(eks_config(name).model_copy(update={"image_pins": {}}), hf_token=None)


def _images(manifests: list[dict[str, Any]]) -> list[str]:
    return [
        str(c["image"])
        for m in manifests
        for t in pod_templates(m)
        for c in [*t.spec.get("initContainers", []), *t.spec.get("containers", [])]
    ]


record_st = st.builds(
    lambda name, keep, digests, others: (name, keep, digests, others),
    st.sampled_from(NAMES),
    st.lists(st.booleans(), min_size=8, max_size=8),
    st.lists(digest_st, min_size=8, max_size=8),
    st.dictionaries(st.sampled_from(("other/image:1", "python:3.12")), digest_st, max_size=2),
)


@given(record_st)
def test_every_recorded_image_renders_by_its_digest_and_nothing_else_changes(
    drawn: tuple[str, list[bool], list[str], dict[str, str]],
) -> None:
    name, keep, digests, others = drawn
    manifests = copy.deepcopy(_manifests(name))
    tagged = tagged_images(manifests)
    assert tagged and all("@" not in image for image in tagged)
    record = {image: digests[i] for i, image in enumerate(tagged) if keep[i % len(keep)]} | others
    before = _images(manifests)
    pinned = pin_manifests(manifests, record)
    after = _images(pinned)
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        if old in record:
            assert new == f"{old}@{record[old]}"
            ref = parse_reference(new)  # a valid reference, by the recorded digest
            assert ref.digest == record[old] and parse_reference(old).path == ref.path
        else:
            assert new == old
    assert tagged_images(pinned) == sorted(set(tagged) - set(record))
    assert _images(pin_manifests(pinned, record)) == after  # pinning twice is pinning once


# --- comparing the registry's answers with the record -------------------------------------------------
IMAGES = ("rayproject/ray:2.58.0-py312-cpu", "public.ecr.aws/aws-cli/aws-cli:2.36.15", "python:3.11-slim")
answer_st = st.one_of(digest_st, st.just(None))  # None: the registry could not be read


@example(
    ["python:3.11-slim"],
    {"python:3.11-slim": "sha256:" + "a" * 64},
    {"python:3.11-slim": "sha256:" + "b" * 64},
)
@given(
    st.lists(st.sampled_from(IMAGES), unique=True),
    st.dictionaries(st.sampled_from(IMAGES), digest_st),
    st.dictionaries(st.sampled_from(IMAGES), answer_st),
)
def test_each_tag_is_new_moved_kept_or_unpinned_and_a_moved_tag_is_never_silently_accepted(
    wanted: list[str], recorded: dict[str, str], answers: dict[str, str | None]
) -> None:
    asked: list[str] = []

    def answer(image: str) -> tuple[str | None, str]:
        asked.append(image)
        now = answers.get(image)
        return (now, "") if now else (None, f"cannot read {image}")

    report = compare("dev", "bp", wanted, recorded, answer)
    assert asked == wanted
    for image in wanted:
        now, old = answers.get(image), recorded.get(image)
        places = [
            image in report.new,
            any(i == image for i, _, _ in report.moved),
            any(i == image for i, _ in report.kept),
            any(i == image for i, _ in report.unpinned),
        ]
        assert sum(places) <= 1  # in at most one list; in none: the registry agrees with the record
        if now:
            assert report.images[image] == now  # what the registry says now
            assert places[0] == (old is None)
            assert places[1] == (old is not None and old != now)  # any moved pair is reported
            if places[1]:
                assert (image, old, now) in report.moved
        elif old:
            assert report.images[image] == old and places[2]  # kept as recorded
            assert (image, f"cannot read {image}") in report.kept
        else:
            assert image not in report.images and places[3]  # never a guess
    assert set(report.images) <= set(wanted)
    assert report.to_dict()["images"] == dict(sorted(report.images.items()))


# --- pin_images against the real registry: refusal, acceptance, and other blueprints ----------------
ARCHES = (("amd64",), ("amd64", "arm64"))  # two images per tag: any tag moves or stays
BLUEPRINTS = ("tiny-cpu", "llama2-7b-cpu")


_PUSHED: dict[tuple[str, str, tuple[str, ...]], str] = {}  # (server, image, arches) -> its index digest
_TAGGED: dict[tuple[str, str], str] = {}  # (server, image) -> the digest its tag names now
_CLIENT = httpx.Client(timeout=5)


def tag(registry: str, image: str, arches: tuple[str, ...]) -> str:
    """Point the image's tag at its index for `arches` (pushed once per server, then only re-tagged:
    the registry's own manifest PUT, as `docker push` of an image it already holds); its digest."""
    key = (registry, image, arches)
    if key not in _PUSHED:
        _PUSHED[key] = _TAGGED[registry, image] = push(registry, image, arches)
    elif _TAGGED.get((registry, image)) != _PUSHED[key]:
        ref = parse_image(image)
        url = f"http://{registry}/v2/{ref.repository}/manifests/"
        index = _CLIENT.get(url + _PUSHED[key], headers={"Accept": OCI_INDEX})
        put = _CLIENT.put(url + ref.tag, content=index.content, headers={"Content-Type": OCI_INDEX})
        assert index.status_code == 200 and put.status_code == 201, put.text
        _TAGGED[registry, image] = put.headers["docker-content-digest"]
    return _TAGGED[registry, image]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=10)
@given(st.data())
def test_a_moved_tag_is_refused_with_nothing_changed_accepted_when_asked_and_other_blueprints_untouched(
    registry: str, registry_route: Callable[[], httpx.Client], data: st.DataObject
) -> None:
    configs = {name: eks_config(name) for name in BLUEPRINTS}
    wanted = {name: tagged_images(_manifests(name)) for name in BLUEPRINTS}
    images = sorted({image for tags in wanted.values() for image in tags})
    for name in BLUEPRINTS:
        pins_path("dev", name).unlink(missing_ok=True)
    first = {image: data.draw(st.sampled_from(ARCHES), label=f"first {image}") for image in images}
    pushed = {image: tag(registry, image, first[image]) for image in images}
    for name in BLUEPRINTS:
        assert pin_images(configs[name]).images == {image: pushed[image] for image in wanted[name]}
    later = {image: data.draw(st.sampled_from(ARCHES), label=f"later {image}") for image in images}
    now = {image: tag(registry, image, later[image]) for image in images}
    mover, other = data.draw(st.permutations(BLUEPRINTS), label="pinned again, left alone")
    records = {name: load_pins("dev", name).images for name in BLUEPRINTS}
    moved = [image for image in wanted[mover] if now[image] != pushed[image]]
    assert moved == [image for image in wanted[mover] if later[image] != first[image]]
    if moved:
        with pytest.raises(PrerequisiteError) as refused:
            pin_images(configs[mover])
        assert all(
            f"{image}: pinned {pushed[image]}, the registry now says {now[image]}" in refused.value.message
            for image in moved
        )
        assert {name: load_pins("dev", name).images for name in BLUEPRINTS} == records  # nothing changed
    report = pin_images(configs[mover], accept_moved=True)
    assert [image for image, _, _ in report.moved] == moved
    assert load_pins("dev", mover).images == {image: now[image] for image in wanted[mover]}
    assert load_pins("dev", other).images == records[other]  # another blueprint's pins never change
