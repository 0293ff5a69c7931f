"""The stand-in's backend folder: checkpoints, history, locks and the per-stack config file.

Layout (like the DIY backend): <backend>/.pulumi/stacks/<project>/<stack>.json (checkpoint),
<backend>/.pulumi/history/<project>/<stack>.json, <backend>/.pulumi/locks/organization/<project>/<stack>/*.json.
The stack's config and encryption salt live in Pulumi.<stack>.yaml in the workspace folder (cwd).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

FMT = "%Y-%m-%dT%H:%M:%S.%fZ"
# libyaml's parser and emitter when PyYAML was built with it: the same documents as the pure-Python
# ones, several times faster (every `pulumi config` call reads and writes Pulumi.<stack>.yaml)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=True)


class CliError(Exception):
    """An error the real CLI would print (message on stderr, exit code 255)."""

    def __init__(self, message: str, stdout: str = "", code: int = 255) -> None:
        super().__init__(message)
        self.message = message
        self.stdout = stdout
        self.code = code


def now() -> str:
    return datetime.now(timezone.utc).strftime(FMT)


def backend_root() -> Path:
    url = os.environ.get("PULUMI_BACKEND_URL", "")
    if not url.startswith("file://"):
        raise CliError(f"error: the stand-in engine only serves file:// backends, not {url!r}")
    return Path(url[len("file://") :]).expanduser()


def project_name() -> str:
    path = Path("Pulumi.yaml")
    if not path.exists():
        raise CliError(
            "error: no Pulumi.yaml project file found (searching upwards from the current directory)"
        )
    data = load_yaml(path.read_text()) or {}
    return str(data.get("name", ""))


def passphrase() -> str | None:
    if os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None:
        return os.environ["PULUMI_CONFIG_PASSPHRASE"]
    file = os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if file:
        return Path(file).read_text().strip()
    return None


def _check_value(phrase: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{phrase}".encode()).hexdigest()[:32]


class Stack:
    """One stack of one project in the backend."""

    def __init__(self, project: str, name: str) -> None:
        self.project = project
        self.name = name
        root = backend_root() / ".pulumi"
        self.checkpoint_path = root / "stacks" / project / f"{name}.json"
        self.history_path = root / "history" / project / f"{name}.json"
        self.lock_dir = root / "locks" / "organization" / project / name
        self.config_path = Path(f"Pulumi.{name}.yaml")

    # ---- existence, config, secrets ---------------------------------------------------------
    def exists(self) -> bool:
        return self.checkpoint_path.exists()

    def require(self) -> None:
        if not self.exists():
            raise CliError(f"error: no stack named '{self.name}' found")

    def init(self, secrets_provider: str | None) -> None:
        if self.exists():
            raise CliError(f"error: stack '{self.name}' already exists")
        salt = None
        if secrets_provider in (None, "passphrase"):
            phrase = passphrase()
            if phrase is None:
                raise CliError(
                    'error: constructing secrets manager of type "passphrase": passphrase must be set with '
                    "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
                )
            token = secrets.token_hex(8)
            salt = f"v1:{token}:{_check_value(phrase, token)}"
        self.save_checkpoint({"resources": [], "pending_operations": [], "outputs": {}, "salt": salt})
        self.save_history([])
        if salt:
            self.write_config({**self.read_config(), "encryptionsalt": salt})

    def read_config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            return {}
        return dict(load_yaml(self.config_path.read_text()) or {})

    def write_config(self, data: dict[str, Any]) -> None:
        self.config_path.write_text(dump_yaml(data))

    def unlock_secrets(self) -> None:
        """Fail like the CLI when the passphrase is missing or does not match the stack's salt."""
        salt = self.load().get("salt")
        if not salt:
            return
        phrase = passphrase()
        if phrase is None:
            raise CliError(
                'error: constructing secrets manager of type "passphrase": passphrase must be set with '
                "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
            )
        _, token, check = salt.split(":")
        if _check_value(phrase, token) != check:
            raise CliError(
                "error: getting secrets manager: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the "
                "correct passphrase or set PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase"
            )

    def config_values(self) -> tuple[dict[str, str], list[str]]:
        """The stack's config as the language runtime gets it: project:key -> value, and the secret keys."""
        config: dict[str, str] = {}
        secret_keys: list[str] = []
        for key, value in (self.read_config().get("config") or {}).items():
            if isinstance(value, dict) and "secure" in value:
                config[key] = str(value["secure"])
                secret_keys.append(key)
            else:
                config[key] = value if isinstance(value, str) else json.dumps(value)
        return config, secret_keys

    def set_config(self, values: list[tuple[str, str, bool]]) -> None:
        """Set (key, value, secret) entries in one read and one write of the config file."""
        data = self.read_config()
        config = data.setdefault("config", {})
        for key, value, secret in values:
            full = key if ":" in key else f"{self.project}:{key}"
            config[full] = {"secure": value} if secret else value
        self.write_config(data)

    # ---- checkpoint and history --------------------------------------------------------------
    def load(self) -> dict[str, Any]:
        self.require()
        return dict(json.loads(self.checkpoint_path.read_text()))

    def save_checkpoint(self, data: dict[str, Any]) -> None:
        self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.checkpoint_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(self.checkpoint_path)

    def history(self) -> list[dict[str, Any]]:
        if not self.history_path.exists():
            return []
        return list(json.loads(self.history_path.read_text()))

    def save_history(self, entries: list[dict[str, Any]]) -> None:
        self.history_path.parent.mkdir(parents=True, exist_ok=True)
        self.history_path.write_text(json.dumps(entries, indent=1))

    def record(self, kind: str, result: str, started: str, changes: dict[str, int]) -> None:
        entries = self.history()
        entries.append(
            {
                "kind": kind,
                "result": result,
                "startTime": started,
                "endTime": now(),
                "message": "",
                "environment": {"exec.kind": "auto.inline"},
                "config": {},
                "version": len(entries) + 1,
                "resourceChanges": changes,
            }
        )
        self.save_history(entries)

    def remove(self, *, force: bool, preserve_config: bool) -> None:
        data = self.load()
        if data["resources"] and not force:
            raise CliError(
                f"error: '{self.name}' still has resources; removal rejected. Possible actions:\n"
                f"- Make sure that '{self.name}' is the stack that you want to destroy\n"
                "- Run `pulumi destroy` to delete the resources, then run `pulumi stack rm`\n"
                "- Run `pulumi stack rm --force` to override this error"
            )
        self.checkpoint_path.unlink()
        self.history_path.unlink(missing_ok=True)
        if not preserve_config:
            self.config_path.unlink(missing_ok=True)

    # ---- locks -------------------------------------------------------------------------------
    def locks(self) -> list[Path]:
        return sorted(self.lock_dir.glob("*.json")) if self.lock_dir.exists() else []

    def lock(self) -> Path:
        held = self.locks()
        if held:
            raise CliError(
                f"error: the stack is currently locked by {len(held)} lock(s). Either wait for the other "
                "process(es) to end or delete the lock file with `pulumi cancel`.\n  "
                + "\n  ".join(f"file://{path}" for path in held)
            )
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        path = self.lock_dir / f"{uuid.uuid4()}.json"
        path.write_text(
            json.dumps(
                {"pid": os.getpid(), "username": "llmctl", "hostname": "standin", "timestamp": time.time()}
            )
        )
        return path

    def cancel(self) -> None:
        for path in self.locks():
            path.unlink()


def all_stacks() -> list[tuple[str, str, Path]]:
    base = backend_root() / ".pulumi" / "stacks"
    if not base.exists():
        return []
    return [
        (folder.name, file.stem, file)
        for folder in sorted(base.iterdir())
        for file in sorted(folder.glob("*.json"))
    ]
