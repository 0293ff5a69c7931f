"""ray-vllm's compile cache: what the engine compiles at its first start, restored from and
published to S3 (on Neuron NxD Inference's artifacts; on NVIDIA GPUs vLLM's own caches).

On NVIDIA GPUs (:func:`gpu_cache_env`) the folder holds every cache a vLLM start fills: vLLM's
torch.compile cache (``VLLM_CACHE_ROOT``), Inductor's (``TORCHINDUCTOR_CACHE_DIR``), Triton's kernels
(``TRITON_CACHE_DIR``), FlashInfer's JIT builds and autotune results (``FLASHINFER_WORKSPACE_BASE``)
and the CUDA driver's PTX cache (``CUDA_CACHE_PATH``). Measured on an H200 (vLLM 0.26.0, 2026-11-28,
benchmarks/results/gpu.json): ready 200.9 s after a first start, 59.6 s after a restart on that
folder (engine init 116.6 s -> 13.2 s). Compiled kernels depend on the GPU model, so the key names it.

On the pinned image (vLLM 0.13 + the vllm-neuron plugin, Neuron SDK 2.27) the plugin compiles the
model through NxD Inference. When ``$NEURON_COMPILED_ARTIFACTS`` names a directory it first tries
to load compiled artifacts from there and, only if that fails, compiles and saves them there; the
loaded artifacts win over any differing engine setting (the plugin ignores its
``override_neuron_config`` then). Nothing inside the directory says which configuration it was
compiled for, so the directory is named by :class:`VllmCompileKey`, which spells out every setting
that changes the graphs (model, revision, tp, dtype, batch, max model length, SDK, vLLM version)
and a digest of all engine settings.

:class:`NeuronCompileCache` runs in the replica, around the engine start:

- :meth:`~NeuronCompileCache.prepare` (before the engine starts): a complete local directory is
  used as is; else a complete S3 copy (``<url>/<key>/`` with its ``.llmctl-compiled`` manifest,
  every listed file present at its size) is downloaded; a prefix without the manifest (an upload
  cut short) or with files missing is ignored with a warning. Otherwise this replica takes the
  key's lock (:mod:`llmctl.serving.compile_lock`) and compiles; when another replica holds it,
  this one waits up to ``wait_s`` for its upload, then compiles on its own without publishing.
- :meth:`~NeuronCompileCache.finish` (after the engine started): a replica that compiled writes
  the local manifest and, if it holds the lock, uploads the directory with the manifest object
  written last, then releases the lock. A failed start only releases the lock.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmctl.blueprints.schema import Blueprint
from llmctl.serving.compile_cache import COMPILE_CACHE_URL_ENV, COMPILED_MARKER, compile_cache_url, slug
from llmctl.serving.phases import log_phase
from llmctl.serving.s3_sync import S3, parse_s3_uri, s3_errors

ARTIFACTS_ENV = "NEURON_COMPILED_ARTIFACTS"  # read by the vllm-neuron plugin (NxD Inference model loader)
DIR_ENV = "LLMCTL_COMPILE_DIR"  # the folder on NVIDIA GPUs, where no engine variable names one folder
KEY_ENV = "LLMCTL_COMPILE_KEY"
WAIT_ENV = "LLMCTL_COMPILE_WAIT_S"
DEFAULT_ROOT = "/tmp/llmctl-neuron/vllm"
GPU_ROOT = "/tmp/llmctl-compile/vllm"
DEFAULT_WAIT_S = 1800.0  # then compile alone: Ray Serve LLM allows an engine start one hour
POLL_S = 15.0
_EXPECTED = "s3://<cache bucket>/neuron-cache/<blueprint>"

logger = logging.getLogger("llmctl.serving.compile")


@dataclass(frozen=True)
class VllmCompileKey:
    """Everything that changes the graphs NxD Inference compiles for vLLM on Neuron."""

    model_id: str
    revision: str
    tp_degree: int
    dtype: str
    batch_size: int
    max_model_len: int
    neuron_sdk: str | None
    vllm: str | None
    digest: str
    gpu: str | None = None  # NVIDIA only: Ray's name of the GPU model (kernels are built per architecture)
    cuda: str | None = None

    @property
    def name(self) -> str:
        """The folder / S3 prefix name of this configuration."""
        head = (
            f"{slug(self.model_id)}@{slug(self.revision)}-tp{self.tp_degree}-{self.dtype}-b{self.batch_size}"
        )
        if self.gpu is not None:
            platform = f"gpu{slug(self.gpu)}-cuda{self.cuda or 'unknown'}"
        else:
            platform = f"sdk{self.neuron_sdk or 'unknown'}"
        return f"{head}-n{self.max_model_len}-{platform}-vllm{self.vllm or 'unknown'}-{self.digest}"


def vllm_compile_key(
    blueprint: Blueprint, engine_kwargs: dict[str, Any], *, gpu: str | None = None
) -> VllmCompileKey:
    """The key of a ray-vllm blueprint with its ``engine_kwargs`` (all of them go into the digest);
    ``gpu``: the NVIDIA GPU model, which names the key's platform instead of the Neuron SDK."""
    # the exact model id and revision too: two ids can slug to one name (`org-a/model`, `org/a-model`)
    exact = {"model": blueprint.model.id, "revision": blueprint.model.revision, "engine": engine_kwargs}
    canonical = json.dumps(exact, sort_keys=True, separators=(",", ":"), default=str)
    return VllmCompileKey(
        model_id=blueprint.model.id,
        revision=blueprint.model.revision,
        tp_degree=blueprint.compute.tensor_parallel,
        dtype=blueprint.model.dtype,
        batch_size=int(engine_kwargs.get("max_num_seqs", blueprint.model.batch_size)),
        max_model_len=int(engine_kwargs.get("max_model_len", blueprint.model.max_context)),
        neuron_sdk=blueprint.image.neuron_sdk,
        vllm=blueprint.image.vllm,
        digest=hashlib.sha256(canonical.encode()).hexdigest()[:10],
        gpu=gpu,
        cuda=blueprint.image.cuda if gpu is not None else None,
    )


