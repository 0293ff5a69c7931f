"""The load generator: a closed loop (fixed concurrency) or an open loop (arrival rate).

* Closed loop: ``concurrency`` workers each send a request, wait for its end and send the next,
  until ``requests`` have been sent or ``duration`` seconds have passed.
* Open loop: requests start on a schedule of ``rate`` per second, with exponential (Poisson) or
  constant gaps, whether or not earlier ones finished (optionally capped by ``max_concurrency``).
  Each record keeps its scheduled and its actual start, so the report can show the achieved rate.

A level runs in two phases. The warm-up phase opens one connection per slot (a ``GET /models``
each, as a long-running client would have them open), then runs ``warmup`` requests with the same
concurrency (or rate) and waits until every one of them has ended. Only then does the measured
window open: in a closed loop every slot starts its first request at once, in an open loop the
schedule starts at the window's first instant. The window closes when its last request ends, so
its duration and throughput cover measured requests only, never a ragged mix of warm-up waves.

The load generator measures itself too: its CPU time over the window and the lag of its event loop
(how late a 10 ms timer fires), so a saturated client cannot pass its own delays off as server
latency unnoticed. Setting ``stop`` ends the run early: nothing new starts, requests in flight are
cancelled and recorded as ``cancelled``, and everything measured so far is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from llmctl.serving.client.bench import wire
from llmctl.serving.client.bench.client import (
    RequestRecord,
    chat_body,
    parse_stream,
    request_headers,
    stream_request,
)
from llmctl.serving.client.bench.prompts import PromptFactory, PromptSpec

T = TypeVar("T")

# request bodies encoded before the window opens (a 512-token prompt is about 3 kB)
PREBUILT_BODIES = 4096


@dataclass
class LoadPlan:
    """What load to send where."""

    endpoints: list[str]
    model: str
    api_key: str | None = None
    concurrency: int = 1
    rate: float | None = None
    arrival: str = "poisson"
    max_concurrency: int | None = None
    requests: int | None = None
    duration: float | None = None
    warmup: int = 0
    timeout: float = 120.0
    fixed_output: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    @property
    def mode(self) -> str:
        return "open" if self.rate else "closed"

    def request_limit(self) -> int | None:
        """The number of measured requests: as given, or a default when neither limit is set."""
        if self.requests is not None:
            return self.requests
        if self.duration is not None:
            return None
        return max(50, 8 * self.concurrency)


@dataclass
class Progress:
    """Live counts for a progress display."""

    phase: str
    started: int = 0
    completed: int = 0
    failed: int = 0
    total: int | None = None
    elapsed: float = 0.0

    @property
    def in_flight(self) -> int:
        return self.started - self.completed - self.failed


@dataclass
class LoadResult:
    """The records of one run plus what the load generator measured about itself.

    ``t0`` and ``t_end`` bound the measured window (its first start and its last end);
    ``warmup_seconds`` is how long the warm-up phase before it took.
    """

    plan: LoadPlan
    # repr=False: asyncio.Runner.run (3.11) formats the main task, result included, when it checks
    # its SIGINT handler; a repr of every chunk of every record cost about 0.1 CPU s per run
    records: list[RequestRecord] = field(repr=False)
    warmup_records: list[RequestRecord] = field(repr=False)
    t0: float
    t_end: float
    cpu_seconds: float
    loop_lag: list[float] = field(repr=False)
    interrupted: bool
    warmup_seconds: float = 0.0
    loops: int = 1  # event loops (processes) the level ran on (loops.py)
    worker_peak_rss_mib: list[float] = field(default_factory=list)  # each worker process's, when several

    @property
    def window_start(self) -> float:
        """Where the window's duration counts from: the first measured request written to the
        socket (latencies count from there too); ``t0`` when none was.

        The client's own lead-in (``window_start - t0``: building and handing the first requests of a
        burst to the sockets) is reported apart, as ``load.lead_in_s``.
        """
        return min((r.written for r in self.records if r.written is not None), default=self.t0)


ProgressCallback = Callable[[Progress], None]


class _Run:
    """One level: the warm-up phase, then the measured window."""

    def __init__(
        self, plan: LoadPlan, prompts: PromptFactory, stop: asyncio.Event, first_index: int, stride: int = 1
    ) -> None:
        self.plan = plan
        self.prompts = prompts
        self.stop = stop
        self.next_index = first_index
        self.stride = stride  # one of several loops takes every stride-th request index (loops.py)
        self.limit = plan.request_limit()
        self.progress = Progress(phase="warm-up", total=plan.warmup)
        self.warmup_records: list[RequestRecord] = []
        self.records: list[RequestRecord] = []
        self.headers = request_headers(plan.api_key)
        self.bodies: dict[int, bytes] = {}
        self.pool = wire.Pool()
        # the phase being run: how many requests it may claim, and how many it has
        self.warmup_phase = True
        self.quota: int | None = plan.warmup
        self.claimed = 0
        self.deadline: float | None = None

    def slots(self) -> int:
        """Requests in flight at most: the concurrency, or the open loop's cap (or a guess)."""
        plan = self.plan
        if plan.mode == "closed":
            return plan.concurrency
        assert plan.rate
        return plan.max_concurrency or min(256, max(8, int(plan.rate * 4)))

    def encode(self, spec: PromptSpec) -> bytes:
        """The JSON bytes of one request's body."""
        plan = self.plan
        body = chat_body(
            plan.model,
            spec.text,
            spec.max_tokens,
            fixed_output=plan.fixed_output,
            extra=plan.extra_body,
            messages=spec.messages,
        )
        return json.dumps(body).encode()

    def prebuild(self, first: int, count: int) -> None:
        """Encode the bodies of requests ``first`` .. ``first + count - 1`` before the window opens,
        so that a burst of starts does not pay for JSON encoding (about 0.1 ms a request) on the hot
        path; requests beyond them (a ``--duration`` run) are encoded when they start."""
        for index in range(first, first + count * self.stride, self.stride):
            spec = self.prompts.make(index)
            self.bodies[index] = self.encode(spec)

    def claim(self) -> bool:
        """Whether another request of the current phase may start."""
        if self.stop.is_set():
            return False
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return False
        if self.quota is not None and self.claimed >= self.quota:
            return False
        self.claimed += 1
        return True

    async def open_connections(self) -> None:
        """One connection per slot, opened before any clock starts (errors are the requests' to report)."""
        pool, headers = self.pool, request_headers(self.plan.api_key, stream=False)
        endpoints = self.plan.endpoints

        async def touch(number: int) -> None:
            url = endpoints[number % len(endpoints)] + "/models"
            with contextlib.suppress(wire.WireError, OSError, asyncio.TimeoutError):
                await wire.fetch(pool, url, headers)

        await asyncio.gather(*(touch(n) for n in range(self.slots())))

    async def one(self, scheduled: float | None = None) -> None:
        index = self.next_index
        self.next_index += self.stride
        plan = self.plan
        spec = self.prompts.make(index)
        record = RequestRecord(
            index=index,
            endpoint=plan.endpoints[index % len(plan.endpoints)],
            warmup=self.warmup_phase,
            input_tokens_sent=spec.input_tokens,
            max_tokens=spec.max_tokens,
            scheduled=scheduled,
        )
        (self.warmup_records if self.warmup_phase else self.records).append(record)
        body = self.bodies.pop(index, None) or self.encode(spec)
        progress = self.progress
        progress.started += 1
        try:
            # parsed after the window (parse_stream): no stream's parsing delays another's stamps
            await stream_request(
                self.pool,
                record,
                body,
                self.headers,
                timeout=plan.timeout,
                parse=False,
            )
        finally:
            if record.status == "pending":
                record.fail("cancelled", "stopped before the answer completed")
            if record.status == "received":
                progress.completed += 1
            else:
                progress.failed += 1

    async def closed(self, workers: int) -> None:
        """Start ``workers`` requests at once; each worker sends its next when its last ends."""

        async def worker() -> None:
            while self.claim():
                await self.one()

        await _until_stopped([asyncio.ensure_future(worker()) for _ in range(max(workers, 1))], self.stop)

    async def open(self, seed: int, start: float) -> None:
        """Start requests on the schedule from ``start`` and wait for every one to end."""
        plan = self.plan
        assert plan.rate
        rng = random.Random(seed)
        rate = plan.rate
        in_flight: set[asyncio.Future[None]] = set()
        gate = asyncio.Semaphore(plan.max_concurrency) if plan.max_concurrency else None

        async def gated(scheduled: float) -> None:
            try:
                await self.one(scheduled)
            finally:
                if gate is not None:
                    gate.release()

        async def schedule() -> None:
            when = start
            while True:
                # until its time, never before: uvloop's timers round to whole milliseconds from a
                # time cached at the loop's turn, so one sleep can end over a millisecond early
                while (delay := when - time.perf_counter()) > 0:
                    await asyncio.sleep(delay)
                if not self.claim():
                    break
                if gate is not None:
                    await gate.acquire()
                task = asyncio.ensure_future(gated(when))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                when += rng.expovariate(rate) if plan.arrival == "poisson" else 1.0 / rate
            if in_flight:
                await asyncio.gather(*list(in_flight), return_exceptions=True)

        scheduler = asyncio.ensure_future(schedule())
        stopped = await _until_stopped([scheduler], self.stop)
        if stopped and in_flight:
            for task in list(in_flight):
                task.cancel()
            await asyncio.gather(*list(in_flight), return_exceptions=True)

    async def phase(self, quota: int | None, seed: int, start: float) -> None:
        """Run one phase of at most ``quota`` requests; an open loop's schedule starts at ``start``."""
        self.quota, self.claimed = quota, 0
        if self.plan.mode == "closed":
            await self.closed(self.plan.concurrency if quota is None else min(self.plan.concurrency, quota))
        else:
            await self.open(seed, start)


