"""Container image references by the OCI distribution grammar, as docker and the kubelet read them.

The grammar and the normalization are the CNCF distribution project's (github.com/distribution/reference:
regexp.go at 00a09fa3799203fc887e667b0d82142ee831939a, normalize.go at
4ca14034c40611bc3536fc703ffa6a22fb8e6659): a reference is `[domain[:port]/]path[:tag][@digest]`, each
path component lower-case letters and digits joined by `.`, `_`, `__` or dashes; a tag is up to 128
word characters, dots and dashes, not starting with either of the last two; the whole name at most
255 characters. The first component is a registry domain when it holds a `.` or `:`, is `localhost`
or has upper-case letters (a namespace cannot), else the image is on Docker Hub (`docker.io`, and
`library/` before a single-component path). A digest is one the kubelet can pull: `sha256:` with 64
lower-case hex digits (sha384 and sha512 with 96 and 128).

`parse_reference` refuses anything else with one line naming the image and what is wrong, so a
blueprint or versions.yaml with a mistyped image is refused when it is loaded, never at the kubelet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB_DOMAIN = "docker.io"
_LEGACY_HUB_DOMAIN = "index.docker.io"
_OFFICIAL = "library/"
NAME_MAX = 255
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}

_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
FORM = "[registry/]repository[:tag][@sha256:<64 hex digits>]"


@dataclass(frozen=True)
class Reference:
    """One image reference, normalized as docker does (`python:3.11` is docker.io/library/python)."""

    domain: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def text(self) -> str:
        """The canonical form: `domain/path[:tag][@digest]` (parses back to the same reference)."""
        return (
            f"{self.domain}/{self.path}"
            + (f":{self.tag}" if self.tag else "")
            + (f"@{self.digest}" if self.digest else "")
        )


def _split_domain(name: str) -> tuple[str, str]:
    """(domain, remainder) as distribution's splitDockerDomain decides them."""
    first, slash, rest = name.partition("/")
    if not slash:
        return DOCKER_HUB_DOMAIN, _OFFICIAL + name
    if first == _LEGACY_HUB_DOMAIN:
        first = DOCKER_HUB_DOMAIN
    elif not (first == "localhost" or "." in first or ":" in first or first.lower() != first):
        first, rest = DOCKER_HUB_DOMAIN, name
    if first == DOCKER_HUB_DOMAIN and "/" not in rest:
        rest = _OFFICIAL + rest
    return first, rest


def parse_reference(image: str) -> Reference:
    """The reference `image` names (raises ValueError with one line saying what is wrong)."""
    if _IDENTIFIER.fullmatch(image):
        raise ValueError(f"image {image!r} is a bare 64-hex identifier, not a reference; write it as {FORM}")
    domain, remainder = _split_domain(image)
    repository = remainder.partition("@")[0].partition(":")[0]
    if repository.lower() != repository:
        raise ValueError(f"image {image!r}: the repository name must be lower-case ({repository!r})")
    match = _REFERENCE.fullmatch(f"{domain}/{remainder}")
    if match is None or match["domain"] != domain:
        raise ValueError(f"image {image!r} is not a valid reference; write it as {FORM}")
    if len(match["name"]) > NAME_MAX:
        raise ValueError(f"image {image!r}: the name is longer than {NAME_MAX} characters")
    digest = match["digest"]
    if digest is not None:
        algorithm, _, hexdigits = digest.partition(":")
        if _DIGEST_HEX.get(algorithm) != len(hexdigits) or hexdigits != hexdigits.lower():
            raise ValueError(
                f"image {image!r}: digest {digest!r} is not sha256 with 64 lower-case hex digits "
                "(or sha384/sha512 with 96/128)"
            )
    return Reference(domain=domain, path=match["name"][len(domain) + 1 :], tag=match["tag"], digest=digest)
