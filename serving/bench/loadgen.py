"""The load generator: a closed loop (fixed concurrency) or an open loop (arrival rate).

* Closed loop: ``concurrency`` workers each send a request, wait for its end and send the next,
  until ``requests`` have been sent or ``duration`` seconds have passed.
* Open loop: requests start on a schedule of ``rate`` per second, with exponential (Poisson) or
  constant gaps, whether or not earlier ones finished (optionally capped by ``max_concurrency``).
  Each record keeps its scheduled and its actual start, so the report can show the achieved rate.

Warm-up requests run first, with the same concurrency, and are kept apart from the results. The
load generator measures itself too: its CPU time over the measured phase and the lag of its event
loop (how late a 10 ms timer fires), so a saturated client cannot pass its own delays off as
server latency unnoticed. Setting ``stop`` ends the run early: nothing new starts, requests in
flight are cancelled and recorded as ``cancelled``, and everything measured so far is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmctl.serving.bench.client import RequestRecord, chat_body, stream_request
from llmctl.serving.bench.prompts import PromptFactory


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
    """The records of one run plus what the load generator measured about itself."""

    plan: LoadPlan
    records: list[RequestRecord]
    warmup_records: list[RequestRecord]
    t0: float
    t_end: float
    cpu_seconds: float
    loop_lag: list[float]
    interrupted: bool


ProgressCallback = Callable[[Progress], None]


class _Run:
    """One run: warm-up requests flow straight into the measured ones, with no pause between."""

    def __init__(self, plan: LoadPlan, prompts: PromptFactory, stop: asyncio.Event, first_index: int) -> None:
        self.plan = plan
        self.prompts = prompts
        self.stop = stop
        self.next_index = first_index
        self.limit = plan.request_limit()
        self.progress = Progress(
            phase="warm-up" if plan.warmup else "measuring", total=plan.warmup or self.limit
        )
        self.warmup_records: list[RequestRecord] = []
        self.records: list[RequestRecord] = []
        self.claimed = 0
        self.t0: float | None = None
        self.cpu0 = 0.0
        self.deadline: float | None = None
        self.lag: list[float] = []
        self.lag_task: asyncio.Future[None] | None = None
        # One httpx client per concurrent request, reused: httpx's connection pool scans all its
        # connections for every request, which costs O(concurrency) per request in one shared pool.
        self.idle_clients: list[httpx.AsyncClient] = []
        self.all_clients: list[httpx.AsyncClient] = []
        self.verify: ssl.SSLContext | bool | None = None

    def claim(self) -> bool | None:
        """The next request: True for warm-up, False for measured, None when the run is over."""
        if self.stop.is_set():
            return None
        if self.claimed < self.plan.warmup:
            self.claimed += 1
            return True
        if self.t0 is None:
            self.begin_measuring()
        elif self.deadline is not None and time.perf_counter() >= self.deadline:
            return None
        if self.limit is not None and self.claimed - self.plan.warmup >= self.limit:
            return None
        self.claimed += 1
        return False

    def begin_measuring(self) -> None:
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()
        if self.plan.duration is not None:
            self.deadline = self.t0 + self.plan.duration
        self.progress = Progress(phase="measuring", total=self.limit)
        self.lag_task = asyncio.ensure_future(_lag_monitor(self.lag))

    def take_client(self) -> httpx.AsyncClient:
        if self.idle_clients:
            return self.idle_clients.pop()
        if self.verify is None:
            # Loading the CA bundle costs tens of ms: once per run, never per client.
            tls = any(url.startswith("https:") for url in self.plan.endpoints)
            self.verify = httpx.create_ssl_context() if tls else False
        client = make_client(self.verify)
        self.all_clients.append(client)
        return client

    def prepare_clients(self, count: int) -> None:
        """Create the clients before the clock starts (creating one blocks the event loop briefly)."""
        fresh = [self.take_client() for _ in range(max(0, count - len(self.all_clients)))]
        self.idle_clients.extend(fresh)

    async def close(self) -> None:
        if self.lag_task is not None:
            self.lag_task.cancel()
            await asyncio.gather(self.lag_task, return_exceptions=True)
        await asyncio.gather(*(c.aclose() for c in self.all_clients), return_exceptions=True)

    async def one(self, warmup: bool, scheduled: float | None = None) -> None:
        index = self.next_index
        self.next_index += 1
        plan = self.plan
        spec = self.prompts.make(index)
        record = RequestRecord(
            index=index,
            endpoint=plan.endpoints[index % len(plan.endpoints)],
            warmup=warmup,
            input_tokens_sent=spec.input_tokens,
            max_tokens=spec.max_tokens,
            scheduled=scheduled,
        )
        (self.warmup_records if warmup else self.records).append(record)
        body = chat_body(
            plan.model, spec.text, spec.max_tokens, fixed_output=plan.fixed_output, extra=plan.extra_body
        )
        progress = self.progress
        progress.started += 1
        client = self.take_client()
        try:
            await stream_request(client, record, body, api_key=plan.api_key, timeout=plan.timeout)
        finally:
            self.idle_clients.append(client)
            if record.status == "pending":
                record.fail("cancelled", "stopped before the answer completed")
            if record.ok:
                progress.completed += 1
            else:
                progress.failed += 1

    async def closed(self) -> None:
        async def worker() -> None:
            while True:
                warmup = self.claim()
                if warmup is None:
                    return
                await self.one(warmup)

        workers = self.plan.concurrency
        if self.limit is not None:
            workers = min(workers, self.limit + self.plan.warmup)
        await _until_stopped([asyncio.ensure_future(worker()) for _ in range(max(workers, 1))], self.stop)

    async def open(self) -> None:
        plan = self.plan
        assert plan.rate
        rng = random.Random(plan.seed)
        rate = plan.rate
        in_flight: set[asyncio.Future[None]] = set()
        gate = asyncio.Semaphore(plan.max_concurrency) if plan.max_concurrency else None

        async def gated(warmup: bool, scheduled: float) -> None:
            try:
                await self.one(warmup, scheduled)
            finally:
                if gate is not None:
                    gate.release()

        async def schedule() -> None:
            when = time.perf_counter()
            while True:
                delay = when - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                warmup = self.claim()
                if warmup is None:
                    break
                if gate is not None:
                    await gate.acquire()
                task = asyncio.ensure_future(gated(warmup, when))
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


def make_client(verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
    """An httpx client for one stream at a time (no overall timeout of its own)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=2)
    # TCP_NODELAY: without it a request's body waits for the ACK of its headers (Nagle + delayed ACK)
    transport = httpx.AsyncHTTPTransport(
        verify=verify, limits=limits, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    )
    return httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=10.0), limits=limits, transport=transport, verify=verify
    )


