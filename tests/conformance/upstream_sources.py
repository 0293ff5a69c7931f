"""The upstream reference files: a pinned manifest, and verified copies of them in a cache.

`upstream_manifest.yaml` beside this file names every upstream file the tests read: the repository,
the commit or tag, the path there, the URL it downloads from and its sha256. The files themselves
are never in the repository. `ensure()` places one file in the cache directory, taking it from the
first source that has it with the pinned sha256:

1. the folder named by `$LLMCTL_UPSTREAM_DIR`;
2. `../shared/upstream/` beside the project root (this team's machines and CI);
3. the cache itself (`$LLMCTL_UPSTREAM_CACHE`, default `~/.cache/llmctl/upstream`);
4. a download of the pinned URL (`$LLMCTL_UPSTREAM_MIRROR`, when set, replaces its
   `https://raw.githubusercontent.com` prefix: a mirror laid out as `<repository>/<ref>/<path>`).

A copy whose sha256 differs is refused (and said so); a file no source can supply is one
`UpstreamFileUnavailable` line naming the file, the URL and the environment variable.

Run as a script (`make upstream`) it fills the cache for the whole manifest and prints one line;
`row` prints the manifest row for a new file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PROJECT_ROOT = Path(__file__).resolve().parents[2]
MANIFEST = Path(__file__).resolve().with_name("upstream_manifest.yaml")
ENV_DIR = "LLMCTL_UPSTREAM_DIR"
ENV_CACHE = "LLMCTL_UPSTREAM_CACHE"
ENV_MIRROR = "LLMCTL_UPSTREAM_MIRROR"
RAW_GITHUB = "https://raw.githubusercontent.com"
DOWNLOAD_TIMEOUT_S = 30.0


class UpstreamError(AssertionError):
    """Base of the upstream-file errors. An AssertionError so that a test using a missing file fails
    (never skips)."""


class ManifestError(UpstreamError):
    """The manifest is unreadable, or a file asked for is not in it."""


class UpstreamFileUnavailable(UpstreamError):
    """No source could supply a file with its pinned sha256."""


class Row(BaseModel):
    """One upstream reference file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(description="Where the tests find it, relative to the cache (folder/name).")
    repository: str = Field(description="The upstream GitHub repository, owner/name.")
    ref: str = Field(description="The commit (preferred) or tag the file is taken at.")
    path: str = Field(description="The file's path in the repository at that ref.")
    url: str = Field(description="Where it downloads from.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The sha256 of the file's bytes.")
    note: str = Field(default="", description="Why this file, or what to know about the ref.")

    @model_validator(mode="after")
    def _relative(self) -> Row:
        parts = Path(self.file).parts
        if Path(self.file).is_absolute() or ".." in parts or not parts:
            raise ValueError(f"file {self.file!r} must be a relative path inside the cache")
        return self


class Manifest(BaseModel):
    """Every upstream reference file the tests read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: tuple[Row, ...] = Field(description="One row per file.")

    @model_validator(mode="after")
    def _unique(self) -> Manifest:
        seen: set[str] = set()
        for row in self.files:
            if row.file in seen:
                raise ValueError(f"file {row.file!r} is listed twice")
            seen.add(row.file)
        return self

    def row(self, file: str) -> Row:
        for row in self.files:
            if row.file == file:
                return row
        raise ManifestError(
            f"upstream file {file!r} is not in {MANIFEST.name}: add its row "
            f"(python {Path(__file__).relative_to(PROJECT_ROOT)} row {file} --from DIR --repository OWNER/NAME "
            "--ref COMMIT --path PATH)"
        )


def raw_url(repository: str, ref: str, path: str) -> str:
    return f"{RAW_GITHUB}/{repository}/{ref}/{path}"


def load_manifest(path: Path = MANIFEST) -> Manifest:
    try:
        return Manifest.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise ManifestError(f"upstream manifest {path} is unusable: {exc}") from exc


def mirrored(url: str) -> str:
    """The URL to download: the pinned one, or the same path under `$LLMCTL_UPSTREAM_MIRROR`."""
    mirror = os.environ.get(ENV_MIRROR)
    if mirror and url.startswith(RAW_GITHUB + "/"):
        return mirror.rstrip("/") + url[len(RAW_GITHUB) :]
    return url


def default_cache() -> Path:
    override = os.environ.get(ENV_CACHE)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llmctl" / "upstream"


@dataclass(frozen=True)
class Source:
    """A folder that may hold the files, laid out as the manifest's `file` names them."""

    label: str
    folder: Path


