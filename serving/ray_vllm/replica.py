"""What the ray-vllm replica adds around Ray Serve LLM's engine start: phase lines and the Neuron
compile cache. Plain async functions, called by the thin Ray subclasses in :mod:`.hooks` (which
import Ray's internals) and tested without Ray or vLLM.

Order inside Ray Serve LLM's ``VLLMEngine.start()``: the node-init callback's "before" hook, the
model download (or S3 mirror sync), its "after" hook, then the engine (vLLM + vllm-neuron, which
compiles or loads through NxD Inference). So: ``weights`` start/done bracket the download,
:func:`after_weights` restores or locks the compile cache, and :func:`start_engine` wraps the whole
start to publish what was compiled and log ``engine`` done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from llmctl.serving.model_mirror import check_copy, check_listing
from llmctl.serving.phases import log_phase
from llmctl.serving.ray_vllm.neuron_cache import NeuronCompileCache, cache_from_env


def before_weights(source: str) -> None:
    """The model download starts (``source``: the hub id, a local path or the S3 mirror); a mirror
    holding a file the pinned revision does not have is refused before Ray Serve LLM writes anything
    (it names its local folder after a ``hash`` object of the prefix)."""
    log_phase("weights", "start", source=source)
    if source.startswith("s3://"):
        check_listing(source)


async def after_weights(source: str, local_dir: str | None = None) -> NeuronCompileCache | None:
    """The weights are on the node (in ``local_dir``, where Ray Serve LLM put them): check the files of
    an S3 mirror against the Hub's checksums in the pod's spec (not hashed again when a replica
    checked the same files against the same checksums before: ``verified_copy``), then restore the
    compiled artifacts, or lock the key to compile them."""
    if source.startswith("s3://"):
        await asyncio.to_thread(check_copy, local_dir, source)
    log_phase("weights", "done", source=source)
    cache = cache_from_env()
    if cache is not None:
        await asyncio.to_thread(cache.prepare)
    return cache


async def start_engine(
    start: Callable[[], Awaitable[None]], cache: Callable[[], NeuronCompileCache | None]
) -> None:
    """Run Ray Serve LLM's engine start; then publish (or give up) the compile and log ``engine``."""
    try:
        await start()
    except BaseException:
        found = cache()
        if found is not None:
            await asyncio.to_thread(found.finish, False)
        log_phase("engine", "failed")
        raise
    found = cache()
    if found is not None:
        await asyncio.to_thread(found.finish, True)
    log_phase("engine", "done")


class HealthOnce:
    """Logs ``healthy`` at the first health check that passed."""

    def __init__(self) -> None:
        self.logged = False

    def passed(self) -> None:
        if not self.logged:
            self.logged = True
            log_phase("healthy", "done")
