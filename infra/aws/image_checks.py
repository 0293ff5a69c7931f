"""Does each pinned image tag exist for linux/amd64 in its registry, and what is its digest?

The OCI distribution API (distribution-spec, "Pulling manifests"): ``GET /v2/<name>/manifests/<tag>``
with the manifest media types in ``Accept``; the registry answers the manifest and its digest
(``Docker-Content-Digest``, else the sha256 of the body). An image index (or Docker manifest list)
names one manifest per platform; a single manifest's platform is in its config blob
(``GET /v2/<name>/blobs/<digest>``: ``os``, ``architecture``). A registry that asks for a token gets
the anonymous pull token (``registry_http.bearer_token``); Amazon ECR private registries (the AWS DLC
accounts, ``<account>.dkr.ecr.<region>.amazonaws.com``) get the Basic credentials of ECR
``GetAuthorizationToken``.

The digest to deploy is the one the tag names (the index's, for a multi-platform image): the kubelet
pulls ``image@sha256:<that>`` and picks its platform, so a moved tag cannot change what runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from llmctl.blueprints.image_refs import DOCKER_HUB_DOMAIN, parse_reference
from llmctl.infra.aws.checks import Check
from llmctl.infra.aws.registry_http import RegistryError, base_url, bearer_token, registry_client

PLATFORM = ("linux", "amd64")
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
ACCEPT = ", ".join((*INDEX_TYPES, *MANIFEST_TYPES))
DOCKER_HUB = "registry-1.docker.io"
#: the flag of `llmctl up` and `llmctl images pin` that moves a workload stack onto a moved tag's image
ACCEPT_FLAG = "--accept-moved-tags"


@dataclass(frozen=True)
class ImageRef:
    """An image reference split as the distribution API needs it."""

    host: str
    repository: str
    tag: str

    @property
    def text(self) -> str:
        return f"{self.host}/{self.repository}:{self.tag}"


def parse_image(image: str) -> ImageRef:
    """`host/repo:tag` as docker resolves the name (`blueprints/image_refs.py`; Docker Hub's API host and
    `library/` for short names); a digest stands for the tag, no tag is `latest`. Raises ValueError
    for a string that is no image reference."""
    ref = parse_reference(image)
    host = DOCKER_HUB if ref.domain == DOCKER_HUB_DOMAIN else ref.domain
    return ImageRef(host=host, repository=ref.path, tag=ref.digest or ref.tag or "latest")


@dataclass(frozen=True)
class Resolved:
    """What the registry answered for a tag."""

    digest: str
    platforms: tuple[tuple[str, str], ...]


def _ecr_basic(host: str) -> str:
    """`Basic <token>` from ECR GetAuthorizationToken for a private ECR registry host."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    region = host.split(".")[3]
    try:
        data = boto3.client("ecr", region_name=region).get_authorization_token()["authorizationData"]
    except (BotoCoreError, ClientError) as exc:
        raise RegistryError(f"ECR GetAuthorizationToken in {region} failed: {exc}") from None
    return f"Basic {data[0]['authorizationToken']}"


def _get(client: Any, ref: ImageRef, path: str, accept: str, auth: dict[str, str]) -> Any:
    url = f"{base_url(ref.host)}/v2/{ref.repository}/{path}"
    reply = client.get(url, headers={"Accept": accept, **auth})
    if reply.status_code == 401 and not auth:
        if ".dkr.ecr." in ref.host and ref.host.endswith(".amazonaws.com"):
            auth.update(Authorization=_ecr_basic(ref.host))
        else:
            challenge = reply.headers.get("www-authenticate", "")
            auth.update(Authorization=f"Bearer {bearer_token(client, challenge, ref.repository)}")
        reply = client.get(url, headers={"Accept": accept, **auth})
    return reply


def resolve(client: Any, image: str) -> Resolved:
    """The tag's digest and the platforms it serves (raises RegistryError; `missing` for a 404)."""
    ref = parse_image(image)
    auth: dict[str, str] = {}
    reply = _get(client, ref, f"manifests/{ref.tag}", ACCEPT, auth)
    if reply.status_code == 404:
        code = _error_code(reply)
        raise RegistryError(f"{ref.host} answers {code} for {ref.repository}:{ref.tag}", missing=True)
    if reply.status_code != 200:
        raise RegistryError(f"{ref.host} answered HTTP {reply.status_code} ({_error_code(reply)})")
    body = reply.content
    digest = reply.headers.get("docker-content-digest") or "sha256:" + hashlib.sha256(body).hexdigest()
    manifest = json.loads(body)
    kind = reply.headers.get("content-type", "").split(";")[0] or manifest.get("mediaType", "")
    if kind in INDEX_TYPES or "manifests" in manifest:
        platforms = tuple(
            (str(m.get("platform", {}).get("os")), str(m.get("platform", {}).get("architecture")))
            for m in manifest.get("manifests", [])
        )
        return Resolved(digest, platforms)
    config = manifest.get("config", {}).get("digest")
    if not config:
        raise RegistryError(f"{ref.text}: the manifest names no config blob")
    blob = _get(client, ref, f"blobs/{config}", "*/*", auth)
    if blob.status_code != 200:
        raise RegistryError(f"{ref.host} answered HTTP {blob.status_code} for the config of {ref.text}")
    data = json.loads(blob.content)
    return Resolved(digest, ((str(data.get("os")), str(data.get("architecture"))),))