def local_sources(project_root: Path = PROJECT_ROOT) -> list[Source]:
    """`$LLMCTL_UPSTREAM_DIR` when set, then `shared/upstream` beside the project root."""
    found: list[Source] = []
    override = os.environ.get(ENV_DIR)
    if override:
        found.append(Source(f"${ENV_DIR}", Path(override)))
    found.append(Source("../shared/upstream", project_root.parent / "shared" / "upstream"))
    return found


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


Download = Callable[[str, float], bytes]


def http_download(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        data: bytes = response.read()
        return data


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@dataclass
class Fetcher:
    """Places manifest files in `cache`, verified by sha256. One instance per run: after the first
    download that fails for want of a network, no further download is tried."""

    cache: Path = field(default_factory=default_cache)
    sources: Sequence[Source] = field(default_factory=local_sources)
    download: Download = http_download
    timeout: float = DOWNLOAD_TIMEOUT_S
    origins: dict[str, str] = field(default_factory=dict)
    offline_reason: str | None = None

    def ensure(self, row: Row) -> Path:
        target = self.cache / row.file
        refused: list[str] = []
        for source in self.sources:
            candidate = source.folder / row.file
            if not candidate.is_file():
                continue
            data = candidate.read_bytes()
            digest = sha256_of(data)
            if digest == row.sha256:
                if not (target.is_file() and sha256_of(target.read_bytes()) == digest):
                    _write_atomically(target, data)
                self.origins[row.file] = source.label
                return target
            refused.append(f"{candidate} has sha256 {digest}")
        if target.is_file():
            digest = sha256_of(target.read_bytes())
            if digest == row.sha256:
                self.origins[row.file] = "cache"
                return target
            refused.append(f"cached {target} has sha256 {digest}")
        data = self._download(row, refused)
        _write_atomically(target, data)
        self.origins[row.file] = "download"
        return target

    def _download(self, row: Row, refused: list[str]) -> bytes:
        url = mirrored(row.url)
        if self.offline_reason is None:
            try:
                data = self.download(url, self.timeout)
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code} {exc.reason}"
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                self.offline_reason = str(getattr(exc, "reason", exc))
                reason = self.offline_reason
            else:
                digest = sha256_of(data)
                if digest == row.sha256:
                    return data
                reason = f"it has sha256 {digest}, not the pinned one (refused)"
        else:
            reason = f"not tried after an earlier download failed ({self.offline_reason})"
        raise UpstreamFileUnavailable(
            f"upstream reference file {row.file} (sha256 {row.sha256[:12]}...) is not available: "
            f"download of {url} failed: {reason}"
            + (f"; refused local copies: {'; '.join(refused)}" if refused else "")
            + f"; set ${ENV_DIR} to a folder holding the pinned files, or run `make upstream` where the URL "
            "is reachable"
        )

    def ensure_all(self, manifest: Manifest) -> list[Path]:
        """Every file of the manifest; one error naming the first file that failed and how many did."""
        paths: list[Path] = []
        failures: list[UpstreamFileUnavailable] = []
        for row in manifest.files:
            try:
                paths.append(self.ensure(row))
            except UpstreamFileUnavailable as exc:
                failures.append(exc)
        if failures:
            more = (
                f" ({len(failures) - 1} more of {len(manifest.files)} files likewise)"
                if len(failures) > 1
                else ""
            )
            raise UpstreamFileUnavailable(f"{failures[0]}{more}")
        return paths

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for origin in self.origins.values():
            counts[origin] = counts.get(origin, 0) + 1
        where = ", ".join(f"{n} from {origin}" for origin, n in sorted(counts.items()))
        return f"{len(self.origins)} upstream reference files verified in {self.cache} ({where})"


def _row_command(args: argparse.Namespace) -> int:
    local = Path(args.source) / args.file
    try:
        data = local.read_bytes()
    except OSError as exc:
        print(f"error: cannot read {local}: {exc.strerror}", file=sys.stderr)
        return 2
    row = Row(
        file=args.file,
        repository=args.repository,
        ref=args.ref,
        path=args.path,
        url=raw_url(args.repository, args.ref, args.path),
        sha256=sha256_of(data),
    )
    print(yaml.safe_dump([row.model_dump(exclude_defaults=True)], sort_keys=False).rstrip())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Place the upstream reference files in the cache, verified.")
    sub = parser.add_subparsers(dest="command")
    row = sub.add_parser("row", help="print the manifest row of a new file")
    row.add_argument("file", help="its name in the cache, folder/name")
    row.add_argument("--from", dest="source", required=True, help="a folder holding it under that name")
    row.add_argument("--repository", required=True)
    row.add_argument("--ref", required=True)
    row.add_argument("--path", required=True)
    args = parser.parse_args(argv)
    if args.command == "row":
        return _row_command(args)
    fetcher = Fetcher()
    try:
        fetcher.ensure_all(load_manifest())
    except UpstreamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(fetcher.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