async def _until_stopped(tasks: list[asyncio.Future[None]], stop: asyncio.Event) -> bool:
    """Wait for ``tasks``; when ``stop`` is set first, cancel them. True when stopped."""
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    pending: set[asyncio.Future[Any]] = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(stopper)
            if stopper in done:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return True
            for task in done:
                if task is not stopper and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
        return False
    finally:
        stopper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopper


async def _ticker(run: _Run, on_progress: ProgressCallback, started: float) -> None:
    while True:
        run.progress.elapsed = time.perf_counter() - started
        on_progress(run.progress)
        await asyncio.sleep(0.25)


async def _lag_monitor(samples: list[float], interval: float = 0.01) -> None:
    while True:
        before = time.perf_counter()
        await asyncio.sleep(interval)
        samples.append(time.perf_counter() - before - interval)


async def run_load(
    plan: LoadPlan,
    prompts: PromptFactory,
    *,
    stop: asyncio.Event | None = None,
    on_progress: ProgressCallback | None = None,
    first_index: int = 0,
    window_gate: Callable[[], Awaitable[None]] | None = None,
    stride: int = 1,
    window_first_index: int | None = None,
) -> LoadResult:
    """Run the warm-up phase and the measured window of ``plan`` and return every record.

    ``window_gate``, when given, is awaited after the warm-up, right before the window opens: several
    load generators (processes) use it to open their windows at one common instant. One of several
    loops (loops.py) numbers its requests ``first_index``, ``first_index + stride``, ... in the
    warm-up and from ``window_first_index`` on in the window, so that the loops' requests together
    are the indices one loop would have sent.
    """
    stop = stop or asyncio.Event()
    run = _Run(plan, prompts, stop, first_index, stride)
    prompts.prepare(first_index + (plan.warmup + (run.limit or 0)) * stride)
    started = time.perf_counter()
    ticker = asyncio.ensure_future(_ticker(run, on_progress, started)) if on_progress else None
    lag: list[float] = []
    lag_task: asyncio.Future[None] | None = None
    t0 = t_end = cpu0 = cpu1 = warmup_seconds = 0.0
    try:
        await run.open_connections()
        if plan.warmup and not stop.is_set():
            await run.phase(plan.warmup, plan.seed + 1, time.perf_counter())
        warmup_seconds = time.perf_counter() - started
        run.warmup_phase = False
        if window_first_index is not None:
            run.next_index = window_first_index
        run.prebuild(run.next_index, min(run.limit or 0, PREBUILT_BODIES))
        if window_gate is not None:
            await window_gate()
        run.progress = Progress(phase="measuring", total=run.limit)
        lag_task = asyncio.ensure_future(_lag_monitor(lag))
        cpu0, t0 = time.process_time(), time.perf_counter()
        if plan.duration is not None:
            run.deadline = t0 + plan.duration
        if not stop.is_set():
            await run.phase(run.limit, plan.seed, t0)
        t_end, cpu1 = time.perf_counter(), time.process_time()
        # the window closes when its last request ends (or when it was stopped, if none did)
        t_end = max((r.end for r in run.records if r.end is not None), default=t_end)
    finally:
        for record in (*run.warmup_records, *run.records):
            parse_stream(record)
        for task in (ticker, lag_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if on_progress is not None:
            run.progress.elapsed = time.perf_counter() - started
            on_progress(run.progress)
        run.pool.close()
    return LoadResult(
        plan=plan,
        records=run.records,
        warmup_records=run.warmup_records,
        t0=t0,
        t_end=t_end,
        cpu_seconds=cpu1 - cpu0,
        loop_lag=lag,
        interrupted=stop.is_set(),
        warmup_seconds=warmup_seconds,
    )


def run_blocking(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` in a fresh event loop: uvloop's when it is installed (less CPU per chunk).

    The stdlib loop is the fallback (and the only choice on Python 3.10, which lacks
    ``asyncio.Runner``).
    """
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - depends on the environment
        factory = None
    if factory is None or sys.version_info < (3, 11):
        return asyncio.run(main())
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main())


def install_stop_on_sigint(stop: asyncio.Event) -> Callable[[], None]:
    """First Ctrl-C sets ``stop`` (a clean stop); the next one interrupts as usual.

    Returns a function that removes the handler. On platforms without loop signal handlers this
    does nothing.
    """
    import signal

    loop = asyncio.get_running_loop()

    def handler() -> None:
        stop.set()
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        return lambda: None

    def remove() -> None:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(signal.SIGINT)

    return remove
