"""Where Pulumi state lives and how its secrets are encrypted.

Default: a local file backend under llmctl's state directory (``file://<state>/pulumi``) with the
passphrase secrets provider, so no account is needed. Teams and CI pass ``--backend
s3://bucket/prefix`` (or set ``PULUMI_BACKEND_URL``). The passphrase comes from
``PULUMI_CONFIG_PASSPHRASE``, then ``PULUMI_CONFIG_PASSPHRASE_FILE``, then a file llmctl generates
once (user-only permissions) for the local backend.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from llmctl.errors import PrerequisiteError
from llmctl.state import state_dir

PASSPHRASE_FILE = "pulumi-passphrase"


@dataclass(frozen=True)
class Backend:
    """A resolved backend: the URL, the secrets provider and the env vars every pulumi call gets."""

    url: str
    secrets_provider: str | None
    env: dict[str, str] = field(default_factory=dict)
    passphrase_source: str | None = None
    notice: str | None = None

    @property
    def is_local(self) -> bool:
        return self.url.startswith("file://")

    def describe(self) -> str:
        """'file:///home/me/.local/state/llmctl/pulumi (passphrase from ...)' for messages."""
        return self.url + (f" (passphrase from {self.passphrase_source})" if self.passphrase_source else "")


def default_url() -> str:
    """file://<state dir>/pulumi (created with user-only permissions)."""
    folder = state_dir() / "pulumi"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"file://{folder}"


def passphrase_path() -> Path:
    """Where llmctl keeps a generated passphrase for the local backend."""
    return state_dir() / PASSPHRASE_FILE


def _generated_passphrase() -> tuple[Path, str | None]:
    """The generated passphrase file, created once with 0600 permissions; a notice when new."""
    path = passphrase_path()
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            path.chmod(0o600)
        return path, None
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32) + "\n")
    return path, (
        f"generated a Pulumi passphrase in {path} (readable only by you); it encrypts the secrets in "
        "your local stacks: back it up, or set PULUMI_CONFIG_PASSPHRASE to use your own"
    )


def resolve_backend(backend: str | None = None) -> Backend:
    """--backend, then PULUMI_BACKEND_URL, then the local file backend; plus the passphrase."""
    url = backend or os.environ.get("PULUMI_BACKEND_URL") or default_url()
    if url.startswith("file://"):
        Path(url[len("file://") :]).expanduser().mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {"PULUMI_BACKEND_URL": url, "PULUMI_SKIP_UPDATE_CHECK": "true"}
    cloud = url.startswith(("https://", "http://")) or url == "pulumi"
    if cloud:
        # Pulumi Cloud encrypts secrets itself; a passphrase is not needed.
        return Backend(url=url, secrets_provider=None, env=env)
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None:
        if not os.environ["PULUMI_CONFIG_PASSPHRASE"].strip():
            raise PrerequisiteError(
                "PULUMI_CONFIG_PASSPHRASE is set but empty: the stacks' secrets (the API key, the HF token) "
                "would be encrypted with no key at all",
                "set it to a long random secret, or unset it to use llmctl's generated passphrase file",
            )
        return Backend(url, "passphrase", env, "PULUMI_CONFIG_PASSPHRASE")
    given = os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if given:
        if not Path(given).expanduser().is_file():
            raise PrerequisiteError(
                f"PULUMI_CONFIG_PASSPHRASE_FILE points to {given}, which does not exist",
                "fix the path, or unset it to use llmctl's generated passphrase",
            )
        if not Path(given).expanduser().read_text(encoding="utf-8", errors="replace").strip():
            raise PrerequisiteError(
                f"PULUMI_CONFIG_PASSPHRASE_FILE points to {given}, which is empty: the stacks' secrets would "
                "be encrypted with no key at all",
                "put a long random secret in it, or unset it to use llmctl's generated passphrase file",
            )
        return Backend(url, "passphrase", {**env, "PULUMI_CONFIG_PASSPHRASE_FILE": given}, given)
    if not url.startswith("file://"):
        raise PrerequisiteError(
            f"the backend {url} needs a passphrase shared by everyone who uses it",
            "set PULUMI_CONFIG_PASSPHRASE (in CI: from a secret) or PULUMI_CONFIG_PASSPHRASE_FILE",
        )
    path, notice = _generated_passphrase()
    return Backend(url, "passphrase", {**env, "PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}, str(path), notice)


def recorded_stacks(backend: str | None, environment: str) -> list[str] | None:
    """The Pulumi stacks of an environment (`dev`, `dev.pr-42`, ...) in a local file backend, read from
    its files without the pulumi CLI; None when the backend is not a local folder (only the CLI can
    list it). The layout is Pulumi's file ("DIY") backend: `.pulumi/stacks/<project>/<stack>.json`
    (`.json.gz` when compressed; `.json.bak` is the copy a removed stack leaves, not a stack), and
    `.pulumi/stacks/<stack>.json` in its older layout without projects."""
    url = backend or os.environ.get("PULUMI_BACKEND_URL") or None
    if url is not None and not url.startswith("file://"):
        return None
    root = Path(url[len("file://") :]).expanduser() if url else state_dir() / "pulumi"
    stacks = root / ".pulumi" / "stacks"
    found = []
    for path in [*stacks.glob("*.json"), *stacks.glob("*.json.gz"), *stacks.glob("*/*.json*")]:
        name = path.name.removesuffix(".gz").removesuffix(".json")
        if path.name.endswith((".json", ".json.gz")) and (
            name == environment or name.startswith(f"{environment}.")
        ):
            found.append(f"{path.parent.name}/{name}" if path.parent != stacks else name)
    return sorted(set(found))