def _error_code(reply: Any) -> str:
    try:
        errors = reply.json().get("errors") or []
        return (
            ", ".join(f"{e.get('code')}: {e.get('message')}" for e in errors) or f"HTTP {reply.status_code}"
        )
    except ValueError:
        return f"HTTP {reply.status_code}"


def _read(client: Any, image: str) -> Resolved | RegistryError:
    """What the registry answered for the tag, or why it could not be read (`missing` for a 404)."""
    import httpx

    try:
        host = parse_image(image).host
    except ValueError as exc:  # no image reference: nothing to ask any registry
        return RegistryError(str(exc))
    try:
        return resolve(client, image)
    except RegistryError as exc:
        return exc
    except (httpx.HTTPError, ValueError) as exc:
        return RegistryError(f"cannot read {host} ({type(exc).__name__}: {exc})")


def lookup(client: Any, image: str) -> tuple[Resolved | None, str]:
    """(what the registry answered, "") or (None, why it could not be read or has no such tag)."""
    found = _read(client, image)
    return (None, str(found)) if isinstance(found, RegistryError) else (found, "")


def check_image(
    client: Any,
    key: str,
    image: str,
    recorded: str | None,
    *,
    recorded_in: str = "versions.yaml",
    name: str | None = None,
    moved_fix: str | None = None,
) -> Check:
    """One image pin: the tag exists, serves linux/amd64, and names the digest `recorded_in` records
    (versions.yaml, or a workload stack's pins).

    A registry that cannot be read, and a pin without a recorded digest, are `ok=None` ("could not
    check", never a pass); a missing tag, a wrong platform and a moved tag are failures.
    """
    name = name or f"image {image}"
    found = _read(client, image)
    if isinstance(found, RegistryError):
        if found.missing:
            return Check(
                name,
                False,
                str(found),
                f"pin a published tag in images.{key} of blueprints/data/versions.yaml",
            )
        return Check(name, None, f"could not check: {found}", None)
    if PLATFORM not in found.platforms:
        served = ", ".join("/".join(p) for p in found.platforms) or "none"
        return Check(
            name,
            False,
            f"{image} has no linux/amd64 image (it serves {served})",
            f"pin a tag built for linux/amd64 in images.{key} of blueprints/data/versions.yaml",
        )
    if recorded is None:
        return Check(
            name,
            None,
            f"could not check the digest: versions.yaml records none (the registry says {found.digest})",
            f"record digest: {found.digest} under images.{key} in blueprints/data/versions.yaml",
        )
    if recorded != found.digest:
        return Check(
            name,
            False,
            f"the tag moved: {recorded_in} records {recorded}, the registry now says {found.digest}",
            moved_fix or f"review the new image, then record digest: {found.digest} under images.{key}",
        )
    return Check(name, True, f"linux/amd64, digest {found.digest} as recorded")


def image_pins(blueprint: Any) -> list[tuple[str, str, str | None]]:
    """(versions.yaml key, image, recorded digest) of every image a blueprint's pods run from
    versions.yaml: its base image, the AWS CLI of the init container, its UI's image, the model-mirror
    Job's image when it mirrors its model; all of them without a blueprint."""
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()

    pinned = versions().images
    if blueprint is None:
        keys = list(pinned)
    else:
        ui = {"open-webui": "open_webui", "gradio": "python_slim"}.get(str(blueprint.ui))
        base = [k for k, v in pinned.items() if v.image == blueprint.image.base][:1]
        mirror = ["python_slim"] if blueprint.caches.model_mirror else []
        # each image once (the gradio UI and the mirror Job share python_slim)
        keys = list(dict.fromkeys([*base, "aws_cli", *([ui] if ui else []), *mirror]))
    return [(key, pinned[key].image, pinned[key].digest) for key in keys]


def check_images(pins: list[tuple[str, str, str | None]], client: Any = None) -> list[Check]:
    """One check per (versions.yaml key, image, recorded digest)."""
    own = client is None
    client = client or registry_client()
    try:
        return [check_image(client, key, image, digest) for key, image, digest in pins]
    finally:
        if own:
            client.close()


def check_stack_pins(stack: str, blueprint: str, client: Any = None) -> list[Check]:
    """One check per image the workload stack `stack` of `blueprint` pinned at its first `up`: does the
    tag still name the recorded digest? (None recorded: one warning saying so.)"""
    from llmctl.blueprints.versions import versions  # lazy: read at call time: tests swap versions()
    from llmctl.state import load_pins, pins_path

    recorded = load_pins(stack, blueprint).images
    if not recorded:
        return [
            Check(
                f"digests pinned by stack {stack}",
                None,
                f"none recorded for {blueprint} (no `up` or `llmctl images pin` yet, {pins_path(stack, blueprint)})",
                f"llmctl images pin -b {blueprint} --stack {stack}",
            )
        ]
    keys = {entry.image: key for key, entry in versions().images.items()}
    own = client is None
    client = client or registry_client()
    fix = f"review the new image, then move the stack onto it: llmctl images pin -b {blueprint} --stack {stack} {ACCEPT_FLAG}"
    try:
        return [
            check_image(
                client,
                keys.get(image, image),
                image,
                digest,
                recorded_in=f"stack {stack}",
                name=f"image {image} (stack {stack})",
                moved_fix=fix,
            )
            for image, digest in sorted(recorded.items())
        ]
    finally:
        if own:
            client.close()
