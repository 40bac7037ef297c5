"""Worker processes, the parent's phase orchestration, and collecting the results.

One worker runs in-process. Several run as `spawn`ed processes, each with its own event
loop (uvloop when installed) and a slice of the clients, so the tool is not limited by one
core. Parent and workers share one small int64 array: slot 0 is the parent's command
(GO, RECONNECT, STOP, ABORT), each worker writes its phase and counters into its own slots.
The parent polls it to render progress and to decide when the drain is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import queue as queue_module
import signal
import time
from array import array
from collections.abc import Callable, Coroutine, MutableSequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from typing import Any, TypeVar

from mqttq.bench.options import BenchOptions
from mqttq.bench.results import Timeline, WorkerResult
from mqttq.bench.runner import (
    ABORT,
    CONTROL_SLOTS,
    FAILED,
    GO,
    PUBLISHED,
    READY,
    RECONNECT,
    RECONNECTED,
    SLOT_ACKED,
    SLOT_PHASE,
    SLOT_PUBLISHED,
    SLOT_RECEIVED,
    STOP,
    WORKER_SLOTS,
    Link,
    Worker,
)
from mqttq.bench.scenarios import Plan

T = TypeVar("T")
_POLL = 0.01
_PROGRESS_EVERY = 0.25


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Live totals across workers, handed to the progress callback a few times a second."""

    phase: str
    elapsed: float
    published: int
    acknowledged: int
    received: int
    expected: int | None


ProgressCallback = Callable[[Snapshot], None]


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on a fresh event loop, uvloop's when it is installed."""
    try:
        import uvloop  # noqa: PLC0415 - optional dependency

        factory: Callable[[], asyncio.AbstractEventLoop] | None = uvloop.new_event_loop
    except ImportError:
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


class SharedState:
    """The parent's view of the shared array."""

    def __init__(self, buf: MutableSequence[int], workers: int) -> None:
        self.buf = buf
        self.workers = workers

    @staticmethod
    def size(workers: int) -> int:
        return CONTROL_SLOTS + workers * WORKER_SLOTS

    def command(self, command: int, argument: int = 0) -> None:
        # Argument first: a worker that sees the command must see its argument.
        self.buf[1] = argument
        self.buf[0] = max(self.buf[0], command)

    def phases(self) -> list[int]:
        return [
            self.buf[CONTROL_SLOTS + w * WORKER_SLOTS + SLOT_PHASE] for w in range(self.workers)
        ]

    def all_at(self, phase: int) -> bool:
        return all(FAILED > p >= phase for p in self.phases())

    def failed(self) -> bool:
        return FAILED in self.phases()

    def total(self, slot: int) -> int:
        return sum(self.buf[CONTROL_SLOTS + w * WORKER_SLOTS + slot] for w in range(self.workers))


async def orchestrate(
    plan: Plan,
    options: BenchOptions,
    state: SharedState,
    alive: Callable[[], bool],
    progress: ProgressCallback | None = None,
) -> Timeline:
    """Drive the workers through the phases; STOP (or ABORT on failure) is always sent."""
    loop = asyncio.get_running_loop()
    timeline = Timeline()
    started = loop.time()
    last_progress = -1.0
    expected: int | None = None

    def interrupt() -> None:
        timeline.interrupted = True

    def tick(phase: str, force: bool = False) -> None:
        nonlocal last_progress
        now = loop.time()
        if progress is None or (not force and now - last_progress < _PROGRESS_EVERY):
            return
        last_progress = now
        progress(
            Snapshot(
                phase,
                now - started,
                state.total(SLOT_PUBLISHED),
                state.total(SLOT_ACKED),
                state.total(SLOT_RECEIVED),
                expected,
            )
        )

    async def until(done: Callable[[], bool], phase: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if done():
                return True
            if timeline.interrupted or state.failed() or not alive():
                return False
            if deadline is not None and loop.time() >= deadline:
                return False
            tick(phase)
            await asyncio.sleep(_POLL)

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        if not await until(lambda: state.all_at(READY), "connecting"):
            return timeline
        started = loop.time()
        state.command(GO)
        if not await until(lambda: state.all_at(PUBLISHED), "publishing"):
            return timeline
        published = state.total(SLOT_PUBLISHED)
        if plan.persistent:
            state.command(RECONNECT, published)
            if not await until(lambda: state.all_at(RECONNECTED), "reconnecting"):
                return timeline
        expected = published * plan.receipts_per_message
        target = expected
        drain_start = loop.time()
        timeline.drain_complete = await until(
            lambda: state.total(SLOT_RECEIVED) >= target, "draining", options.drain_timeout
        )
        timeline.drain_s = loop.time() - drain_start
        return timeline
    finally:
        state.command(ABORT if state.failed() or not alive() else STOP)
        tick("stopping", force=True)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)