def artifacts_dir(key: VllmCompileKey, root: str | None = None) -> Path:
    """Where a replica keeps the artifacts of ``key`` (``$NEURON_COMPILED_ARTIFACTS``)."""
    return Path(root or DEFAULT_ROOT) / key.name


def gpu_model(blueprint: Blueprint) -> str:
    """The GPU model of the blueprint's instance type (the hardware catalog's name, e.g. A100-80GB):
    compiled kernels are built for one architecture, so it is part of the key."""
    from llmctl.blueprints.hardware import hardware
    from llmctl.errors import CatalogError

    try:
        return hardware().instance(blueprint.compute.instance_type).accelerator_name or "unknown"
    except CatalogError:
        return "unknown"


def gpu_cache_env(key: VllmCompileKey, root: str | None = None) -> dict[str, str]:
    """The replica's environment on NVIDIA GPUs: every cache a vLLM start fills, under the key's folder.

    The variables are the engines' own: vLLM's ``VLLM_CACHE_ROOT`` (vllm/envs.py), PyTorch Inductor's
    ``TORCHINDUCTOR_CACHE_DIR``, Triton's ``TRITON_CACHE_DIR``, FlashInfer's
    ``FLASHINFER_WORKSPACE_BASE`` (flashinfer/jit/env.py: its JIT builds go to
    ``<base>/.cache/flashinfer``) and the CUDA driver's ``CUDA_CACHE_PATH``.
    """
    folder = Path(root or GPU_ROOT) / key.name
    return {
        DIR_ENV: str(folder),
        KEY_ENV: key.name,
        "VLLM_CACHE_ROOT": str(folder / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
        "TRITON_CACHE_DIR": str(folder / "triton"),
        "FLASHINFER_WORKSPACE_BASE": str(folder / "flashinfer"),
        "CUDA_CACHE_PATH": str(folder / "cuda"),
    }


def local_files(directory: Path) -> dict[str, int]:
    """Relative path -> size of every file under ``directory`` but the marker."""
    found: dict[str, int] = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if path.is_file() and relative != COMPILED_MARKER:
            found[relative] = path.stat().st_size
    return found


def manifest(directory: Path, key_name: str) -> bytes:
    """The marker's body: the key and every file with its size (checked before a download)."""
    return json.dumps({"key": key_name, "files": local_files(directory)}, sort_keys=True).encode()


@dataclass(frozen=True)
class Remote:
    """What S3 holds under a key's prefix: ``absent``, ``partial`` (no marker), ``corrupt`` or ``complete``."""

    state: str
    keys: list[str]
    detail: str = ""


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


class NeuronCompileCache:
    """The compile cache of one replica for one key (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        key_name: str,
        base_url: str | None,
        *,
        owner: str,
        wait_s: float = DEFAULT_WAIT_S,
        poll_s: float = POLL_S,
        stale_s: float | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = _sleep,
    ) -> None:
        self.directory = directory
        self.key_name = key_name
        self.base_url = base_url
        self.owner = owner
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.stale_s = stale_s
        self.clock = clock
        self.sleep = sleep
        self.source = ""  # "local", "s3" or "compile" after prepare()
        self.published = False
        self._lock: Any = None
        if base_url:
            self.bucket, base = parse_s3_uri(base_url, variable=COMPILE_CACHE_URL_ENV, expected=_EXPECTED)
            self.prefix = f"{base}/{key_name}".strip("/")

    # ---- S3 -------------------------------------------------------------------------------
    def _s3(self) -> S3:
        return S3("the S3 compile cache")

    def _hint(self) -> str:
        return (
            f"check that the bucket {self.bucket} exists and that the pod's role may s3:ListBucket, "
            "s3:GetObject, s3:PutObject and s3:DeleteObject under neuron-cache/"
        )

    def remote(self, s3: S3) -> Remote:
        """The state of the key's prefix in S3."""
        sizes = s3.sizes(self.bucket, self.prefix)
        marker = f"{self.prefix}/{COMPILED_MARKER}"
        if not sizes:
            return Remote("absent", [])
        if marker not in sizes:
            return Remote(
                "partial", list(sizes), f"{len(sizes)} object(s) without the {COMPILED_MARKER} manifest"
            )
        body = s3.client.get_object(Bucket=self.bucket, Key=marker)["Body"].read()
        try:
            listed = {str(k): int(v) for k, v in json.loads(body)["files"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return Remote("corrupt", list(sizes), f"unreadable {COMPILED_MARKER} manifest")
        if not listed:
            return Remote("corrupt", list(sizes), "the manifest lists no files")
        for relative, size in listed.items():
            actual = sizes.get(f"{self.prefix}/{relative}")
            if actual != size:
                found = "missing" if actual is None else f"{actual} bytes, manifest says {size}"
                return Remote("corrupt", list(sizes), f"{relative}: {found}")
        return Remote("complete", [f"{self.prefix}/{r}" for r in listed] + [marker])

    def _lock_for(self, s3: S3) -> Any:
        from llmctl.serving.compile_lock import DEFAULT_STALE_S, S3Lock

        return S3Lock(
            s3.client,
            s3.errors,
            self.bucket,
            f"{self.prefix}.lock",
            self.owner,
            stale_s=self.stale_s if self.stale_s is not None else DEFAULT_STALE_S,
            clock=self.clock,
        )

    # ---- the two hooks --------------------------------------------------------------------
    def prepare(self) -> str:
        """Make the artifacts directory ready before the engine starts; returns where they came from."""
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        if (self.directory / COMPILED_MARKER).is_file():
            self.source = "local"
        elif not self.base_url:
            self.source = "compile"
        else:
            with s3_errors(f"s3://{self.bucket}/{self.prefix}", "read the compile cache", self._hint()):
                self.source = self._from_s3()
        if self.source == "compile":
            log_phase("compile", "start", key=self.key_name, writer=self._lock is not None)
        else:
            log_phase("compile", "hit", key=self.key_name, source=self.source)
        return self.source

    def _from_s3(self) -> str:
        s3 = self._s3()
        deadline = self.clock() + self.wait_s
        said_waiting = warned = False
        while True:
            found = self.remote(s3)
            if found.state == "complete":
                return self._download(s3, found)
            if found.state in ("partial", "corrupt") and not warned:
                logger.warning(
                    "ignoring the compile cache at s3://%s/%s (%s: %s); compiling instead",
                    self.bucket,
                    self.prefix,
                    found.state,
                    found.detail,
                )
                warned = True
            lock = self._lock_for(s3)
            if lock.acquire():
                again = self.remote(s3)  # published between our look and our lock?
                if again.state == "complete":
                    lock.release()
                    return self._download(s3, again)
                self._lock = lock
                return "compile"
            if self.clock() >= deadline:
                holder = lock.holder()
                logger.warning(
                    "%s still compiles %s after %.0fs; compiling here too, without publishing",
                    holder.owner if holder else "another replica",
                    self.key_name,
                    self.wait_s,
                )
                return "compile"
            if not said_waiting:
                holder = lock.holder()
                logger.info(
                    "waiting for %s to publish %s",
                    holder.owner if holder else "another replica",
                    self.key_name,
                )
                said_waiting = True
            self.sleep(self.poll_s)

    def _download(self, s3: S3, found: Remote) -> str:
        s3.download_prefix(self.bucket, self.prefix, found.keys, self.directory, COMPILED_MARKER)
        return "s3"

    def finish(self, ok: bool) -> None:
        """After the engine start: save and publish what was compiled (``ok``), release the lock."""
        try:
            if ok and self.source == "compile":
                body = manifest(self.directory, self.key_name)
                if self.directory.is_dir():
                    (self.directory / COMPILED_MARKER).write_bytes(body)
                if self._lock is not None:
                    self.published = self._publish(body)
            if self.source == "compile":
                log_phase("compile", "done" if ok else "failed", key=self.key_name, published=self.published)
        finally:
            if self._lock is not None:
                with s3_errors(
                    f"s3://{self.bucket}/{self.prefix}", "release the compile cache lock", self._hint()
                ):
                    self._lock.release()
                self._lock = None

    def _publish(self, body: bytes) -> bool:
        uri = f"s3://{self.bucket}/{self.prefix}"
        with s3_errors(uri, "write the compile cache", self._hint()):
            s3 = self._s3()
            found = self.remote(s3)
            if found.state == "complete":
                return False
            marker = f"{self.prefix}/{COMPILED_MARKER}"
            if marker in found.keys:  # a corrupt copy: it stops counting as complete first
                s3.client.delete_object(Bucket=self.bucket, Key=marker)
            s3.upload_dir(self.directory, self.bucket, self.prefix, COMPILED_MARKER, marker_body=body)
        logger.info("published compiled artifacts to %s", uri)
        return True


def cache_from_env(environ: dict[str, str] | None = None) -> NeuronCompileCache | None:
    """The replica's cache from its folder (``$NEURON_COMPILED_ARTIFACTS`` on Neuron,
    ``$LLMCTL_COMPILE_DIR`` on NVIDIA GPUs), ``$LLMCTL_COMPILE_KEY`` and ``$LLMCTL_COMPILE_CACHE_URL``
    (None where no folder and key are set)."""
    env = os.environ if environ is None else environ
    directory = (env.get(ARTIFACTS_ENV, "") or env.get(DIR_ENV, "")).strip()
    key_name = env.get(KEY_ENV, "").strip()
    if not directory or not key_name:
        return None
    owner = f"{env.get('HOSTNAME', 'replica')}/{os.getpid()}"
    wait_s = float(env.get(WAIT_ENV, "") or DEFAULT_WAIT_S)
    url = env.get(COMPILE_CACHE_URL_ENV, "").strip()
    base = compile_cache_url(url) if url else None
    return NeuronCompileCache(Path(directory), key_name, base, owner=owner, wait_s=wait_s)
