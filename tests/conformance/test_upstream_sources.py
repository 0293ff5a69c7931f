"""The upstream reference files come from the pinned manifest, verified by sha256, from the first
source that has them: $LLMCTL_UPSTREAM_DIR, ../shared/upstream, the cache, then a download (here from
a local HTTP server laid out as raw.githubusercontent.com is). A copy with another hash is refused;
a file no source can supply is one clear error, never a skip."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from upstream_files import upstream
from upstream_sources import (
    ENV_CACHE,
    ENV_DIR,
    ENV_MIRROR,
    MANIFEST,
    PROJECT_ROOT,
    RAW_GITHUB,
    Fetcher,
    Manifest,
    ManifestError,
    Row,
    Source,
    UpstreamFileUnavailable,
    load_manifest,
    local_sources,
    mirrored,
    raw_url,
)

KARPENTER_VALUES = b"settings:\n  clusterName: ''\n"
PINNED = hashlib.sha256(KARPENTER_VALUES).hexdigest()


def _row(url: str = "http://127.0.0.1:9/none", sha256: str = PINNED) -> Row:
    return Row(
        file="karpenter/values.yaml",
        repository="aws/karpenter-provider-aws",
        ref="v1",
        path="charts/karpenter/values.yaml",
        url=url,
        sha256=sha256,
    )


class _Served:
    """A loopback HTTP server over a folder, counting the requests it answered."""

    def __init__(self, root: Path) -> None:
        self.requests: list[str] = []
        served = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

            def do_GET(self) -> None:
                served.requests.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[_Served]:
    root = tmp_path / "www"
    (root / "files").mkdir(parents=True)
    (root / "files" / "values.yaml").write_bytes(KARPENTER_VALUES)
    (root / "files" / "altered.yaml").write_bytes(KARPENTER_VALUES + b"# edited\n")
    server = _Served(root)
    yield server
    server.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_download_places_the_verified_file_in_the_cache(tmp_path: Path, served: _Served) -> None:
    fetcher = Fetcher(cache=tmp_path / "cache", sources=[])
    path = fetcher.ensure(_row(f"{served.url}/files/values.yaml"))
    assert path == tmp_path / "cache" / "karpenter" / "values.yaml"
    assert path.read_bytes() == KARPENTER_VALUES
    assert served.requests == ["/files/values.yaml"] and fetcher.origins == {
        "karpenter/values.yaml": "download"
    }


def test_the_cache_answers_without_a_download(tmp_path: Path, served: _Served) -> None:
    Fetcher(cache=tmp_path / "cache", sources=[]).ensure(_row(f"{served.url}/files/values.yaml"))
    again = Fetcher(cache=tmp_path / "cache", sources=[])
    assert again.ensure(_row(f"{served.url}/files/values.yaml")).read_bytes() == KARPENTER_VALUES
    assert served.requests == ["/files/values.yaml"]  # only the first fetcher downloaded
    assert again.origins == {"karpenter/values.yaml": "cache"}


def test_a_download_with_another_hash_is_refused_and_not_cached(tmp_path: Path, served: _Served) -> None:
    fetcher = Fetcher(cache=tmp_path / "cache", sources=[])
    with pytest.raises(UpstreamFileUnavailable) as refused:
        fetcher.ensure(_row(f"{served.url}/files/altered.yaml"))
    altered = hashlib.sha256(KARPENTER_VALUES + b"# edited\n").hexdigest()
    assert f"it has sha256 {altered}, not the pinned one (refused)" in str(refused.value)
    assert not (tmp_path / "cache" / "karpenter" / "values.yaml").exists()
    assert isinstance(refused.value, AssertionError)  # a test using it fails, never skips


def test_a_missing_url_names_the_http_answer(tmp_path: Path, served: _Served) -> None:
    with pytest.raises(UpstreamFileUnavailable, match=r"/files/gone\.yaml failed: HTTP 404"):
        Fetcher(cache=tmp_path / "cache", sources=[]).ensure(_row(f"{served.url}/files/gone.yaml"))


def test_unreachable_is_one_line_naming_the_file_the_url_and_the_variable(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/values.yaml"
    with pytest.raises(UpstreamFileUnavailable) as unreachable:
        Fetcher(cache=tmp_path / "cache", sources=[], timeout=5).ensure(_row(url))
    message = str(unreachable.value)
    assert "\n" not in message
    assert "karpenter/values.yaml" in message and url in message and f"${ENV_DIR}" in message
    assert "Connection refused" in message


def test_after_one_network_failure_no_further_download_is_tried(tmp_path: Path, served: _Served) -> None:
    fetcher = Fetcher(cache=tmp_path / "cache", sources=[], timeout=5)
    dead = _row(f"http://127.0.0.1:{_closed_port()}/a.yaml")
    with pytest.raises(UpstreamFileUnavailable):
        fetcher.ensure(dead)
    with pytest.raises(UpstreamFileUnavailable, match="not tried after an earlier download failed"):
        fetcher.ensure(_row(f"{served.url}/files/values.yaml"))
    assert served.requests == []


def test_sources_are_tried_in_order_and_a_wrong_copy_is_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, content in ((first, b"edited\n"), (second, KARPENTER_VALUES)):
        (folder / "karpenter").mkdir(parents=True)
        (folder / "karpenter" / "values.yaml").write_bytes(content)
    fetcher = Fetcher(cache=tmp_path / "cache", sources=[Source("first", first), Source("second", second)])
    assert fetcher.ensure(_row()).read_bytes() == KARPENTER_VALUES
    assert fetcher.origins == {"karpenter/values.yaml": "second"}
    (second / "karpenter" / "values.yaml").unlink()
    # the cache keeps what the second source gave; the first still holds a wrong copy
    with pytest.raises(
        UpstreamFileUnavailable, match=r"refused local copies: .*first/karpenter/values\.yaml has sha256"
    ):
        Fetcher(cache=tmp_path / "other-cache", sources=[Source("first", first)], timeout=5).ensure(_row())
    fetcher = Fetcher(cache=tmp_path / "cache", sources=[Source("first", first)])
    assert (
        fetcher.ensure(_row()).read_bytes() == KARPENTER_VALUES
        and fetcher.origins["karpenter/values.yaml"] == "cache"
    )


def test_a_damaged_cache_file_is_replaced_by_a_download(tmp_path: Path, served: _Served) -> None:
    target = tmp_path / "cache" / "karpenter" / "values.yaml"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"truncated")
    fetcher = Fetcher(cache=tmp_path / "cache", sources=[])
    assert fetcher.ensure(_row(f"{served.url}/files/values.yaml")).read_bytes() == KARPENTER_VALUES
    assert fetcher.origins == {"karpenter/values.yaml": "download"}


def test_the_environment_folder_comes_before_shared(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_DIR, str(tmp_path))
    labels = [(source.label, source.folder) for source in local_sources(tmp_path / "project")]
    assert labels == [(f"${ENV_DIR}", tmp_path), ("../shared/upstream", tmp_path / "shared" / "upstream")]
    monkeypatch.delenv(ENV_DIR)
    assert [s.label for s in local_sources(tmp_path / "project")] == ["../shared/upstream"]


def test_the_mirror_replaces_only_the_raw_github_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    url = raw_url("ray-project/kuberay", "v1.7.0", "helm-chart/kuberay-operator/values.yaml")
    assert url == f"{RAW_GITHUB}/ray-project/kuberay/v1.7.0/helm-chart/kuberay-operator/values.yaml"
    monkeypatch.setenv(ENV_MIRROR, "http://127.0.0.1:8/m/")
    assert (
        mirrored(url)
        == "http://127.0.0.1:8/m/ray-project/kuberay/v1.7.0/helm-chart/kuberay-operator/values.yaml"
    )
    assert mirrored("https://example.org/x.yaml") == "https://example.org/x.yaml"


def test_a_file_outside_the_manifest_names_the_fix() -> None:
    with pytest.raises(
        ManifestError, match=r"'keda/Chart\.lock' is not in upstream_manifest\.yaml: add its row"
    ):
        load_manifest().row("keda/Chart.lock")


def test_manifest_rows_are_unique_relative_and_well_formed() -> None:
    row = _row().model_dump()
    with pytest.raises(ValueError, match="listed twice"):
        Manifest.model_validate({"files": [row, row]})
    for bad in ("../outside.yaml", "/etc/passwd"):
        with pytest.raises(ValueError, match="relative path inside the cache"):
            Row.model_validate({**row, "file": bad})
    with pytest.raises(ValueError, match="sha256"):
        Row.model_validate({**row, "sha256": "abc"})
    with pytest.raises(ValueError, match="Extra inputs"):
        Row.model_validate({**row, "mirror": "x"})


def test_every_pinned_url_is_the_raw_file_at_its_ref() -> None:
    manifest = load_manifest()
    assert len(manifest.files) >= 30
    for row in manifest.files:
        assert row.url == raw_url(row.repository, row.ref, row.path), row.file
        assert not row.ref.startswith(("main", "master")), f"{row.file}: pin a commit or tag"


@functools.cache
def _manifest_files() -> tuple[str, ...]:
    return tuple(row.file for row in load_manifest().files)


def test_the_suite_reads_verified_copies_from_the_cache() -> None:
    for name in _manifest_files():
        path = upstream(name)
        row = load_manifest().row(name)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == row.sha256, name


def _fresh_clone(tmp_path: Path) -> Path:
    """The two files `make upstream` runs, in a project folder with no ../shared beside it."""
    project = tmp_path / "clone" / "llmctl"
    (project / "tests" / "conformance").mkdir(parents=True)
    for name in ("upstream_sources.py", "upstream_manifest.yaml"):
        shutil.copy(MANIFEST.parent / name, project / "tests" / "conformance" / name)
    return project


def _run(project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLMCTL_UPSTREAM")}
    return subprocess.run(
        [sys.executable, "tests/conformance/upstream_sources.py"],
        cwd=project,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_make_upstream_on_a_fresh_clone_downloads_every_pinned_file(tmp_path: Path) -> None:
    """The whole manifest from a mirror laid out as raw.githubusercontent.com (repository/ref/path),
    built from verified copies; then again from the cache alone."""
    www = tmp_path / "www"
    for row in load_manifest().files:
        target = www / row.repository / row.ref / row.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(upstream(row.file), target)
    server = _Served(www)
    project = _fresh_clone(tmp_path)
    try:
        env = {ENV_CACHE: str(tmp_path / "cache"), ENV_MIRROR: server.url}
        first = _run(project, env)
        assert first.returncode == 0, first.stderr
        count = len(_manifest_files())
        assert (
            first.stdout.strip()
            == f"{count} upstream reference files verified in {tmp_path / 'cache'} ({count} from download)"
        )
        assert len(server.requests) == count
        second = _run(
            project, {ENV_CACHE: str(tmp_path / "cache"), ENV_MIRROR: f"http://127.0.0.1:{_closed_port()}"}
        )
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip().endswith(f"({count} from cache)")
        assert len(server.requests) == count
    finally:
        server.close()


def test_make_upstream_with_no_source_fails_with_one_line(tmp_path: Path) -> None:
    project = _fresh_clone(tmp_path)
    port = _closed_port()
    result = _run(project, {ENV_CACHE: str(tmp_path / "cache"), ENV_MIRROR: f"http://127.0.0.1:{port}"})
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    first = load_manifest().files[0]
    assert lines[0].startswith(f"error: upstream reference file {first.file} ")
    assert f"http://127.0.0.1:{port}/{first.repository}/{first.ref}/{first.path}" in lines[0]
    assert f"${ENV_DIR}" in lines[0] and f"({len(_manifest_files()) - 1} more of" in lines[0]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.yaml"))


def test_the_manifest_row_command_prints_a_row(tmp_path: Path) -> None:
    (tmp_path / "keda").mkdir()
    (tmp_path / "keda" / "Chart.yaml").write_bytes(KARPENTER_VALUES)
    result = subprocess.run(
        [sys.executable, str(MANIFEST.parent / "upstream_sources.py"), "row", "keda/Chart.yaml", "--from", str(tmp_path),
         "--repository", "kedacore/charts", "--ref", "abc123", "--path", "keda/Chart.yaml"],
        capture_output=True, text=True, timeout=60, check=True, cwd=PROJECT_ROOT,
    )  # fmt: skip
    [row] = yaml.safe_load(result.stdout)
    assert row == {
        "file": "keda/Chart.yaml",
        "repository": "kedacore/charts",
        "ref": "abc123",
        "path": "keda/Chart.yaml",
        "url": f"{RAW_GITHUB}/kedacore/charts/abc123/keda/Chart.yaml",
        "sha256": PINNED,
    }
