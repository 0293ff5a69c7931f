"""A local server answering as the Hugging Face Hub's model API, for the revision pin at `up`.

The answer's shape is the one huggingface_hub 2.4.0 (the version the serving locks pin) reads in
``src/huggingface_hub/hf_api.py``: ``model_info`` calls ``GET {endpoint}/api/models/{repo_id}/
revision/{quote(revision, safe='')}`` with ``blobs=True`` when ``files_metadata`` (httpx sends
``blobs=true``); ``ModelInfo`` takes ``sha`` and ``siblings[]`` of ``rfilename``, ``size``, ``blobId``
and ``lfs: {size, sha256, pointerSize}``. Errors are ``hf_raise_for_status`` in
``src/huggingface_hub/utils/_http.py``: the ``X-Error-Code`` header ``RevisionNotFound`` /
``RepoNotFound`` / ``GatedRepo``. tests/workload/test_model_revision.py runs huggingface_hub's own
client against this server, so the recording is held to the library.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from local_http import serve_http

MODEL = "meta-llama/Llama-2-13b-hf"
COMMIT = "dc1d3b3bfdb69df26f8fc966c16353274b138c55"
WEIGHTS_SHA256 = "3a4e1b8d5c9f0e7a6b2d4c8e1f3a5b7d9c0e2f4a6b8d0c2e4f6a8b0d2c4e6f8a"
CONFIG_BLOB = "4b8d1c1f1f6a1e0f2f7c8b3d7e0a9c6d5b4a3f2e"
# GET /api/models/meta-llama/Llama-2-13b-hf/revision/main?blobs=true, fields as ModelInfo reads them
ANSWER: dict[str, Any] = {
    "_id": "64b741a55e4b1e8e7d0c2d10",
    "id": MODEL,
    "modelId": MODEL,
    "sha": COMMIT,
    "private": False,
    "gated": "manual",
    "siblings": [
        {"rfilename": ".gitattributes", "blobId": "a6344aac8c09253b3b630fb776ae94478aa0275b", "size": 1519},
        {"rfilename": "config.json", "blobId": CONFIG_BLOB, "size": 587},
        {
            "rfilename": "model-00001-of-00003.safetensors",
            "blobId": "5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6",
            "size": 9948693272,
            "lfs": {"sha256": WEIGHTS_SHA256, "size": 9948693272, "pointerSize": 135},
        },
    ],
}


class Hub:
    """What the local server answers (``answer``: status, headers, body), and each request's path and
    headers as it came; ``url`` is set while the server runs."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.answer: tuple[int, dict[str, str], dict[str, Any]] = (200, {}, ANSWER)
        self.url = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hub.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, headers, body = hub.answer
                data = json.dumps(body).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@contextlib.contextmanager
def hub_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    """The server on a free loopback port (tests/local_http.py), with ``HF_ENDPOINT`` pointing at it."""
    hub = Hub()
    with serve_http(hub.handler()) as url:
        hub.url = url
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield hub
