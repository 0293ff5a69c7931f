"""A real OCI registry server for the tests: the CNCF distribution registry (Debian's `docker-registry`
package, /usr/bin/docker-registry) on 127.0.0.1 with filesystem storage, and test images pushed over its
HTTP API (blobs, manifests, an image index), as `docker push` or `oras` would. Used by the image pin
checks (test_image_checks.py), the per-stack digests (test_image_digests.py) and the chart pin checks
(test_pin_checks.py: charts pushed as `helm push` stores them, read through a server that asks for a
bearer token, as public.ecr.aws does)."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from local_http import serve_http

REGISTRY_BIN = Path("/usr/bin/docker-registry")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serve(root: Path, storage: Path, auth: str = "") -> Iterator[str]:
    """host:port of a distribution registry on `storage` (its config in `root`; `auth`: a config section)."""
    assert REGISTRY_BIN.is_file(), "install Debian's registry: apt-get install -y docker-registry"
    port = _free_port()
    config = root / f"config-{port}.yml"
    config.write_text(
        "version: 0.1\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        "log:\n  level: error\n" + auth
    )
    process = subprocess.Popen(
        [str(REGISTRY_BIN), "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    host = f"127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"http://{host}/v2/", timeout=1).status_code in (200, 401):
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail(f"the registry did not start: {process.stderr.read() if process.stderr else ''}")
        yield host
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a distribution registry with filesystem storage in a temporary folder."""
    root = tmp_path_factory.mktemp("registry")
    try:
        with _serve(root, root / "data") as host:
            yield host
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- token authentication (distribution's `auth: token`, docs/spec/auth/token.md and jwt.md) --------
TOKEN_SERVICE = "llmctl-test-registry"
TOKEN_ISSUER = "llmctl-test-token-issuer"


class TokenIssuer:
    """The token service a registry with `auth: token` sends clients to: an ES256 JWT for the scope
    asked, signed by a key whose certificate is the registry's `rootcertbundle` (the x5c header)."""

    def __init__(self, root: Path) -> None:
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TOKEN_ISSUER)])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(1)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.certificate = root / "token-issuer.pem"
        self.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()
        self.refuse = False  # the token service answers 403 (a registry that wants credentials)
        self.asked: list[dict[str, list[str]]] = []

    def token(self, scope: str) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        kind, name, actions = scope.split(":")
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [self.x5c]}
        claims = {
            "iss": TOKEN_ISSUER,
            "sub": "",
            "aud": TOKEN_SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": f"{now}-{name}",
            "access": [{"type": kind, "name": name, "actions": actions.split(",")}],
        }
        signing = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    @contextmanager
    def serve(self) -> Iterator[str]:
        """The token endpoint's URL (the registry's realm)."""
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query)
                issuer.asked.append(query)
                status, body = (403, b"denied") if issuer.refuse else (200, b"")
                if not issuer.refuse:
                    body = json.dumps({"token": issuer.token(query["scope"][0])}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        with serve_http(Handler) as url:
            yield f"{url}/token"


@dataclass
class TokenRegistry:
    """One registry storage behind two servers: `push` open (the tests push there), `host` asking for
    a bearer token from `issuer` (what the code under test reads)."""

    push: str
    host: str
    issuer: TokenIssuer


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenRegistry]:
    root = tmp_path_factory.mktemp("token-registry")
    issuer = TokenIssuer(root)
    try:
        with issuer.serve() as realm, _serve(root, root / "data") as push:
            auth = (
                "auth:\n  token:\n"
                f"    realm: {realm}\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n"
                f"    rootcertbundle: {issuer.certificate}\n"
            )
            with _serve(root, root / "data", auth) as host:
                yield TokenRegistry(push, host, issuer)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Helm's media types for a chart pushed to an OCI registry (helm/helm pkg/registry/constants.go at
# a2f42f759ea71c576cc4681f3d24d0015e19fc75)
HELM_CONFIG = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


def push_chart(host: str, repo: str, version: str) -> str:
    """A chart version as `helm push` stores it: a manifest of its Chart.yaml config and package layer,
    tagged with the version (Helm writes `+` as `_` in a tag); the manifest's digest."""
    config = json.dumps({"name": repo.rsplit("/", 1)[-1], "version": version, "apiVersion": "v2"}).encode()
    package = f"chart package {repo} {version}".encode()
    body = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"mediaType": HELM_CONFIG, "digest": _blob(host, repo, config), "size": len(config)},
            "layers": [{"mediaType": HELM_CHART, "digest": _blob(host, repo, package), "size": len(package)}],
        }
    ).encode()
    put = httpx.put(
        f"http://{host}/v2/{repo}/manifests/{version.replace('+', '_')}",
        content=body,
        headers={"Content-Type": OCI_MANIFEST},
    )
    assert put.status_code == 201, put.text
    return _digest(body)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _blob(host: str, repo: str, data: bytes) -> str:
    start = httpx.post(f"http://{host}/v2/{repo}/blobs/uploads/")
    assert start.status_code == 202, start.text
    location = start.headers["location"]
    url = location if location.startswith("http") else f"http://{host}{location}"
    digest = _digest(data)
    url += ("&" if "?" in url else "?") + f"digest={digest}"  # keeps the upload's own query (_state)
    done = httpx.put(url, content=data, headers={"Content-Type": "application/octet-stream"})
    assert done.status_code == 201, done.text
    return digest


def _manifest(host: str, repo: str, arch: str, layer: bytes, tag: str | None = None) -> tuple[str, int]:
    """An image for linux/<arch> (its config and one layer); returns (digest, size) of its manifest."""
    config = json.dumps(
        {"os": "linux", "architecture": arch, "rootfs": {"type": "layers", "diff_ids": []}}
    ).encode()
    body = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _blob(host, repo, config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": _blob(host, repo, layer),
                    "size": len(layer),
                }
            ],
        }
    ).encode()
    reference = tag or _digest(body)
    put = httpx.put(
        f"http://{host}/v2/{repo}/manifests/{reference}", content=body, headers={"Content-Type": OCI_MANIFEST}
    )
    assert put.status_code == 201, put.text
    return _digest(body), len(body)


def _index(host: str, repo: str, tag: str, arches: list[str]) -> str:
    entries = []
    for arch in arches:
        digest, size = _manifest(host, repo, arch, f"layer for {arch}".encode())
        entries.append(
            {
                "mediaType": OCI_MANIFEST,
                "digest": digest,
                "size": size,
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    put = httpx.put(
        f"http://{host}/v2/{repo}/manifests/{tag}", content=body, headers={"Content-Type": OCI_INDEX}
    )
    assert put.status_code == 201, put.text
    return _digest(body)
