"""The wheels a runtime lock leaves out, fetched once by the user's machine and served to the pods from
the cache bucket like the lock's wheelhouse (`wheelhouse.py`), so no pod reaches a package index.

A CPU build of torch is served only by PyTorch's CPU index (a lock's `<lock>.outside.txt`: the index
option and the pin, from `outside_lock` in serving/locks/locks.yaml), which the lock resolver does not
read, so the lock cannot carry its hash. At the stack's first `up` (wheel delivery on EKS) this machine runs `pip download` of that file's
arguments for the image's interpreter (the same `--only-binary=:all: --implementation cp
--python-version --platform` as the lock's wheelhouse), with the lock's versions and the image's
packages as constraints. What the lock or the image already provides is dropped; each remaining wheel's
sha256 is recorded in the stack's state (`llmctl.state.StackPins.wheels`), and a requirements file pins
each of them by that hash. The folder goes to the cache bucket under
``llmctl/wheelhouse/<sha256 of that requirements file>/`` (the requirements file last: a prefix with it is
complete). The pods copy it beside the lock's wheelhouse and install both in one
`--no-index --require-hashes` run (`delivery.install_script`).

A later `up` rebuilds the requirements file from the record: when its prefix is in the bucket nothing is
downloaded; when it is not (a new bucket), the download must give the same files with the same hashes,
else `up` stops (the index now serves other bytes under the recorded names).
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmctl.errors import CloudError, LlmctlError, PrerequisiteError
from llmctl.infra.workload.delivery.serving_code import outside_lock_args
from llmctl.infra.workload.delivery.wheelhouse import LOCK_FILE, WHEELHOUSE_PREFIX, pip_download_for
from llmctl.serving.lockfiles import LockSpec, locks, normalize, parse_lock, requirement_names
from llmctl.state import load_pins, pins_path, save_pins


def _name_version(file: str) -> tuple[str, str]:
    """(normalised project, version) of a wheel file name (PEP 427: name-version[-build]-py-abi-plat)."""
    parts = file.removesuffix(".whl").split("-")
    return normalize(parts[0]), parts[1]


def requirements_text(spec: LockSpec, wheels: dict[str, str]) -> str:
    """The requirements file pinning each recorded wheel (file -> sha256) by its hash."""
    lines = [
        f"# What the {spec.name} lock leaves out ({', '.join(sorted(spec.outside_lock))} and what it needs), "
        "downloaded by a first `llmctl up`; generated, do not edit."
    ]
    for file in sorted(wheels):
        name, version = _name_version(file)
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{wheels[file]}")
    return "\n".join(lines) + "\n"


def outside_key(spec: LockSpec, wheels: dict[str, str]) -> str:
    """The content-addressed prefix of these wheels in the cache bucket (no trailing slash)."""
    digest = hashlib.sha256(requirements_text(spec, wheels).encode()).hexdigest()
    return f"{WHEELHOUSE_PREFIX}/{digest}"


def download(spec: LockSpec, out_dir: Path, args: list[str] | None = None) -> dict[str, str]:
    """Download what the lock leaves out (and what that needs) for the image; {file: sha256} of the
    wheels neither the lock nor the image provides (the others are deleted)."""
    table = locks()
    base = table.base(spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    pinned = parse_lock(spec.path.read_text(encoding="utf-8"))
    provided = set(requirement_names(table.constraints_path(spec)))
    constraints = out_dir.parent / f"{spec.name}-constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, (version, _) in sorted(pinned.items())))
    cmd = [
        *pip_download_for(spec),
        "-c",
        str(constraints),
        "-c",
        str(table.constraints_path(spec)),
        *(outside_lock_args(spec) if args is None else args),
        "-d",
        str(out_dir),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise PrerequisiteError(
            f"could not download what the {spec.name} lock leaves out ({', '.join(spec.outside_lock)}) for "
            f"Python {base.python}",
            (done.stderr or done.stdout).strip()[-400:]
            or f"check the network (the index in {spec.outside_path.name})",
        )
    wheels: dict[str, str] = {}
    for wheel in sorted(out_dir.glob("*.whl")):
        name, _ = _name_version(wheel.name)
        if name in pinned or name in provided:
            wheel.unlink()  # the lock's wheelhouse has it, or the image ships it
            continue
        wheels[wheel.name] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return wheels


def recorded_outside(config: Any, spec: LockSpec, bucket: str) -> str | None:
    """s3:// prefix of the wheels `spec` leaves out as the stack recorded them (no download, no S3
    call: `preview`); None when nothing was recorded or the lock leaves nothing out."""
    wheels = load_pins(config.stack, config.blueprint.name).wheels if spec.outside_lock else {}
    return f"s3://{bucket}/{outside_key(spec, wheels)}/" if wheels else None


def deliver_outside(
    config: Any,
    spec: LockSpec,
    bucket: str,
    note: Callable[[str], None],
    *,
    args: list[str] | None = None,
) -> str | None:
    """s3:// prefix of the wheels `spec` leaves out, downloaded at the stack's first `up` and recorded
    in its state; None when the lock leaves nothing out. `args` replaces the outside file's (tests)."""
    if not spec.outside_lock:
        return None
    import boto3

    stack, blueprint = config.stack, config.blueprint.name
    region = config.platform.region
    recorded = load_pins(stack, blueprint)
    s3 = boto3.client("s3", region_name=region)
    if recorded.wheels and _complete(s3, bucket, outside_key(spec, recorded.wheels)):
        prefix = outside_key(spec, recorded.wheels)
        note(
            f"    reusing s3://{bucket}/{prefix}/ (what the {spec.name} lock leaves out, as this stack recorded)"
        )
        return f"s3://{bucket}/{prefix}/"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "outside"
        wheels = download(spec, folder, args)
        if recorded.wheels and wheels != recorded.wheels:
            changed = sorted(set(wheels.items()) ^ set(recorded.wheels.items()))
            raise LlmctlError(
                f"the index now serves other files for what the {spec.name} lock leaves out than stack "
                f"{stack} recorded: {', '.join(sorted({file for file, _ in changed}))}",
                f"check the index; to take the new files, delete their entries under `wheels` in "
                f"{pins_path(stack, blueprint)} and run `llmctl up` again",
            )
        prefix = outside_key(spec, wheels)
        (folder / LOCK_FILE).write_text(requirements_text(spec, wheels), encoding="utf-8")
        _upload(s3, bucket, prefix, folder)
    save_pins(stack, blueprint, dataclasses.replace(recorded, wheels=wheels))
    note(
        f"    uploaded s3://{bucket}/{prefix}/ (what the {spec.name} lock leaves out: "
        f"{', '.join(sorted(wheels))}; sha256 recorded for stack {stack})"
    )
    return f"s3://{bucket}/{prefix}/"


