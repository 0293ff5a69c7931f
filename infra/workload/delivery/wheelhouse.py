"""The wheelhouse of a runtime lock: every wheel the pods install, fetched from S3, none from an index.

`up` downloads the wheels of the runtime's lock (``serving/locks/<lock>.txt``) for the base image's
interpreter (`pip download --only-binary=:all: --platform ... --python-version ... --require-hashes`),
puts the lock beside them as ``requirements.txt``, and uploads the folder once to the platform's
cache bucket under ``llmctl/wheelhouse/<sha256 of the lock>/`` (the lock pins every file's hash, so
its digest names the contents). The lock is uploaded last: a prefix with it is complete. A pod's init
container copies that prefix next to the llmctl wheel; the serving container installs with
`--no-index --find-links --require-hashes` (:func:`llmctl.infra.workload.delivery.serving_code.install_script`),
so a restart needs only S3.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from llmctl.errors import CloudError, PrerequisiteError
from llmctl.serving.lockfiles import LockSpec, locks

WHEELHOUSE_PREFIX = "llmctl/wheelhouse"
#: the lock's file name inside a wheelhouse
LOCK_FILE = "requirements.txt"
#: the oldest glibc a manylinux wheel can name (manylinux2014 = manylinux_2_17)
_OLDEST_GLIBC = 17


def lock_digest(spec: LockSpec) -> str:
    """sha256 of the lock file: it pins every wheel by hash, so it names the wheelhouse's contents."""
    return hashlib.sha256(spec.path.read_bytes()).hexdigest()


def wheelhouse_key(spec: LockSpec) -> str:
    """The wheelhouse's content-addressed prefix in the cache bucket (no trailing slash)."""
    return f"{WHEELHOUSE_PREFIX}/{lock_digest(spec)}"


def pip_platforms(platform: str) -> list[str]:
    """`pip download --platform` values for a uv platform such as ``x86_64-manylinux_2_35``.

    pip expands only the legacy names (manylinux2014/2010) to older ones, not ``manylinux_2_N``
    (pypa/pip src/pip/_internal/utils/compatibility_tags.py, ``_get_custom_platforms``), so every
    glibc from the image's down to 2.17 is named, then manylinux2014 (which pip expands further).
    """
    arch, _, tag = platform.partition("-")
    glibc = int(tag.rsplit("_", 1)[-1]) if tag.startswith("manylinux_2_") else _OLDEST_GLIBC
    return [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, _OLDEST_GLIBC - 1, -1)] + [
        f"manylinux2014_{arch}"
    ]


def pip_download_for(spec: LockSpec, python: str | None = None) -> list[str]:
    """`pip download` of wheels for the lock's base image: its interpreter and platforms (`python`:
    another version, tests); the caller adds what to download."""
    base = locks().base(spec)
    version = (python or base.python).replace(".", "")
    platforms = [arg for tag in pip_platforms(base.platform) for arg in ("--platform", tag)]
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        version,
        *platforms,
    ]


def download_command(spec: LockSpec, out_dir: Path, python: str | None = None) -> list[str]:
    """The `pip download` of a lock's wheels for its base image (`python`: another version, tests)."""
    return [
        *pip_download_for(spec, python),
        "--no-deps",
        "--require-hashes",
        "-r",
        str(spec.path),
        "-d",
        str(out_dir),
    ]


def build_wheelhouse(spec: LockSpec, out_dir: Path, python: str | None = None) -> Path:
    """The lock's wheels and the lock (as ``requirements.txt``) in `out_dir` (needs the index)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        download_command(spec, out_dir, python), capture_output=True, text=True, timeout=1200
    )
    if done.returncode != 0:
        raise PrerequisiteError(
            f"could not download the wheels of the {spec.name} lock for Python {python or locks().base(spec).python}",
            (done.stderr or done.stdout).strip()[-400:] or "check the network (the package index)",
        )
    shutil.copyfile(spec.path, out_dir / LOCK_FILE)
    return out_dir


def upload_wheelhouse(
    region: str, bucket: str, spec: LockSpec, build: Path | None = None
) -> tuple[str, bool]:
    """(prefix, uploaded): the wheelhouse at its content-addressed prefix, built and written once.

    A prefix that already has the lock, byte for byte (its sha256 names the prefix), is complete (the
    lock goes last): nothing is downloaded or written. A lock object with other bytes is replaced with
    the whole wheelhouse (the pods refuse such a lock; pip refuses any wheel the lock does not hash). Otherwise the wheels are downloaded into `build` (a temporary folder by default).
    """
    import tempfile

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = wheelhouse_key(spec)
    s3 = boto3.client("s3", region_name=region)
    try:
        if s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{LOCK_FILE}").get("KeyCount"):
            there = s3.get_object(Bucket=bucket, Key=f"{prefix}/{LOCK_FILE}")["Body"].read()
            if hashlib.sha256(there).hexdigest() == lock_digest(spec):
                return prefix, False
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not read s3://{bucket}/{prefix}/: {error}",
            "check your AWS credentials (s3:ListBucket, s3:GetObject)",
        ) from None
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_wheelhouse(spec, build or Path(tmp))
        _upload(s3, bucket, prefix, spec, folder)
    return prefix, True


def _upload(s3: object, bucket: str, prefix: str, spec: LockSpec, folder: Path) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    client: Any = s3
    try:
        for wheel in sorted(folder.glob("*.whl")):
            client.upload_file(str(wheel), bucket, f"{prefix}/{wheel.name}")
        client.upload_file(str(folder / LOCK_FILE), bucket, f"{prefix}/{LOCK_FILE}")
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not upload the {spec.name} wheelhouse to s3://{bucket}/{prefix}/: {error}",
            "check your AWS credentials (s3:PutObject on the cache bucket), or push an image: "
            "llmctl images build --push",
        ) from None
