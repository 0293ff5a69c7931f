"""One closed-loop level on more than one event loop: worker processes, each with its share of the slots.

At concurrency 64 one event loop reads 64 streams; when a burst of chunks arrives together, the
last stream's task runs after the others' steps, and its stamps and next request wait with it.
Threads would share one core (the GIL), so the extra loops are processes. Each worker is forked
from the CLI after its imports (no second start-up), runs :func:`~.loadgen.run_load` for its share
of the slots, requests and warm-up requests, opens its connections and warms up, then waits at a
common barrier: every loop opens its window at the same instant. Worker ``k`` of ``n`` numbers its
requests ``k, k + n, k + 2n, ...`` within the warm-up's and the window's index ranges, so the
loops' requests together are exactly the ones one loop would send (same prompts, same lengths).
Their records are merged into one :class:`~.loadgen.LoadResult` (``perf_counter`` is the system's
monotonic clock, the same in every process), so the result files are those of one loop.

How many loops: :func:`auto_loops`, measured on a 2-core machine with the recording server on one
core (benchmarks/bench_accuracy.py, docs/bench.md): one loop up to ``LOOP_SLOTS`` slots, then a
loop per ``LOOP_SLOTS`` slots, at most one per usable CPU, less one when every endpoint is on this
machine (its server needs a core too). ``--loops N`` overrides it.

Ctrl-C is the CLI's: workers ignore SIGINT and stop when the parent says so (a shared flag). A
worker that dies makes the level fail with :class:`~llmctl.errors.LlmctlError`, the others stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import multiprocessing
import os
import resource
import signal
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from llmctl.errors import LlmctlError
from llmctl.serving.client.bench.loadgen import LoadPlan, LoadResult, Progress, run_blocking, run_load
from llmctl.serving.client.bench.prompts import PromptFactory

# slots one event loop serves before a second one pays off (measured: docs/bench.md, "Loops")
LOOP_SLOTS = 32
_POLL_S = 0.05
_PROGRESS_S = 0.25  # as often as one loop's ticker reports
# progress counters per worker in shared memory: phase (0 warm-up, 1 measuring), started, completed, failed
_FIELDS = 4


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity), else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - platforms without affinity


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (127.0.0.0/8, ``localhost``, ``::1``)."""
    host = (urlsplit(url if "://" in url else f"http://{url}").hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auto_loops(concurrency: int, cpus: int | None = None, *, local_server: bool = False) -> int:
    """The number of event loops for a closed loop of ``concurrency`` slots: one per ``LOOP_SLOTS``
    full slots, at least one, at most one per usable CPU; with ``local_server`` (every endpoint is
    on this machine) one CPU is left to the server, which streams on the same cores."""
    cpus = usable_cpus() if cpus is None else cpus
    if local_server:
        cpus -= 1
    return max(1, min(cpus, concurrency // LOOP_SLOTS))


def loops_for(plan: LoadPlan, requested: int | None) -> int:
    """The loops a level runs on: ``requested`` (``--loops``) or :func:`auto_loops`; an open loop
    runs on one, and no loop gets fewer than one slot or one measured request."""
    if plan.mode == "open":
        return 1
    local = bool(plan.endpoints) and all(is_loopback(url) for url in plan.endpoints)
    loops = auto_loops(plan.concurrency, local_server=local) if requested is None else requested
    limit = plan.request_limit()
    return max(1, min(loops, plan.concurrency, loops if limit is None else limit))


def share(total: int, parts: int, number: int) -> int:
    """Part ``number`` of ``total`` split as evenly as possible into ``parts``."""
    return total // parts + (1 if number < total % parts else 0)


async def run_level(
    plan: LoadPlan,
    prompts: PromptFactory,
    loops: int,
    *,
    stop: asyncio.Event | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    first_index: int = 0,
) -> LoadResult:
    """One level on ``loops`` event loops (in this process when one)."""
    stop = stop or asyncio.Event()
    if loops <= 1:
        return await run_load(plan, prompts, stop=stop, on_progress=on_progress, first_index=first_index)
    return await _Workers(plan, prompts, loops, first_index).run(stop, on_progress)


class _Workers:
    """The worker processes of one level and what they sent back."""

    def __init__(self, plan: LoadPlan, prompts: PromptFactory, loops: int, first_index: int) -> None:
        self.plan, self.prompts, self.loops, self.first_index = plan, prompts, loops, first_index
        context = multiprocessing.get_context("fork")
        self.barrier = context.Barrier(loops)
        self.halt = context.Value("b", 0, lock=False)
        self.counts = context.Array("q", _FIELDS * loops, lock=False)
        self.pipes = [context.Pipe(duplex=False) for _ in range(loops)]
        self.limit = plan.request_limit()
        self.processes = [
            context.Process(
                target=self._main, args=(number,), name=f"llmctl-bench-loop-{number}", daemon=True
            )
            for number in range(loops)
        ]

    def sub_plan(self, number: int) -> LoadPlan:
        """Worker ``number``'s share of the slots, measured requests and warm-up requests."""
        plan, loops = self.plan, self.loops
        return dataclasses.replace(
            plan,
            concurrency=share(plan.concurrency, loops, number),
            requests=None if self.limit is None else share(self.limit, loops, number),
            warmup=share(plan.warmup, loops, number),
        )

    def _main(self, number: int) -> None:
        """A worker process (forked): its share of the level; sends ("ok", result, peak RSS MiB) or
        ("error", text) to the parent."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it sets the halt flag
        sender = self.pipes[number][1]
        parent = os.getppid()
        counts, halt, base = self.counts, self.halt, _FIELDS * number
        stop = asyncio.Event()

        def report(progress: Progress) -> None:
            counts[base : base + _FIELDS] = [
                int(progress.phase == "measuring"),
                progress.started,
                progress.completed,
                progress.failed,
            ]

        async def gate() -> None:
            # nothing is in flight, so blocking this loop while the others warm up costs nothing
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:  # the parent stopped the level before the window
                stop.set()

        async def watch() -> None:
            while not (halt.value or os.getppid() != parent):
                await asyncio.sleep(0.1)
            stop.set()

        async def main() -> LoadResult:
            watcher = asyncio.ensure_future(watch())
            try:
                return await run_load(
                    self.sub_plan(number),
                    self.prompts,
                    stop=stop,
                    on_progress=report,
                    first_index=self.first_index + number,
                    window_gate=gate,
                    stride=self.loops,
                    window_first_index=self.first_index + self.plan.warmup + number,
                )
            finally:
                watcher.cancel()

        try:
            result = run_blocking(main)
        except BaseException as error:  # any failure: reported to the parent, which raises
            sender.send(("error", f"{type(error).__name__}: {error}"))
            return
        sender.send(("ok", result, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))

    async def run(self, stop: asyncio.Event, on_progress: Callable[[Progress], None] | None) -> LoadResult:
        plan = self.plan
        # the prompt pool is built once, here, and inherited by every worker
        self.prompts.prepare(self.first_index + plan.warmup + (self.limit or 0))
        started = time.perf_counter()
        for process in self.processes:
            process.start()
        for _receiver, sender in self.pipes:
            sender.close()  # the workers hold the write ends: a dead worker reads as EOF
        outcomes: dict[int, tuple[Any, ...]] = {}
        reported = 0.0
        try:
            while len(outcomes) < self.loops:
                self._collect(outcomes)
                if stop.is_set() or any(outcome[0] != "ok" for outcome in outcomes.values()):
                    # stopped, or a worker failed: every worker stops, also one waiting at the barrier
                    self.halt.value = 1
                    self.barrier.abort()
                if on_progress is not None and time.perf_counter() - reported >= _PROGRESS_S:
                    reported = time.perf_counter()
                    on_progress(self._progress(reported - started))
                if len(outcomes) < self.loops:
                    await asyncio.sleep(_POLL_S)
        finally:
            if len(outcomes) < self.loops:  # left early (cancelled): the workers stop first
                self.halt.value = 1
                self.barrier.abort()
            self._reap()
        if on_progress is not None:
            on_progress(self._progress(time.perf_counter() - started))
        self._raise_failures(outcomes)
        return merge(plan, [(outcomes[k][1], outcomes[k][2]) for k in range(self.loops)])

    def _collect(self, outcomes: dict[int, tuple[Any, ...]]) -> None:
        for number, (receiver, _sender) in enumerate(self.pipes):
            if number in outcomes:
                continue
            process = self.processes[number]
            if receiver.poll():
                try:
                    outcomes[number] = receiver.recv()
                except (EOFError, OSError):
                    process.join(timeout=5)
                    outcomes[number] = ("died", process.exitcode)
            elif not process.is_alive():
                outcomes[number] = ("died", process.exitcode)

    def _progress(self, elapsed: float) -> Progress:
        counts = list(self.counts)
        measuring = all(counts[k * _FIELDS] for k in range(self.loops))
        return Progress(
            phase="measuring" if measuring else "warm-up",
            started=sum(counts[k * _FIELDS + 1] for k in range(self.loops)),
            completed=sum(counts[k * _FIELDS + 2] for k in range(self.loops)),
            failed=sum(counts[k * _FIELDS + 3] for k in range(self.loops)),
            total=self.limit if measuring else self.plan.warmup,
            elapsed=elapsed,
        )

    def _reap(self) -> None:
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
        for receiver, _sender in self.pipes:
            receiver.close()

    def _raise_failures(self, outcomes: dict[int, tuple[Any, ...]]) -> None:
        for number in range(self.loops):
            kind, detail = outcomes[number][0], outcomes[number][1]
            where = f"load worker {number + 1} of {self.loops} (level c{self.plan.concurrency})"
            hint = "rerun with --loops 1 (one event loop, no worker processes)"
            if kind == "died":
                raise LlmctlError(f"{where} died ({_how(detail)}) before it reported its requests", hint)
            if kind == "error":
                raise LlmctlError(f"{where} failed: {detail}", hint)


def _how(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


def merge(plan: LoadPlan, parts: list[tuple[LoadResult, float]]) -> LoadResult:
    """The loops' results as one loop's: records in request order, the window from the first
    loop's opening to the last end, CPU and loop lag of every loop, each worker's peak RSS."""
    results = [result for result, _peak in parts]
    opened = [result.t0 for result in results if result.t0]
    return LoadResult(
        plan=plan,
        records=sorted((r for result in results for r in result.records), key=lambda r: r.index),
        warmup_records=sorted(
            (r for result in results for r in result.warmup_records), key=lambda r: r.index
        ),
        t0=min(opened, default=0.0),
        t_end=max(result.t_end for result in results),
        cpu_seconds=sum(result.cpu_seconds for result in results),
        loop_lag=[lag for result in results for lag in result.loop_lag],
        interrupted=any(result.interrupted for result in results),
        warmup_seconds=max(result.warmup_seconds for result in results),
        loops=len(parts),
        worker_peak_rss_mib=[peak for _result, peak in parts],
    )