def pinned_requirements(
    config: Any,
    spec: LockSpec,
    note: Callable[[str], None],
    *,
    fetch: bool = True,
    args: list[str] | None = None,
) -> str | None:
    """An existing cluster (configmap mode, no bucket): the hash-pinned requirements of what `spec` leaves
    out, from the stack's record; at its first `up` (`fetch`) downloaded on this machine and recorded as
    on EKS, so the pods install exactly those files from the index (issue 53, finding 5). None when the
    lock leaves nothing out, or (not fetching: `preview`) nothing was recorded yet."""
    if not spec.outside_lock:
        return None
    stack, blueprint = config.stack, config.blueprint.name
    recorded = load_pins(stack, blueprint)
    if recorded.wheels:
        return requirements_text(spec, recorded.wheels)
    if not fetch:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        wheels = download(spec, Path(tmp) / "outside", args)
    save_pins(stack, blueprint, dataclasses.replace(recorded, wheels=wheels))
    note(
        f"    pinned what the {spec.name} lock leaves out by sha256 ({', '.join(sorted(wheels))}; recorded for "
        f"stack {stack}): the pods install exactly these files from the index"
    )
    return requirements_text(spec, wheels)


def _complete(s3: Any, bucket: str, prefix: str) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return bool(s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{LOCK_FILE}").get("KeyCount"))
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not list s3://{bucket}/{prefix}/: {error}", "check your AWS credentials (s3:ListBucket)"
        ) from None


def _upload(s3: Any, bucket: str, prefix: str, folder: Path) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        for wheel in sorted(folder.glob("*.whl")):
            s3.upload_file(str(wheel), bucket, f"{prefix}/{wheel.name}")
        s3.upload_file(str(folder / LOCK_FILE), bucket, f"{prefix}/{LOCK_FILE}")  # last: complete
    except (BotoCoreError, ClientError) as error:
        raise CloudError(
            f"could not upload to s3://{bucket}/{prefix}/: {error}",
            "check your AWS credentials (s3:PutObject on the cache bucket), or push an image: "
            "llmctl images build --push",
        ) from None
