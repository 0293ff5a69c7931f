"""A Hugging Face Hub stand-in on 127.0.0.1 for the model-mirror Job's script (the Hub is a boundary
the suite cannot reach). It serves one model repository from a folder, with only the calls the
script makes through `huggingface_hub` (2.x, read in huggingface_hub/hf_api.py `model_info` and
huggingface_hub/file_download.py `get_hf_file_metadata`):

- `GET /api/models/<repo>/revision/<rev>?blobs=True`: `sha` and `siblings`, each with `rfilename`,
  `size`, `blobId` (the git blob SHA-1) and, for LFS files, `lfs` {`sha256`, `size`, `pointerSize`}.
- `HEAD|GET /<repo>/resolve/<rev>/<file>`: `X-Repo-Commit`, `ETag` (the LFS SHA-256 or the git
  blob id, quoted), `Content-Length`, and the bytes.

Files ending in .safetensors, .bin or .pth are LFS files, as on the Hub. `extra` adds listed files
that are never downloaded (sizes only), to model a large repository; `gets` counts downloads."""

from __future__ import annotations

import hashlib
import http.server
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

from local_http import serve_http

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_SUFFIXES = (".safetensors", ".bin", ".pth")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self, repo: str, folder: Path, extra: dict[str, int] | None = None) -> None:
        self.repo = repo
        self.files = {
            str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
        }
        self.extra = dict(extra or {})
        self.gets: Counter[str] = Counter()

    def sibling(self, name: str) -> dict[str, object]:
        if name in self.extra:
            size = self.extra[name]
            return {
                "rfilename": name,
                "size": size,
                "blobId": "0" * 40,
                "lfs": {"sha256": "0" * 64, "size": size, "pointerSize": 134},
            }
        data = self.files[name]
        entry: dict[str, object] = {"rfilename": name, "size": len(data), "blobId": git_blob_id(data)}
        if name.endswith(LFS_SUFFIXES):
            entry["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return entry

    def etag(self, name: str) -> str:
        info = self.sibling(name)
        lfs = info.get("lfs")
        return str(lfs["sha256"]) if isinstance(lfs, dict) else str(info["blobId"])

    def info(self) -> dict[str, object]:
        names = sorted([*self.files, *self.extra])
        return {
            "id": self.repo,
            "modelId": self.repo,
            "sha": COMMIT,
            "private": False,
            "siblings": [self.sibling(n) for n in names],
        }


def _handler(hub: FakeHub) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, body: bytes, headers: dict[str, str], head: bool = False) -> None:
            self.send_response(200)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _route(self, head: bool) -> None:
            path = unquote(urlparse(self.path).path)
            if path.startswith(f"/api/models/{hub.repo}/revision/"):
                self._send(json.dumps(hub.info()).encode(), {"Content-Type": "application/json"}, head)
                return
            prefix = f"/{hub.repo}/resolve/"
            if path.startswith(prefix):
                name = path[len(prefix) :].split("/", 1)[1]
                if name in hub.files:
                    if not head:
                        hub.gets[name] += 1
                    headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hub.etag(name)}"'}
                    self._send(hub.files[name], headers, head)
                    return
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_HEAD(self) -> None:
            self._route(head=True)

        def do_GET(self) -> None:
            self._route(head=False)

    return Handler


@contextmanager
def serve(hub: FakeHub) -> Iterator[str]:
    """Serve `hub` on 127.0.0.1; yields its base URL (for HF_ENDPOINT)."""
    with serve_http(_handler(hub)) as url:
        yield url