async def _run_local(
    plan: Plan, options: BenchOptions, progress: ProgressCallback | None
) -> tuple[list[WorkerResult], Timeline]:
    buf = array("q", [0] * SharedState.size(1))
    task = asyncio.ensure_future(Worker(plan, options, 0, 1, Link(buf, 0)).run())
    try:
        timeline = await orchestrate(
            plan, options, SharedState(buf, 1), lambda: not task.done(), progress
        )
    finally:
        buf[0] = max(buf[0], STOP)
    return [await task], timeline


def _worker_main(
    *,
    plan: Plan,
    options: BenchOptions,
    worker: int,
    workers: int,
    buf: MutableSequence[int],
    results: Queue[WorkerResult],
) -> None:
    # The parent turns Ctrl-C into STOP for everyone; a worker must not die on it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    results.put(run_async(Worker(plan, options, worker, workers, Link(buf, worker)).run()))


def _run_processes(
    plan: Plan, options: BenchOptions, workers: int, progress: ProgressCallback | None
) -> tuple[list[WorkerResult], Timeline]:
    ctx = multiprocessing.get_context("spawn")
    buf = ctx.Array("q", SharedState.size(workers), lock=False)
    results: Queue[WorkerResult] = ctx.Queue()
    processes = [
        ctx.Process(
            target=_worker_main,
            kwargs={
                "plan": plan,
                "options": options,
                "worker": w,
                "workers": workers,
                "buf": buf,
                "results": results,
            },
            name=f"mqttq-bench-worker-{w}",
            daemon=True,
        )
        for w in range(workers)
    ]
    for process in processes:
        process.start()

    def alive() -> bool:
        return all(p.exitcode in (None, 0) for p in processes)

    state = SharedState(buf, workers)
    try:
        timeline = run_async(orchestrate(plan, options, state, alive, progress))
    finally:
        state.command(STOP)
    collected: dict[int, WorkerResult] = {}
    # Workers end within their cleanup timeouts; this bound only guards against a hang.
    deadline = time.monotonic() + options.connect_timeout + options.drain_timeout + 30
    while len(collected) < workers and time.monotonic() < deadline:
        try:
            result = results.get(timeout=0.2)
        except queue_module.Empty:
            if not any(p.is_alive() for p in processes):
                with contextlib.suppress(queue_module.Empty):
                    while True:
                        result = results.get(timeout=0.5)
                        collected[result.worker] = result
                break
            continue
        collected[result.worker] = result
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
    for w, process in enumerate(processes):
        if w not in collected:
            collected[w] = WorkerResult(
                w, fatal=f"worker {w} ended without a result (exit code {process.exitcode})"
            )
    return [collected[w] for w in range(workers)], timeline


def run_bench(
    plan: Plan, options: BenchOptions, progress: ProgressCallback | None = None
) -> tuple[list[WorkerResult], Timeline]:
    """Run `plan` on `options.worker_count(plan.clients)` workers; every phase is bounded."""
    workers = options.worker_count(plan.clients)
    if workers == 1:
        return run_async(_run_local(plan, options, progress))
    return _run_processes(plan, options, workers, progress)
