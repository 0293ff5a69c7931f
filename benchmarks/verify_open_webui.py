"""Run the pinned Open WebUI the way llmctl's pod runs it: non-root, read-only root filesystem, an emptyDir
at each place the render mounts one (issue 53, finding 8). `make verify-open-webui` (root on Linux, about
8 GB of disk for the package and its dependencies); not part of `make test`.

What it builds, and why it stands for the image (ghcr.io/open-webui/open-webui:<pinned tag>, which this
machine cannot pull):

- the release's own files: PyPI's sdist of the pinned version (its sha256 from the index) holds the
  repository at the tag: the Dockerfile, backend/ (what the image copies to /app/backend: `COPY ./backend .`)
  and backend/start.sh (the image's CMD); the wheel, installed into its own venv with its dependencies
  (requirements as the image's `uv pip install -r requirements.txt` installs them), holds the frontend
  build (`open_webui/frontend`, the image's /app/build);
- the image's file tree: a mount namespace whose root is an overlay of this machine's root, read-only, with
  /app laid out as the Dockerfile lays it out (backend/, build/, package.json, CHANGELOG.md; root-owned,
  world-readable, as `ARG UID=0` leaves them) and the venv at /opt/open-webui-venv on PATH, in front of
  the system's Python;
- the pod: from `build_manifests` for the catalog blueprint with `ui: open-webui`, its init containers
  then its Open WebUI container, each as the pod's user (setpriv, no capabilities, no new privileges),
  with the image's ENV (parsed from the Dockerfile) and the container's env, its WORKDIR and CMD, and a
  fresh empty directory (mode 0777, as an emptyDir) at each of its volume mounts. Secret values are made
  up here; PORT is the one change (a free port: other processes share this machine).

Then it waits for /health, fetches the frontend and a few routes, signs up the first account (a write to
the database), uploads a file, stops the server and records in benchmarks/results/open-webui-nonroot.json
what each volume holds and every "read-only file system" or "permission denied" line of the log. With
`--without VOLUME` it drops that volume (and, for llmctl's home volume, the HOME it sets) to show what
breaks without it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "open-webui-nonroot.json"
INDEX = "https://pypi.org/simple/open-webui/"
VENV_AT = "/opt/open-webui-venv"
#: lines of the server's log that show a write refused (EROFS, EACCES)
REFUSED = re.compile(r"read-only file system|permission denied|errno 30|errno 13", re.IGNORECASE)
#: the log's error lines (this machine reaches no Hugging Face Hub: the embedding model's download fails)
ERRORS = re.compile(r"\bERROR\b|Traceback")

Obj = dict[str, Any]


def pinned_version() -> str:
    from llmctl.blueprints.versions import versions

    return versions().images["open_webui"].image.rsplit(":", 1)[1].removeprefix("v")


def rendered_pod() -> tuple[str, Obj]:
    """(blueprint, pod spec) of the first catalog blueprint with Open WebUI, as `up` builds it."""
    from llmctl.blueprints.catalog import catalog_names, load_blueprint
    from llmctl.infra.workload.config import PlatformFacts, WorkloadConfig
    from llmctl.infra.workload.manifests import build_manifests

    for name in catalog_names():
        bp = load_blueprint(name)
        if bp.ui == "open-webui":
            config = WorkloadConfig(blueprint=bp, platform=PlatformFacts.for_blueprint(bp))
            for obj in build_manifests(config, hf_token=None):
                if obj["kind"] == "Deployment" and obj["metadata"]["name"].endswith("-open-webui"):
                    return name, obj["spec"]["template"]["spec"]
    raise SystemExit("no catalog blueprint with ui: open-webui")


def ensure_venv(venv: Path, version: str, python: str) -> None:
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('open-webui'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if installed != version:
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", f"open-webui=={version}"]
        subprocess.run(pip, check=True)


def fetch_sdist(version: str, cache: Path) -> tuple[Path, str]:
    """The release's sdist from PyPI, checked against the index's sha256, unpacked: (folder, sha256)."""
    page = urllib.request.urlopen(INDEX, timeout=60).read().decode()
    match = re.search(
        rf'href="([^"]*/open_webui-{re.escape(version)}\.tar\.gz)#sha256=([0-9a-f]{{64}})"', page
    )
    if not match:
        raise SystemExit(f"no sdist of open-webui {version} on {INDEX}")
    url, sha = match.groups()
    archive = cache / f"open_webui-{version}.tar.gz"
    if not archive.exists() or hashlib.sha256(archive.read_bytes()).hexdigest() != sha:
        archive.write_bytes(urllib.request.urlopen(url, timeout=600).read())
    if hashlib.sha256(archive.read_bytes()).hexdigest() != sha:
        raise SystemExit(f"{archive}: sha256 differs from the index's {sha}")
    folder = cache / f"open_webui-{version}"
    if not folder.exists():
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
    return folder, sha


def image_config(dockerfile: Path) -> tuple[dict[str, str], str, list[str]]:
    """(ENV, WORKDIR, CMD) of the Dockerfile's last stage, with its ARG defaults substituted."""
    # comment lines inside an instruction's continuation are dropped before the lines are joined
    lines = [line for line in dockerfile.read_text().splitlines() if not line.lstrip().startswith("#")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    args: dict[str, str] = {}
    global_args: dict[str, str] = {}
    env: dict[str, str] = {}
    workdir, cmd = "/", [""]
    in_stage = False

    def expand(value: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: {**args, **env}.get(m.group(1), ""), value)

    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        op = op.upper()
        if op == "FROM":
            in_stage, args, env = True, {}, {}
        elif op == "ARG":
            key, _, default = rest.partition("=")
            value = default.strip('"') if _ else global_args.get(key, "")
            (args if in_stage else global_args)[key] = value
        elif op == "ENV":
            for word in shlex.split(rest):
                key, _, value = word.partition("=")
                env[key] = expand(value)
        elif op == "WORKDIR":
            workdir = rest
        elif op == "CMD":
            cmd = json.loads(rest)
    return env, workdir, cmd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def container_env(
    image_env: dict[str, str], container: Obj, secrets: dict[str, str], dropped: str | None
) -> dict[str, str]:
    """The process's environment: the image's, then the container's (secretKeyRef: made-up values), but
    for the container's variables that point into the `dropped` mount path (the image's value stays)."""
    env = {
        "PATH": f"{VENV_AT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",  # python:3.11-slim's ENV
        "HOME": "/root",  # Docker's default for a user without a passwd entry is /; the Dockerfile sets /root
        **image_env,
    }
    for item in container.get("env", []):
        if dropped and "value" in item and (item["value"] + "/").startswith(dropped.rstrip("/") + "/"):
            continue
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets.setdefault(f"{ref['name']}/{ref['key']}", uuid.uuid4().hex)
    return env


def namespace_script(
    app: dict[str, Path], venv: Path, volumes: dict[str, Path], steps: list[str], newroot: Path, work: Path
) -> str:
    """The shell script that builds the pod's filesystem view in a private mount namespace and runs
    `steps` (each a command run chrooted there)."""
    upper, scratch = work / "upper", work / "overlay-work"
    lines = [
        "set -e",
        f"mount -t overlay overlay -o lowerdir=/,upperdir={upper},workdir={scratch} {newroot}",
        f"mkdir -p {newroot}/app/backend {newroot}/app/build {newroot}{VENV_AT}",
        f"cp {app['package.json']} {app['CHANGELOG.md']} {newroot}/app/",
        *(f"mkdir -p {newroot}{path}" for path in volumes),
        f"mount --bind {newroot} {newroot}",
        f"mount -o remount,bind,ro {newroot}",
        f"mount --bind -o ro {app['backend']} {newroot}/app/backend",
        f"mount -o remount,bind,ro {newroot}/app/backend",
        f"mount --bind {app['build']} {newroot}/app/build",
        f"mount -o remount,bind,ro {newroot}/app/build",
        f"mount --bind {venv} {newroot}{VENV_AT}",
        f"mount -o remount,bind,ro {newroot}{VENV_AT}",
        *(f"mount --bind {source} {newroot}{path}" for path, source in volumes.items()),
        f"mount --rbind /dev {newroot}/dev",
        f"mount --rbind /proc {newroot}/proc",
        f"mount --rbind /sys {newroot}/sys",
        *steps,
    ]
    return "\n".join(lines)


def run_as(newroot: Path, user: tuple[int, int], env: dict[str, str], workdir: str, argv: list[str]) -> str:
    command = " ".join(shlex.quote(a) for a in argv)
    inner = f"cd {shlex.quote(workdir)} && exec {command}"
    words = [
        "chroot",
        str(newroot),
        "/usr/bin/setpriv",
        f"--reuid={user[0]}",
        f"--regid={user[1]}",
        "--clear-groups",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "/usr/bin/env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        "/bin/sh",
        "-c",
        inner,
    ]
    return " ".join(shlex.quote(w) for w in words)


def get(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def exercise(base: str) -> Obj:
    """What the UI answers once healthy: the frontend, static files, the first signup, an upload."""
    found: Obj = {}
    status, body = get(base + "/health")
    found["health"] = {"status": status, "body": json.loads(body or b"null")}
    status, body = get(base + "/")
    title = re.search(rb"<title>(.*?)</title>", body)
    found["frontend"] = {"status": status, "title": title.group(1).decode() if title else None}
    for path in (
        "/static/loader.js",
        "/static/favicon.png",
        "/static/assets/pdf-style.css",
        "/manifest.json",
    ):
        found[path] = get(base + path)[0]
    status, body = get(base + "/api/config")
    found["api_config"] = {"status": status, "version": json.loads(body or b"{}").get("version")}
    account = {"name": "admin", "email": "admin@example.com", "password": uuid.uuid4().hex}
    status, body = get(
        base + "/api/v1/auths/signup", json.dumps(account).encode(), {"Content-Type": "application/json"}
    )
    token = json.loads(body or b"{}").get("token") if status == 200 else None
    found["signup"] = {"status": status, "role": json.loads(body or b"{}").get("role")}
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    found["session"] = get(base + "/api/v1/auths/", headers=auth)[0]
    boundary = uuid.uuid4().hex
    upload = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="note.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\nhello\r\n--{boundary}--\r\n"
    ).encode()
    headers = {**auth, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    found["upload"] = get(base + "/api/v1/files/?process=false", upload, headers)[0]
    return found


def tree_summary(folder: Path) -> Obj:
    """How many files a volume holds, their size, its top-level entries and up to 25 of its files."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    top = sorted({p.relative_to(folder).parts[0] for p in folder.rglob("*")})
    some = [str(p.relative_to(folder)) for p in files[:25]]
    return {
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "entries": top,
        "some_files": some,
    }


def run(venv: Path, sdist: Path, without: str | None, timeout: int) -> Obj:
    blueprint, pod = rendered_pod()
    image_env, workdir, cmd = image_config(sdist / "Dockerfile")
    user = (int(pod["securityContext"]["runAsUser"]), int(pod["securityContext"]["runAsGroup"]))
    assert all("emptyDir" in v for v in pod["volumes"]), pod["volumes"]
    webui = next(c for c in pod["containers"] if c["name"] == "open-webui")
    dropped = [m for m in webui["volumeMounts"] if m["name"] == without]
    if without and not dropped:
        raise SystemExit(f"the container mounts no volume {without!r}")
    port = free_port()
    secrets: dict[str, str] = {}
    site = next((venv / "lib").glob("python3*/site-packages"))
    app = {
        "backend": sdist / "backend",
        "build": site / "open_webui" / "frontend",
        "package.json": sdist / "package.json",
        "CHANGELOG.md": sdist / "CHANGELOG.md",
    }
    with tempfile.TemporaryDirectory(prefix="owui-pod-") as scratch:
        work = Path(scratch)
        for folder in ("upper", "overlay-work", "root", "volumes"):
            (work / folder).mkdir()
        sources = {v["name"]: work / "volumes" / v["name"] for v in pod["volumes"]}
        for source in sources.values():
            source.mkdir()
            source.chmod(0o777)
        steps, mounts = [], {}
        dropped_path = dropped[0]["mountPath"] if dropped else None
        for container in [*pod.get("initContainers", []), webui]:
            container_mounts = {
                m["mountPath"]: sources[m["name"]] for m in container["volumeMounts"] if m["name"] != without
            }
            if not container_mounts and container is not webui:
                continue  # an init container that only fills the dropped volume
            mounts |= container_mounts
            env = container_env(image_env, container, secrets, dropped_path)
            if container is webui:
                env["PORT"] = str(port)
            argv = container.get("command", []) + container.get("args", []) or cmd
            if container is not webui:
                steps.append(run_as(work / "root", user, env, workdir, argv))
            else:
                webui_env = env
                steps.append("exec " + run_as(work / "root", user, env, workdir, argv))
        script = namespace_script(app, venv, mounts, steps, work / "root", work)
        log_path = work / "server.log"
        started = time.monotonic()
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        base = f"http://127.0.0.1:{port}"
        healthy = None
        while time.monotonic() - started < timeout and process.poll() is None:
            if get(base + "/health")[0] == 200:
                healthy = round(time.monotonic() - started, 1)
                break
            time.sleep(2)
        answers = exercise(base) if healthy is not None else {}
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log_text = log_path.read_text(errors="replace")
        upper_files = sorted(str(p.relative_to(work / "upper")) for p in (work / "upper").rglob("*"))
        return {
            "blueprint": blueprint,
            "without": without,
            "user": list(user),
            "workdir": workdir,
            "command": cmd,
            "env": {k: "<from the Secret>" if k == "WEBUI_SECRET_KEY" else v for k, v in webui_env.items()},
            "volumes": {
                path: tree_summary(source)
                for path, source in mounts.items()
                if path in {m["mountPath"] for m in webui["volumeMounts"]}
            },
            "seconds_to_health": healthy,
            "answers": answers,
            "exit_code": process.returncode,
            "refused_writes": [line for line in log_text.splitlines() if REFUSED.search(line)][:40],
            "errors": [line[-300:] for line in log_text.splitlines() if ERRORS.search(line)][:20],
            "overlay_upper": upper_files,
            "log_tail": log_text.splitlines()[-15:] if healthy is None else [],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/owui"), help="Open WebUI's own venv")
    parser.add_argument(
        "--python", default="python3.11", help="interpreter for a new venv (the image's: 3.11)"
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/owui-src"), help="where the sdist goes")
    parser.add_argument("--without", action="append", default=[], help="also run without this volume")
    parser.add_argument("--timeout", type=int, default=600, help="seconds to wait for /health")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: it builds a mount namespace and switches to the pod's user")
    version = pinned_version()
    ensure_venv(options.venv, version, options.python)
    options.cache.mkdir(parents=True, exist_ok=True)
    sdist, sha = fetch_sdist(version, options.cache)
    result: Obj = {
        "open_webui": version,
        "sdist_sha256": sha,
        "python": subprocess.run(
            [str(options.venv / "bin" / "python"), "-V"], capture_output=True, text=True, check=True
        ).stdout.strip(),
        "run": run(options.venv, sdist, None, options.timeout),
        "without": {name: run(options.venv, sdist, name, options.timeout) for name in options.without},
    }
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result["run"].items() if k != "env"}, indent=2))


if __name__ == "__main__":
    main()