async def run_load(
    plan: LoadPlan,
    prompts: PromptFactory,
    *,
    stop: asyncio.Event | None = None,
    on_progress: ProgressCallback | None = None,
    first_index: int = 0,
) -> LoadResult:
    """Run the warm-up and the measured phase of ``plan`` and return every record."""
    stop = stop or asyncio.Event()
    run = _Run(plan, prompts, stop, first_index)
    prompts.prepare(first_index + plan.warmup + (run.limit or 0))
    if plan.mode == "closed":
        run.prepare_clients(plan.concurrency)
    else:
        assert plan.rate
        run.prepare_clients(plan.max_concurrency or min(256, max(8, int(plan.rate * 4))))
    started = time.perf_counter()
    ticker = asyncio.ensure_future(_ticker(run, on_progress, started)) if on_progress else None
    try:
        if plan.mode == "closed":
            await run.closed()
        else:
            await run.open()
        t_end = time.perf_counter()
        cpu = time.process_time() - run.cpu0 if run.t0 is not None else 0.0
    finally:
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        if on_progress is not None:
            run.progress.elapsed = time.perf_counter() - started
            on_progress(run.progress)
        await run.close()
    return LoadResult(
        plan=plan,
        records=run.records,
        warmup_records=run.warmup_records,
        t0=run.t0 if run.t0 is not None else t_end,
        t_end=t_end,
        cpu_seconds=cpu,
        loop_lag=run.lag,
        interrupted=stop.is_set(),
    )


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
