"""Helpers of the serving tests."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.state import Endpoint


@dataclass
class LocalServer:
    """The local server the serving tests share (conftest.py `local_server`)."""

    endpoint: Endpoint
    state: Path  # its LLMCTL_STATE_DIR
    model: Path  # the tiny model it serves
    progress: list[str]  # what `start_local` said while it started
    api_key: str  # every route but /healthz needs it

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


LOCAL_STACK = "local-shared"
LOCAL_KEY = "sk-local-shared"
#: the shared server's slots and queue (tiny-cpu's own limits are smaller): the overload tests fill them
LOCAL_SLOTS, LOCAL_QUEUE = 64, 16


def mirror_model(model: Path, uri: str, *, complete: bool = True) -> None:
    """Upload a model directory to ``uri`` as the workload's mirror Job does (marker last)."""
    import boto3

    from llmctl.serving.model_mirror import COMPLETE_MARKER, split_s3_uri

    bucket, prefix = split_s3_uri(uri)
    s3 = boto3.client("s3")
    if bucket not in [b["Name"] for b in s3.list_buckets().get("Buckets", [])]:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for path in sorted(model.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(model)}")
    if complete:
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{COMPLETE_MARKER}", Body=b"ok")


def hub_checksums(model: Path) -> dict[str, str]:
    """What the Hub reports for each file: LFS files (the weights) by SHA-256, the others by their git
    blob id (computed here by git itself)."""
    import hashlib
    import subprocess

    files: dict[str, str] = {}
    for path in sorted(p for p in model.rglob("*") if p.is_file()):
        name = path.relative_to(model).as_posix()
        if name.endswith(".safetensors"):
            files[name] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            blob = subprocess.run(
                ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
            )
            files[name] = "git-blob:" + blob.stdout.strip()
    return files


def ray_download(model: Path, folder: Path) -> Path:
    """The folder Ray Serve LLM downloads a mirror into (``CloudFileSystem.download_model``:
    ``<HF cache>/models--<id>/snapshots/<hash>``, every object of the prefix, the marker included)."""
    import shutil

    from llmctl.serving.model_mirror import COMPLETE_MARKER

    snapshot = folder / "models--tiny" / "snapshots" / ("0" * 40)
    shutil.copytree(model, snapshot)
    (snapshot / COMPLETE_MARKER).write_text("ok")
    return snapshot


@contextlib.contextmanager
def uvicorn_app(app: Any) -> Iterator[tuple[str, asyncio.AbstractEventLoop]]:
    """Serve an ASGI app on 127.0.0.1 in a thread; yields (base URL, the server's event loop)."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start within 30 s"
    try:
        yield f"http://127.0.0.1:{port}", loop
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        if not thread.is_alive():
            loop.close()  # closed here, not by the garbage collector at some later test


def sse_events(lines: list[str]) -> list[str]:
    """The ``data:`` payloads of a server-sent event stream, in order."""
    return [line[len("data: ") :] for line in lines if line.startswith("data: ")]


def held_post(
    client: Any, url: str, payload: dict[str, Any], release: asyncio.Event
) -> Any:  # a coroutine of httpx.Response
    """POST ``payload`` with its Content-Length but hold back its last byte until ``release`` is set.

    The overload guard admits a request (a slot or a place in the queue) from its headers, before
    the body is read, so held requests keep their places for as long as the test wants: the exact
    queue limit can be pinned without racing the engine.
    """
    import json

    body = json.dumps(payload).encode()

    async def parts() -> Any:
        yield body[:-1]
        await release.wait()
        yield body[-1:]

    return client.post(
        url, content=parts(), headers={"content-type": "application/json", "content-length": str(len(body))}
    )


async def wait_for_metrics(client: Any, url: str, wanted: dict[str, float], timeout_s: float = 60.0) -> str:
    """Poll ``url`` (Prometheus text) until every sample in ``wanted`` has its value; the last text."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = str((await client.get(url)).text)
        values = {name: metric_value(text, name) for name in wanted}
        if values == wanted or time.monotonic() > deadline:
            assert values == wanted, f"after {timeout_s} s: {values}, wanted {wanted}"
            return text
        await asyncio.sleep(0.05)


def metric_value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` in the Prometheus text format (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith(name)
            and line[len(name) : len(name) + 1] in ("{", " ")
            and all(f'{k}="{v}"' in line for k, v in labels.items())
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total
