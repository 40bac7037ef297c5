"""Pending asynchronous work: per-client ordered completions, tracked storage tasks, and
the batching of queue writes.

A client's packets are handled as they arrive, but what answers them (acks, deliveries)
may wait for storage. `OrderedSteps` lets a client keep reading while its earlier writes
commit, and still emit every answer in arrival order. `BackgroundTasks` owns the storage
writes nobody waits for (PUBACK -> remove) so that `barrier(client_id)` can wait until the
writes issued so far for a client have settled, before its session is fetched or deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mqttq.broker.delivery.latency import LatencyHistograms

__all__ = [
    "BackgroundTasks",
    "EnqueueBatcher",
    "OrderedSteps",
    "RemoveBatcher",
    "StepDone",
    "StepRun",
]

logger = logging.getLogger("mqttq.broker")

T = TypeVar("T")

_Waiter = tuple[asyncio.Future[list[Any]], int, int, int | None]
"""A caller of `EnqueueBatcher.enqueue`: its future, its items' [start, end) in the
batch, and the inbox row of its message (None: not logged)."""

StepDone = Callable[["asyncio.Future[Any] | None"], None]
"""Completion of a step; receives the step's future (None for a step with nothing to wait)."""


class StepRun:
    """The completion of a run of items (a client's answers) that wait for one future,
    added one at a time (`OrderedSteps.add_to_run`) and completed together: one step, one
    look at the future, one call, instead of a step, a check and a callable per item."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[int] = []
        """What the run completes, in the order added (the subclass says what an item is)."""

    def complete(self, future: asyncio.Future[Any]) -> None:
        """Complete every item once `future` settled (its outcome is theirs)."""
        raise NotImplementedError


_Step = tuple["asyncio.Future[Any] | None", "StepDone | None", bool, "StepRun | None"]
"""A waiting step: its future, its completion (None for a run), whether it holds
deliveries, its run (None for a single completion)."""


class OrderedSteps:
    """Completions that run strictly in the order their steps were added.

    A step waits for its own future (if any) and for every earlier step. With nothing
    pending and nothing to wait for, `add` runs the completion at once (the common path:
    no allocation, no scheduling). Steps that share a future (the messages of one loop
    iteration appended to an integration's log) share one callback on it, and answers
    that only wait for it may share one step, a `StepRun` (`add_to_run`, else `add_run`).

    A step `holds` deliveries unless its adder says otherwise: a later message of the same
    client may be delivered at once only while no step `holding()` (its deliveries would
    overtake the held ones); a step that only answers the client (a PUBACK waiting for a
    log's fsync, its deliveries made) holds nothing, nor does a run.

    `len()` counts what waits: a step, or each item of a run.
    """

    __slots__ = ("_after", "_holding", "_run", "_run_future", "_steps", "waiting")

    def __init__(self, after: Callable[[], None] | None = None) -> None:
        self._steps: deque[_Step] | None = None
        """Created by the first step that has to wait (most clients never have one)."""
        self._after = after
        """Called after waiting steps ran (for flow control on the step count)."""
        self._holding = 0
        """Waiting steps that hold deliveries."""
        self.waiting = 0
        """Waiting steps, a run counting its items: `len()` (read as an attribute by the
        client's flow control, once per PUBLISH)."""
        self._run: StepRun | None = None
        """The last waiting step's run, while it is the last (items may join it)."""
        self._run_future: asyncio.Future[Any] | None = None
        """What `_run` waits for."""

    def __len__(self) -> int:
        return self.waiting

    def holding(self) -> bool:
        """Whether a waiting step holds deliveries (see the class docstring)."""
        return self._holding > 0

    def add(self, future: asyncio.Future[Any] | None, done: StepDone, holds: bool = True) -> None:
        """Queue `done(future)` to run after `future` settles and all earlier steps ran;
        `holds`: the step holds deliveries back (see the class docstring)."""
        steps = self._steps
        if not steps:
            if future is None:
                done(None)
                return
            if steps is None:
                steps = self._steps = deque()
        self._queue(steps, (future, done, holds, None), future, holds)

    def last_run(self, future: asyncio.Future[Any]) -> StepRun | None:
        """The last waiting step's run when it waits for `future`, else None."""
        return self._run if self._run_future is future else None

    def add_to_run(self, future: asyncio.Future[Any], item: int) -> bool:
        """Add `item` to the last waiting step's run when that run waits for `future`;
        False when there is none such (the caller adds one with `add_run`)."""
        run = self._run
        if run is None or self._run_future is not future:
            return False
        run.items.append(item)
        self.waiting += 1
        return True

    def add_run(self, future: asyncio.Future[Any], run: StepRun) -> None:
        """Queue `run.complete(future)` as one step (counting the items `run` holds), to
        run after `future` settles and all earlier steps ran; while it is the last step,
        `add_to_run` adds to it."""
        steps = self._steps
        if steps is None:
            steps = self._steps = deque()
        self._queue(steps, (future, None, False, run), future, False)
        self.waiting += len(run.items) - 1
        self._run = run
        self._run_future = future

    def _queue(
        self,
        steps: deque[_Step],
        step: _Step,
        future: asyncio.Future[Any] | None,
        holds: bool,
    ) -> None:
        shared = bool(steps) and future is not None and steps[-1][0] is future
        steps.append(step)
        self.waiting += 1
        self._run = self._run_future = None
        if holds:
            self._holding += 1
        # A step after one waiting for the same future: that one's callback advances past
        # this one too (a run of equal futures is never split: it completes at once).
        if future is not None and not shared:
            future.add_done_callback(self._advance)

    def _advance(self, _future: object = None) -> None:
        steps = self._steps
        while steps:
            future, done, holds, run = steps[0]
            if future is not None and not future.done():
                return
            steps.popleft()
            try:
                if run is not None:
                    self.waiting -= len(run.items)
                    if run is self._run:
                        self._run = self._run_future = None
                    assert future is not None
                    run.complete(future)
                else:
                    self.waiting -= 1
                    if holds:
                        self._holding -= 1
                    assert done is not None
                    done(future)
            except Exception:
                logger.exception("completion of a client step failed")
        if self._after is not None:
            self._after()


class BackgroundTasks:
    """Storage writes started without a waiter; failures are logged, never lost silently.

    Each write may name the client it is for, so that `barrier(client_id)` waits only for
    that client's writes (and for the queue writes in flight, which may hold entries for
    any client), not for every write of the broker: a reconnect during a large backlog
    drain must not wait behind thousands of other sessions' PUBACK removals.
    """

    __slots__ = ("_by_client", "_enqueues", "_latency", "_tasks")

    def __init__(self, latency: LatencyHistograms | None = None) -> None:
        self._latency = latency
        """Where the duration of each spawned write is recorded (by `what`)."""
        self._tasks: set[asyncio.Future[Any]] = set()
        self._by_client: dict[str, set[asyncio.Future[Any]]] = {}
        self._enqueues: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self, coro: Coroutine[Any, Any, T], what: str, client_id: str | None = None
    ) -> asyncio.Future[T]:
        """Start `coro` now; its failure is logged as `what` (the caller may also await it).
        `client_id`: the client the write is for (see `barrier`)."""
        task = asyncio.ensure_future(coro)
        self.track(task, what, client_id)
        if self._latency is not None:
            task.add_done_callback(partial(_timed, self._latency, what, task.get_loop().time()))
        return task

    def track(
        self, future: asyncio.Future[Any], what: str | None, client_id: str | None = None
    ) -> None:
        """Include an already started future in `barrier()`; log its failure as `what`
        (None: the caller logs it)."""
        self._tasks.add(future)
        if client_id is not None:
            pending = self._by_client.get(client_id)
            if pending is None:
                pending = self._by_client[client_id] = set()
            pending.add(future)
        future.add_done_callback(partial(self._settled, what, client_id))

    def observe(self, what: str, seconds: float) -> None:
        """Record the duration of a storage operation not started by `spawn`."""
        if self._latency is not None:
            self._latency.observe(what, seconds)

    def track_enqueue(self, future: asyncio.Future[Any]) -> None:
        """A queue write that may hold entries for any client: every barrier waits for it."""
        self._enqueues.add(future)
        self.track(future, None)

    def _settled(self, what: str | None, client_id: str | None, done: asyncio.Future[Any]) -> None:
        self._tasks.discard(done)
        self._enqueues.discard(done)
        if client_id is not None:
            pending = self._by_client.get(client_id)
            if pending is not None:
                pending.discard(done)
                if not pending:
                    del self._by_client[client_id]
        if what is not None and not done.cancelled() and done.exception() is not None:
            logger.warning("storage %s failed: %s", what, done.exception())

    async def barrier(self, client_id: str | None = None) -> None:
        """Wait until the writes started before this call have settled (failed ones too):
        every write when `client_id` is None, else that client's writes and the queue
        writes in flight."""
        if client_id is None:
            pending = list(self._tasks)
        else:
            pending = [*self._by_client.get(client_id, ()), *self._enqueues]
        # One at a time: most are done by the time the first one is, and asyncio.wait over
        # thousands of futures costs a callback on each of them.
        for future in pending:
            if not future.done():
                await asyncio.wait((future,))


def _timed(latency: LatencyHistograms, what: str, start: float, done: asyncio.Future[Any]) -> None:
    latency.observe(what, done.get_loop().time() - start)


class EnqueueBatcher:
    """Gathers the `enqueue` items of every PUBLISH handled in one event-loop iteration
    into one storage call: one job, one transaction, for all of them.

    Each caller still gets its own future with exactly its own entries, and a failure of
    the shared call fails every caller in it (each publisher then hears 0x80).

    With `chunk`, an iteration's items are split (between callers, never inside one) into
    calls of at most `chunk` items, issued in order: a store that commits each call on its
    own (SQLite) lets the first callers' acks go out while later items are still written.
    An iteration of logged callers only (the publish inbox's, answered already) is one call
    whatever its size: one commit instead of several.
    """

    __slots__ = ("_chunk", "_enqueue", "_enqueue_logged", "_items", "_loop", "_tasks", "_waiters")

    def __init__(
        self,
        enqueue: Callable[[list[tuple[str, Any]]], Coroutine[Any, Any, list[Any]]],
        tasks: BackgroundTasks,
        chunk: int | None = None,
        enqueue_logged: Callable[[list[tuple[str, Any]], list[int]], Coroutine[Any, Any, list[Any]]]
        | None = None,
    ) -> None:
        """`enqueue_logged(items, seqs)`: the store's enqueue that also deletes the inbox
        rows `seqs` in its transaction (`InboxStore`), for calls with logged messages."""
        self._enqueue = enqueue
        self._enqueue_logged = enqueue_logged
        self._tasks = tasks
        self._chunk = chunk
        self._loop: asyncio.AbstractEventLoop | None = None
        self._items: list[tuple[str, Any]] = []
        self._waiters: list[_Waiter] = []

    def enqueue(
        self, items: list[tuple[str, Any]], logged: int | None = None
    ) -> asyncio.Future[list[Any]]:
        """A future of the entries for `items`, aligned with them. `logged`: the inbox row
        of the message they come from, deleted by the same commit (needs `enqueue_logged`)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        start = len(self._items)
        if not start:
            loop.call_soon(self._flush)
        self._items += items
        self._waiters.append((future, start, len(self._items), logged))
        self._tasks.track_enqueue(future)
        return future

    def _flush(self) -> None:
        items, self._items = self._items, []
        waiters, self._waiters = self._waiters, []
        chunk = self._chunk
        if (
            chunk is None
            or len(items) <= chunk
            or all(logged is not None for _f, _s, _e, logged in waiters)
        ):
            # Logged messages' publishers were answered already: one commit serves best.
            self._call(items, waiters)
            return
        first = 0  # index in `waiters` of the group's first caller
        for index, (_future, _start, end, _logged) in enumerate(waiters):
            last = index + 1 == len(waiters)
            if last or waiters[index + 1][2] - waiters[first][1] > chunk:
                offset = waiters[first][1]
                group = [
                    (f, s - offset, e - offset, logged)
                    for f, s, e, logged in waiters[first : index + 1]
                ]
                self._call(items[offset:end], group)
                first = index + 1

    def _call(self, items: list[tuple[str, Any]], waiters: list[_Waiter]) -> None:
        seqs = [logged for _f, _s, _e, logged in waiters if logged is not None]
        if seqs:
            assert self._enqueue_logged is not None
            task = asyncio.ensure_future(self._enqueue_logged(items, seqs))
        else:
            task = asyncio.ensure_future(self._enqueue(items))
        loop = task.get_loop()
        started = loop.time()

        def settled(done: asyncio.Future[list[Any]]) -> None:
            self._tasks.observe("enqueue", loop.time() - started)
            if done.cancelled():
                error: BaseException | None = asyncio.CancelledError()
            else:
                error = done.exception()
            if error is not None:
                logger.warning("storage enqueue of %d messages failed: %s", len(items), error)
            for future, start, end, _logged in waiters:
                if future.done():
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result()[start:end])

        task.add_done_callback(settled)


class RemoveBatcher:
    """Gathers the queue-entry removals (PUBACK, PUBCOMP, expired, discarded) of one
    event-loop iteration into one `remove_many` call: one job and one transaction for all
    of them, instead of a task and a transaction each.

    The batch's future is tracked for every client in it from the first removal on, so a
    `barrier(client_id)` in the same iteration already waits for it; a failure is logged
    once, as "remove".
    """

    __slots__ = ("_batch", "_clients", "_items", "_loop", "_remove_many", "_tasks")

    def __init__(
        self,
        remove_many: Callable[[list[tuple[str, int]]], Coroutine[Any, Any, None]],
        tasks: BackgroundTasks,
    ) -> None:
        self._remove_many = remove_many
        self._tasks = tasks
        self._loop: asyncio.AbstractEventLoop | None = None
        self._items: list[tuple[str, int]] = []
        self._clients: set[str] = set()
        self._batch: asyncio.Future[None] | None = None

    def remove(self, client_id: str, packet_id: int) -> None:
        """Delete the entry in this iteration's batch."""
        batch = self._batch
        if batch is None:
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            batch = self._batch = loop.create_future()
            loop.call_soon(self._flush)
            self._tasks.track(batch, "remove")
        if client_id not in self._clients:
            self._clients.add(client_id)
            self._tasks.track(batch, None, client_id)
        self._items.append((client_id, packet_id))

    def _flush(self) -> None:
        items, batch = self._items, self._batch
        assert batch is not None
        self._items, self._batch = [], None
        self._clients = set()
        task = asyncio.ensure_future(self._remove_many(items))
        loop = task.get_loop()
        started = loop.time()

        def settled(done: asyncio.Future[None]) -> None:
            self._tasks.observe("remove", loop.time() - started)
            if batch.done():
                return
            if done.cancelled():
                batch.cancel()
            elif (error := done.exception()) is not None:
                batch.set_exception(error)
            else:
                batch.set_result(None)

        task.add_done_callback(settled)
