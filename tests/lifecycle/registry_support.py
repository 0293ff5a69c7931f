"""A real OCI registry server for the tests: the CNCF distribution registry (Debian's `docker-registry`
package, /usr/bin/docker-registry) on 127.0.0.1 with filesystem storage, and test images pushed over its
HTTP API (blobs, manifests, an image index), as `docker push` or `oras` would. Used by the image pin
checks (test_image_checks.py) and the per-stack digests (test_image_digests.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

REGISTRY_BIN = Path("/usr/bin/docker-registry")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """host:port of a distribution registry with filesystem storage in a temporary folder."""
    assert REGISTRY_BIN.is_file(), "install Debian's registry: apt-get install -y docker-registry"
    root = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        "log:\n  level: error\n"
    )
    process = subprocess.Popen(
        [str(REGISTRY_BIN), "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    host = f"127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"http://{host}/v2/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail(f"the registry did not start: {process.stderr.read() if process.stderr else ''}")
        yield host
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


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
